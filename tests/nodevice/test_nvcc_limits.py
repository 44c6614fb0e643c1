"""nvcc's time limit: a compile that outlives it fails as one line, and the compilers nvcc started
are killed with it (a fake nvcc stands in; no CUDA toolkit needed)."""

import os
import time

from codegen.nvcc import CudaCompileError, compile_units

from cases import is_running

# Starts a child that would outlive it, as nvcc starts cicc and ptxas, records the child's pid and
# waits for it.
FAKE_NVCC = """#!/bin/sh
sleep 60 &
echo $! > "$(dirname "$0")/child.pid"
wait
"""


def test_a_compile_past_its_time_limit_fails_and_kills_what_nvcc_started(tmp_path, monkeypatch):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(FAKE_NVCC)
    nvcc.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    started = time.monotonic()
    (result,) = compile_units(["__global__ void k() {}"], timeout_s=1)
    assert time.monotonic() - started < 10
    assert isinstance(result, CudaCompileError) and str(result) == "nvcc took longer than 1 s"
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while is_running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_running(child)
