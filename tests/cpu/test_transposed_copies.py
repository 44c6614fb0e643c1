"""Layout conversions copy square tiles through registers: the caller's array is read and the
blocked one written a whole vector at a time, and outer iterations past the last tile run lane by lane."""

import numpy as np
import pytest

from codegen.kernel import build
from flexsched.registry import get_task
from flexsched.schedule import Layout, Schedule


def _blocked_kernel(width):
    """A 1x1 convolution whose input and output are stored blocked by 8 channels inside the kernel."""
    task = get_task("C2D", 1, 16, width, width, 16, 1, 1, 0)
    return task, build(task, Schedule((Layout("I", 1, 8), Layout("O", 1, 8))))


@pytest.mark.parametrize("width", [16, 12])   # 12: whole tiles and a tail, on 8 and 16 lanes alike
def test_conversions_through_transposed_tiles_match_the_reference(width):
    task, kernel = _blocked_kernel(width)
    inputs = task.random_inputs(seed=3)
    (out,) = kernel.run(*inputs)
    np.testing.assert_allclose(out, task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)


def test_whole_tiles_are_shuffled_not_gathered_lane_by_lane():
    _, kernel = _blocked_kernel(16)
    text = kernel.compiled.unoptimized_ir   # what flexsched emitted, before LLVM's own vectorisers
    assert "shufflevector" in text
    # Nothing else in this kernel runs on vector lanes, so a conversion gathered or scattered lane by
    # lane would be the only source of per-lane inserts or extracts.
    assert "insertelement" not in text and "extractelement" not in text


def test_a_conversion_longer_than_a_strip_is_shuffled_strip_by_strip():
    """A 96-wide output row is copied back in strips, each through square tiles, and matches."""
    task = get_task("C2D", 1, 16, 4, 96, 16, 1, 1, 0)
    kernel = build(task, Schedule((Layout("O", 1, 8),)))
    inputs = task.random_inputs(seed=3)
    (out,) = kernel.run(*inputs)
    np.testing.assert_allclose(out, task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)
    text = kernel.compiled.unoptimized_ir
    assert "shufflevector" in text and "insertelement" not in text and "extractelement" not in text
