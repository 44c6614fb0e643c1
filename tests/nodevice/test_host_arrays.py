"""Host arrays the CPU back end allocates or copies for kernels: C-contiguous, on a cache-line boundary."""

import numpy as np
import pytest

from codegen.backend import HOST_ALIGNMENT, aligned_empty, is_aligned
from codegen.cpu_backend import CpuBackend


@pytest.mark.parametrize("shape, dtype", [((3, 5, 7), "float32"), ((1000,), "float64"), ((2, 3), "int32"), ((), "float32")])
def test_aligned_empty_has_the_shape_and_dtype_asked_for_on_a_line_boundary(shape, dtype):
    for _ in range(8):   # numpy's own allocations start on 16-byte boundaries, so several tries would miss
        array = aligned_empty(shape, dtype)
        assert array.shape == shape and array.dtype == np.dtype(dtype)
        assert array.flags.c_contiguous and array.flags.writeable
        assert array.ctypes.data % HOST_ALIGNMENT == 0


def test_an_empty_aligned_array_has_its_shape():
    assert aligned_empty((0, 4), "float32").shape == (0, 4)


def test_is_aligned_tells_an_offset_or_strided_array_apart():
    array = aligned_empty((64,), "float32")
    assert is_aligned(array)
    assert not is_aligned(array[4:])             # 16 bytes past the line
    assert not is_aligned(array[::2])            # not contiguous


def test_to_device_keeps_an_aligned_array_and_copies_a_misaligned_one():
    backend = CpuBackend()
    aligned = aligned_empty((4, 16), "float32")
    assert backend.to_device(aligned) is aligned
    misaligned = aligned_empty((4 * 16 + 4,), "float32")[4:].reshape(4, 16)
    misaligned[...] = np.arange(64).reshape(4, 16)
    copy = backend.to_device(misaligned)
    assert copy is not misaligned and is_aligned(copy)
    np.testing.assert_array_equal(copy, misaligned)
    assert is_aligned(backend.empty((3, 3), "float32"))
