"""The thread pool that runs parallel segments: every iteration exactly once on every call, with
any number of helpers or on the process's OpenMP team, after a fork, and the same chunks as
split_range; helpers spin only while calls come close together."""

import multiprocessing
import time

import numpy as np
import pytest
import torch

from codegen import cpu_backend, runtime
from codegen.ir import Buffer, For, PrimFunc, Store, loop_var
from flexsched.expr import Load
from flexsched.target import get_target

pytestmark = pytest.mark.cpu

CALLS = 300


def counting_kernel(extent):
    """O[i] += 1 for every i of a parallel loop: after n calls every element is n, unless some chunk ran
    twice or not at all."""
    O = Buffer("O", (max(1, extent),), "float32", "global")
    var = loop_var("i", extent)
    body = Store(O, (var,), Load(O, (var,), "float32") + 1.0)
    return cpu_backend.compile_func(PrimFunc(f"count_{extent}", (O,), For(var, extent, "parallel", body)),
                                    3, target=get_target("llvm"))


@pytest.mark.parametrize("extent", [1, 2, 7, 8, 9, 1000])
def test_every_iteration_runs_once_on_every_call(extent):
    kernel = counting_kernel(extent)
    out = np.zeros(max(1, extent), "float32")
    for _ in range(CALLS):
        kernel(out)
    np.testing.assert_array_equal(out[:extent], np.full(extent, CALLS, "float32"))


def _openmp_team():
    """GOMP_parallel of the OpenMP runtime PyTorch loaded, after a PyTorch operator ran."""
    torch.ones(64, 64) @ torch.ones(64, 64)
    runtime._openmp["checked"] = float("-inf")   # look now, not a second after the last look
    team = runtime._openmp_parallel()
    if team is None:
        pytest.skip("needs GNU OpenMP in the process (PyTorch's Linux builds bring it)")
    return team


@pytest.mark.parametrize("on_openmp", [False, True])
@pytest.mark.parametrize("threads", [1, 2, 5])
def test_a_pool_of_any_size_runs_every_chunk_once(threads, on_openmp, monkeypatch):
    """On its helpers, or on the process's OpenMP team with PyTorch's calls between ours."""
    if on_openmp:
        _openmp_team()
    monkeypatch.setattr(runtime, "SHARE_OPENMP", on_openmp)
    pool = runtime.ThreadPool(threads)
    monkeypatch.setattr(runtime, "default_pool", lambda: pool)
    kernel = counting_kernel(37)
    out = np.zeros(37, "float32")
    for _ in range(CALLS):
        kernel(out)
        if on_openmp:
            torch.ones(8, 8) @ torch.ones(8, 8)   # on the same threads as ours
    np.testing.assert_array_equal(out, np.full(37, CALLS, "float32"))


def _count_in_child(queue):
    """(the counts of 20 calls, the OpenMP entry the child would use), from a forked child."""
    kernel = counting_kernel(64)
    out = np.zeros(64, "float32")
    for _ in range(20):
        kernel(out)
    queue.put([out.tolist(), runtime._openmp_parallel()])


def _forked_child_counts():
    """What _count_in_child found in a child forked now, once it exited cleanly."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_count_in_child, args=(queue,))
    child.start()
    result = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    return result


def test_a_forked_child_runs_parallel_kernels():
    runtime.default_pool()   # the parent's helpers exist, and do not survive the fork
    assert _forked_child_counts()[0] == [20.0] * 64


def test_the_native_chunks_are_split_ranges(monkeypatch):
    monkeypatch.setattr(runtime, "SHARE_OPENMP", False)
    seen = []
    pool = runtime.ThreadPool(2)   # a caller and a helper, through the native chunk loop
    kernel = cpu_backend._SEGMENT_PROTOTYPE(lambda begin, end, buffers: seen.append((begin, end)))
    for extent in (10, 3, 100):
        seen.clear()
        pool.run(kernel, extent, 0)
        assert sorted(seen) == runtime.split_range(extent, 2 * runtime.CHUNKS_PER_THREAD)


def test_the_openmp_team_runs_the_native_chunks():
    _openmp_team()
    seen = []
    pool = runtime.ThreadPool(2)
    kernel = cpu_backend._SEGMENT_PROTOTYPE(lambda begin, end, buffers: seen.append((begin, end)))
    pool.run(kernel, 100, 0)
    assert sorted(seen) == runtime.split_range(100, 2 * runtime.CHUNKS_PER_THREAD)


def test_a_child_forked_after_openmp_ran_uses_the_helpers():
    """An OpenMP runtime inherited through fork may hang in the child's first parallel region: the
    child's calls go to its own helpers."""
    _openmp_team()
    counting_kernel(64)(np.zeros(64, "float32"))   # the parent's calls ran on the OpenMP team
    assert _forked_child_counts() == [[20.0] * 64, None]


def test_helpers_spin_only_after_calls_that_came_close_together(monkeypatch):
    monkeypatch.setattr(runtime, "SHARE_OPENMP", False)
    pool = runtime.ThreadPool(2)
    kernel = cpu_backend._SEGMENT_PROTOTYPE(lambda begin, end, buffers: None)
    pool.run(kernel, 8, 0)
    time.sleep(2 * runtime.SPIN_GAP_SECONDS)
    pool.run(kernel, 8, 0)   # long after the last: the helpers would catch nothing by spinning
    assert pool._spin_cycles == 0
    pool.run(kernel, 8, 0)   # right after
    assert pool._spin_cycles == runtime.SPIN_CYCLES
