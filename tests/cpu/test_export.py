"""The exported shared library keeps the tuned kernel's parallelism: a parallel segment runs on the
library's thread pool, with the right answer whatever OMP_NUM_THREADS says, and from several
threads at once."""

import ctypes
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from analysis import analyze
from codegen.export import wrapper_text
from codegen.kernel import build
from flexsched.registry import get_task
from space import Config, generate

pytestmark = pytest.mark.cpu

# Calls the library through ctypes in a fresh process (the pool reads OMP_NUM_THREADS once, when it
# starts) and says how many threads the process gained during the call.
CALLER = textwrap.dedent("""
    import ctypes, json, sys
    import numpy as np

    def threads():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))

    library, name, out_path, *in_paths = sys.argv[1:]
    inputs = [np.load(path) for path in in_paths]
    spec = json.loads(sys.stdin.read())
    out = np.zeros(spec["shape"], dtype=spec["dtype"])
    function = getattr(ctypes.CDLL(library), name)
    before = threads()
    status = function(*(array.ctypes.data_as(ctypes.c_void_p) for array in (*inputs, out)))
    np.save(out_path, out)
    print(json.dumps({"status": status, "gained": threads() - before}))
""")


def parallel_conv_kernel():
    task = get_task("C2D", 1, 8, 16, 16, 16, 3, 1, 1)
    space = generate(analyze(task), "llvm")
    config = space.config(space.random_point(0)).to_dict()
    config["pad.attach"] = "root"  # a workspace too, which the wrapper allocates per call
    return task, build(task, space.schedule(space.point(Config.from_dict(config))))


def call_library(tmp_path, library, name, task, inputs, threads):
    paths = []
    for index, array in enumerate(inputs):
        paths.append(str(tmp_path / f"in{index}.npy"))
        np.save(paths[-1], array)
    out_path = str(tmp_path / f"out{threads}.npy")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    spec = {"shape": list(task.outputs[0].shape), "dtype": task.outputs[0].dtype}
    done = subprocess.run([sys.executable, "-c", CALLER, str(library), name, out_path, *paths], input=json.dumps(spec),
                          env=env, capture_output=True, text=True, check=True, timeout=120)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return np.load(out_path), report


def test_exported_library_runs_parallel_segments_on_a_thread_pool(tmp_path):
    task, kernel = parallel_conv_kernel()
    parallel = [symbol for symbol, extent in kernel.compiled.segments if extent and extent > 1]
    assert parallel, "expected a parallel segment"
    source = wrapper_text(kernel, "conv")
    assert f"run_parallel(conv_{parallel[0]}," in source and "pthread_create" in source
    library, header = kernel.save(tmp_path, "conv")
    assert "pool of threads" in header.read_text()
    inputs = task.random_inputs(5)
    (expected,) = task.evaluate(*inputs)
    for threads in (1, 2):
        out, report = call_library(tmp_path, library, "conv", task, inputs, threads)
        assert report["status"] == 0
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
        assert report["gained"] == threads - 1  # the pool: the caller and threads - 1 helpers


def test_exported_library_called_from_several_threads_at_once(tmp_path):
    task, kernel = parallel_conv_kernel()
    library, _ = kernel.save(tmp_path, "conv_threads")
    function = ctypes.CDLL(str(library)).conv_threads
    cases = []
    for seed in range(4):
        inputs = task.random_inputs(seed)
        cases.append((inputs, task.evaluate(*inputs)[0]))
    wrong = []

    def calls(index):
        inputs, expected = cases[index]
        for call in range(60):
            out = np.zeros(task.outputs[0].shape, dtype="float32")
            status = function(*(array.ctypes.data_as(ctypes.c_void_p) for array in (*inputs, out)))
            if status != 0 or not np.allclose(out, expected, rtol=1e-4, atol=1e-4):
                wrong.append((index, call))

    threads = [threading.Thread(target=calls, args=(index,)) for index in range(len(cases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong


def test_serial_kernel_exports_without_a_parallel_region(tmp_path):
    task = get_task("GMM", 8, 8, 8)
    kernel = build(task)  # the naive nest: no parallel loop
    assert not any(extent for _, extent in kernel.compiled.segments)
    assert "run_parallel" not in wrapper_text(kernel, "gmm") and "pthread" not in wrapper_text(kernel, "gmm")
    library, _ = kernel.save(tmp_path, "gmm")
    inputs = task.random_inputs(1)
    out, report = call_library(tmp_path, library, "gmm", task, inputs, 2)
    assert report == {"status": 0, "gained": 0}
    np.testing.assert_allclose(out, task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)


def test_exported_library_frees_its_kept_scratch_on_request(tmp_path):
    """A parallel chunk's heap scratch is kept between calls; NAME_release_scratch frees it, and the
    next call allocates afresh and is still right."""
    task = get_task("C2D", 1, 64, 32, 32, 16, 3, 1, 1)
    space = generate(analyze(task), "llvm")
    kernel = build(task, space.schedule(space.random_point(0)))
    assert 'take_scratch"(' in kernel.compiled.unoptimized_ir, "expected heap scratch"
    library, header = kernel.save(tmp_path, "conv_kept")
    assert "void conv_kept_release_scratch(void);" in header.read_text()
    loaded = ctypes.CDLL(str(library))
    inputs = task.random_inputs(2)
    (expected,) = task.evaluate(*inputs)
    for _ in range(2):
        for _ in range(2):
            out = np.zeros(task.outputs[0].shape, dtype="float32")
            assert loaded.conv_kept(*(array.ctypes.data_as(ctypes.c_void_p) for array in (*inputs, out))) == 0
            np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
        loaded.conv_kept_release_scratch()
