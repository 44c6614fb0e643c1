"""The thread pool that runs parallel segments: every iteration exactly once on every call, with
any number of helpers, after a fork, and the same chunks as split_range."""

import multiprocessing

import numpy as np
import pytest

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


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_a_pool_of_any_size_runs_every_chunk_once(threads, monkeypatch):
    pool = runtime.ThreadPool(threads)
    monkeypatch.setattr(runtime, "default_pool", lambda: pool)
    kernel = counting_kernel(37)
    out = np.zeros(37, "float32")
    for _ in range(CALLS):
        kernel(out)
    np.testing.assert_array_equal(out, np.full(37, CALLS, "float32"))


def _count_in_child(queue):
    kernel = counting_kernel(64)
    out = np.zeros(64, "float32")
    for _ in range(20):
        kernel(out)
    queue.put(out.tolist())


def test_a_forked_child_runs_parallel_kernels():
    runtime.default_pool()   # the parent's helpers exist, and do not survive the fork
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_count_in_child, args=(queue,))
    child.start()
    result = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert result == [20.0] * 64


def test_the_native_chunks_are_split_ranges():
    seen = []
    pool = runtime.ThreadPool(2)   # a caller and a helper, through the native chunk loop
    kernel = cpu_backend._SEGMENT_PROTOTYPE(lambda begin, end, buffers: seen.append((begin, end)))
    for extent in (10, 3, 100):
        seen.clear()
        pool.run(kernel, extent, 0)
        assert sorted(seen) == runtime.split_range(extent, 2 * runtime.CHUNKS_PER_THREAD)
