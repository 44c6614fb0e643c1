"""CUDA C from GPU schedules, compiled by nvcc for sm_90 and read back with ptxas (no GPU needed);
the static GPU model on the result; tuning for a GPU with the model from the command line.
(test_gpu_points.py compiles random points of every operator.)"""

import io
import json
import pytest

from analysis import analyze
from codegen.gpu_model import ModelError, estimate, instruction_mix
from codegen.kernel import build
from flexsched.cli import main
from flexsched.registry import get_task
from flexsched.target import gpu_device
from space import generate
from space.config import Config

pytestmark = pytest.mark.nvcc

H100 = gpu_device("cuda")


def gmm_point(task, **changes):
    space = generate(analyze(task), "cuda")
    config = space.config(space.random_point(0)).to_dict()
    config.update({"O.split.i": (-(-task.args[0] // 32), 2, 8, 2), "O.split.j": (-(-task.args[2] // 32), 2, 8, 2),
                   "O.split.rk": (-(-task.args[1] // 8), 2, 4), "O.order": 0, "O.cache": 1, "O.unroll": 64})
    config.update(changes)
    return space.schedule(space.point(Config.from_dict(config)))


def test_a_kernel_shows_its_cuda_source_ptx_and_ptxas_figures():
    task = get_task("GMM", 64, 64, 64)
    kernel = build(task, gmm_point(task), "cuda")
    assert '__global__ void __launch_bounds__(64)' in kernel.source
    assert "__syncthreads();" in kernel.source and "float O_local[2][2][2][2];" in kernel.source
    assert ".entry GMM_64_64_64_k0" in kernel.assembly() and "fma.rn.f32" in kernel.assembly()
    (resources,) = kernel.compiled.resources.values()
    assert 0 < resources.registers <= 255
    # the 16 accumulators live in registers: no stack frame, no spills
    assert resources.stack_bytes == resources.spill_store_bytes == 0
    (launch,) = kernel.compiled.launches
    assert launch.grid == (4, 1, 1) and launch.block == (64, 1, 1)
    assert launch.shared_bytes == (32 * 8 + 8 * 32) * 4


def test_an_isolated_build_brings_back_what_nvcc_made_in_the_worker():
    from codegen.isolated_build import build_isolated

    task = get_task("GMM", 64, 64, 64)
    isolated = build_isolated(task, gmm_point(task), "cuda")
    in_process = build(task, gmm_point(task), "cuda")
    assert isolated.source == in_process.source and isolated.assembly() == in_process.assembly()
    assert isolated.compiled.unit.cubin == in_process.compiled.unit.cubin and isolated.compiled.unit.cubin
    assert isolated.compiled.resources == in_process.compiled.resources


def test_aligned_contiguous_refills_copy_float4_and_others_do_not():
    task = get_task("GMM", 64, 64, 64)
    assert "float4" in build(task, gmm_point(task), "cuda").source
    odd = get_task("GMM", 64, 62, 64)   # rows of A are 62 floats: a run can start off a 16-byte boundary
    assert "float4" not in build(odd, gmm_point(odd, **{"O.split.rk": (8, 2, 4)}), "cuda").source


def test_line_weights_count_each_fma_once_per_reduction_step():
    task = get_task("GMM", 64, 64, 64)
    kernel = build(task, gmm_point(task), "cuda")
    (ptx_kernel,) = kernel.compiled.unit.kernels.values()
    mix = instruction_mix(ptx_kernel, kernel.compiled.cuda.line_weights)
    # each thread accumulates a 2x2 x 2x2 tile over K = 64: 16 * 64 multiply-adds
    fmas = sum(kernel.compiled.cuda.line_weights.get(line, 1) for op, line in ptx_kernel.instructions
               if op.startswith("fma"))
    assert fmas == 16 * 64
    assert mix["fp32"] >= fmas and mix["barrier"] == 2 * 64 / 8


def test_the_model_prices_work_and_refuses_what_cannot_launch():
    small, large = get_task("GMM", 256, 256, 256), get_task("GMM", 512, 512, 512)
    (small_module, large_module) = [build(t, gmm_point(t), "cuda").compiled for t in (small, large)]
    small_time, large_time = estimate(small_module, H100).seconds, estimate(large_module, H100).seconds
    assert 0 < small_time < large_time   # eight times the work takes longer
    tight = H100.__class__(**{**H100.__dict__, "registers_per_sm": 2048})
    with pytest.raises(ModelError, match="does not fit an SM"):
        estimate(small_module, tight)


def test_coalescing_and_bank_conflicts_come_from_the_access_pattern():
    task = get_task("GMM", 256, 256, 256)

    def launch(**changes):
        return estimate(build(task, gmm_point(task, **changes), "cuda").compiled, H100).launches[0]

    # i = i.1 * 16 + thread / 8, j = j.1 * 8 + thread % 8: a warp reads 4 rows of A's 8-word tile
    # (broadcast within a row, 4 banks) and 8 neighbouring words of B's
    consecutive = launch(**{"O.split.i": (16, 2, 8, 1), "O.split.j": (16, 2, 8, 1)})
    assert consecutive.shared_conflict == pytest.approx(1.0)
    assert consecutive.coalescing >= 0.5      # refills read rows with consecutive threads, in float4
    # i = i.1 * 16 + thread / 8 * 2 + i.3: rows 0, 2, 4, 6 of the 8-word tile, words 0 and 32 in one bank
    assert launch(**{"O.split.i": (8, 2, 8, 2), "O.split.j": (16, 2, 8, 1)}).shared_conflict > 1.2
    unstaged = launch(**{"O.split.i": (16, 2, 8, 1), "O.split.j": (16, 2, 8, 1), "O.cache": 0})
    assert unstaged.coalescing < consecutive.coalescing   # each thread reads its own row of A


def run(*argv):
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_tune_with_the_gpu_model_runs_without_a_gpu():
    status, text = run("tune", "GMM", "64", "64", "64", "--target", "cuda", "--evaluator", "model",
                       "--trials", "8", "--json")
    assert status == 0
    summary = json.loads(text.splitlines()[-1])
    assert summary["predicted"] is True and summary["ok"] >= 1 and summary["best_gflops"] > 0
    assert "predicted by the static GPU model" in text and "blocks/SM" in text
