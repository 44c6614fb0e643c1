"""GPU back-end tests. Lowering and emulation need nothing; compiling needs nvcc (CUDA's compiler,
no GPU, marker `nvcc`); running kernels needs a GPU and cupy (marker `gpu`). A test whose need is
missing is skipped, saying why."""

import pytest

from codegen.cuda_runtime import unavailable_reason
from codegen.nvcc import find_nvcc


def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("nvcc") and find_nvcc() is None:
            item.add_marker(pytest.mark.skip(reason="nvcc is not installed"))
        if item.get_closest_marker("gpu") and unavailable_reason():
            item.add_marker(pytest.mark.skip(reason=unavailable_reason()))
