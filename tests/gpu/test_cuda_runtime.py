"""Running CUDA kernels through cupy: on cupy arrays and CUDA torch tensors without copies, checked
against the reference; measured tuning; a kernel that faults the device costs only its worker.
Without a GPU, running says so in one line (that test runs everywhere)."""

import math
import os

import numpy as np
import pytest

from analysis import analyze
from codegen.cuda_runtime import GpuUnavailable, unavailable_reason
from codegen.kernel import build
from codegen.measure import MeasureInput, Measurer
from flexsched.registry import get_task
from space import generate
from space.config import Config

TASK = get_task("GMM", 128, 96, 64)


def schedule(task=TASK):
    space = generate(analyze(task), "cuda")
    config = space.config(space.random_point(0)).to_dict()
    config.update({"O.split.i": (-(-task.args[0] // 32), 2, 8, 2), "O.split.j": (-(-task.args[2] // 32), 2, 8, 2),
                   "O.split.rk": (-(-task.args[1] // 8), 2, 4), "O.order": 0, "O.cache": 1, "O.unroll": 64})
    return space.schedule(space.point(Config.from_dict(config)))


@pytest.mark.skipif(not unavailable_reason(), reason="a GPU is present")
def test_running_without_a_gpu_says_so_in_one_line():
    kernel = build(TASK, schedule(), "cuda")
    with pytest.raises(GpuUnavailable, match="^no GPU available: ") as raised:
        kernel.run(*TASK.random_inputs(0))
    assert "\n" not in str(raised.value)


@pytest.mark.gpu
def test_kernels_run_on_cupy_arrays_and_cuda_torch_tensors_in_place():
    import cupy
    import torch

    kernel = build(TASK, schedule(), "cuda")
    inputs = TASK.random_inputs(0)
    reference = TASK.evaluate(*inputs)[0]
    a, b = (cupy.asarray(x) for x in inputs)
    out = cupy.zeros(reference.shape, dtype="float32")
    kernel(a, b, out)
    np.testing.assert_allclose(cupy.asnumpy(out), reference, rtol=1e-4, atol=1e-4)
    ta, tb = (torch.from_numpy(x).cuda() for x in inputs)
    tout = torch.zeros(reference.shape, device="cuda")
    pointer = tout.data_ptr()
    kernel(ta, tb, tout)
    torch.cuda.synchronize()
    assert tout.data_ptr() == pointer   # written in place
    np.testing.assert_allclose(tout.cpu().numpy(), reference, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(kernel.run(*inputs)[0], reference, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_arguments_are_checked_by_name():
    import cupy

    kernel = build(TASK, schedule(), "cuda")
    a, b = (cupy.asarray(x) for x in TASK.random_inputs(0))
    with pytest.raises(TypeError, match="argument 'O' has shape"):
        kernel(a, b, cupy.zeros((3, 3), dtype="float32"))
    with pytest.raises(TypeError, match="argument 'A' must be a cupy array or a CUDA torch tensor"):
        kernel(cupy.asnumpy(a), b, cupy.zeros((128, 64), dtype="float32"))
    if "float4" in kernel.source:   # an offset view cannot be read 16 bytes at a time
        shifted = cupy.zeros(a.size + 1, dtype="float32")[1:].reshape(a.shape)
        with pytest.raises(ValueError, match="argument 'A' does not start on a 16-byte boundary"):
            kernel(shifted, b, cupy.zeros((128, 64), dtype="float32"))


@pytest.mark.gpu
def test_measured_candidates_are_checked_then_timed_with_events():
    with Measurer(timeout_s=120, warmup=1, repeats=3, min_run_seconds=0.001, kinds=("gpu",)) as measurer:
        result = measurer.measure_one(MeasureInput.of(TASK, schedule(), "cuda"))
    assert result.ok, result.error
    assert 0 < result.min_seconds <= result.seconds <= result.max_seconds < 1


@pytest.fixture
def fault_runners_importable(monkeypatch):
    monkeypatch.syspath_prepend(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.gpu
def test_a_kernel_that_faults_the_device_costs_only_its_worker(fault_runners_importable):
    marked = get_task("GMM", 32, 96, 64)
    with Measurer(timeout_s=120, warmup=1, repeats=3, min_run_seconds=0.001, kinds=("gpu",),
                  runner="gpu_faults:illegal_address_runner") as measurer:
        first = measurer.measure_one(MeasureInput.of(marked, schedule(marked), "cuda"))
        second = measurer.measure_one(MeasureInput.of(TASK, schedule(), "cuda"))
    assert first.status == "runtime_error" and math.isinf(first.seconds)
    assert second.ok, second.error   # a fresh worker, a fresh CUDA context


@pytest.mark.gpu
def test_tuning_with_measurement_on_the_gpu():
    from explore.optimize import optimize

    result = optimize(get_task("GMM", 256, 256, 256), "cuda", trials=12, method="q", evaluator="measure")
    assert result.history.num_ok >= 1 and result.gflops > 0
    inputs = result.task.random_inputs(2)
    np.testing.assert_allclose(result.kernel.run(*inputs)[0], result.task.evaluate(*inputs)[0], rtol=1e-4,
                               atol=1e-3)
