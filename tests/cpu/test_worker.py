"""The isolated worker: calls and their failures, and a worker that dies with its parent, even one
killed with SIGKILL while a call hangs."""

import os
import signal
import subprocess
import sys
import threading
import time
import types

import pytest

from codegen.worker import Worker, WorkerFailure

from cases import is_running

pytestmark = pytest.mark.cpu

HERE = os.path.dirname(os.path.abspath(__file__))

# A parent that starts a Measurer, prints its worker's pid once a first candidate is measured,
# then measures a candidate that hangs (measure_faults marks GMM with M == 13). With the
# argument "thread" it measures from a second thread, which the kernel's parent-death signal
# does not cover.
PARENT = """
import sys, threading
from codegen.measure import MeasureInput, Measurer
from flexsched.registry import get_task

def measure():
    with Measurer(timeout_s=600, runner="measure_faults:hang_runner", memory_limit_bytes=4 * 2**30) as measurer:
        measurer.measure([MeasureInput.of(get_task("GMM", 16, 16, 16))])
        print(measurer.worker_pid, flush=True)
        measurer.measure([MeasureInput.of(get_task("GMM", 13, 16, 16))])

if __name__ == "__main__":
    if sys.argv[1] == "thread":
        threading.Thread(target=measure).start()
    else:
        measure()
"""


@pytest.mark.parametrize("started_by", ["main", "thread"])
def test_a_worker_dies_with_a_parent_killed_mid_candidate(started_by, tmp_path):
    # The killed parent's reference folder lands in tmp_path, not in the machine's /tmp.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, *sys.path]), TMPDIR=str(tmp_path))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, started_by], stdout=subprocess.PIPE, text=True,
                              env=env)
    try:
        worker_pid = int(parent.stdout.readline())
        time.sleep(1.0)   # the worker is inside the hanging candidate now
        assert is_running(worker_pid)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 5.0
    while is_running(worker_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if is_running(worker_pid):
        os.kill(worker_pid, signal.SIGKILL)
        pytest.fail(f"worker {worker_pid} outlived its parent by 5 s")


def test_a_worker_started_by_a_thread_that_ends_lives_on():
    with Worker(memory_limit_bytes=4 * 2**30) as worker:
        thread = threading.Thread(target=worker.call, args=("os:getpid", (), 60))
        thread.start()
        thread.join()
        pid = worker.pid
        time.sleep(1.0)
        assert worker.call("os:getpid", (), 60) == pid


def test_calls_return_values_and_failures_are_one_line():
    with Worker(memory_limit_bytes=4 * 2**30) as worker:
        assert worker.call("math:gcd", (12, 18), 60) == 6
        with pytest.raises(WorkerFailure) as raised:
            worker.call("math:sqrt", (-1.0,), 60)
        assert (raised.value.status, raised.value.reason) == ("error", "ValueError: math domain error")
        with pytest.raises(WorkerFailure) as unsendable:
            worker.call("threading:Lock", (), 60)
        assert unsendable.value.status == "error" and "unsendable result: TypeError" in unsendable.value.reason
        pid = worker.pid
        with pytest.raises(WorkerFailure) as slow:
            worker.call("time:sleep", (30,), 1)
        assert (slow.value.status, slow.value.reason) == ("timeout", "worker killed after 1.0 s")
        assert worker.pid is None and not is_running(pid)
        with pytest.raises(WorkerFailure) as killed:
            worker.call("os:abort", (), 60)
        assert (killed.value.status, killed.value.reason) == ("crash", "worker died with signal SIGABRT")
        assert worker.call("math:gcd", (4, 6), 60) == 2   # a fresh worker


def test_a_worker_left_unhealthy_is_replaced_before_the_next_call(monkeypatch):
    monkeypatch.syspath_prepend(HERE)
    with Worker(memory_limit_bytes=4 * 2**30) as worker:
        spoiled = worker.call("measure_faults:spoil_back_ends", (), 60)
        assert worker.pid is None   # the answer said the worker exits: no call may reach it
        for _ in range(3):          # called at once, as a search does
            assert worker.call("os:getpid", (), 60) != spoiled


def test_arguments_the_worker_cannot_unpickle_fail_only_that_call():
    module = types.ModuleType("only_in_the_parent")
    exec("class Value:\n    pass\n", module.__dict__)
    sys.modules[module.__name__] = module
    try:
        with Worker(memory_limit_bytes=4 * 2**30) as worker:
            pid = worker.call("os:getpid", (), 60)
            with pytest.raises(WorkerFailure) as caught:
                worker.call("builtins:id", (module.Value(),), 60)
            assert caught.value.status == "error" and "No module named 'only_in_the_parent'" in caught.value.reason
            assert worker.call("os:getpid", (), 60) == pid   # the same worker serves the next call
    finally:
        del sys.modules[module.__name__]


def test_a_script_without_a_main_guard_starts_workers(tmp_path):
    script = tmp_path / "no_guard.py"
    script.write_text("from codegen.worker import Worker\n"
                      "with Worker(memory_limit_bytes=4 * 2**30) as worker:\n"
                      "    print(worker.call('math:gcd', (12, 18), 60), worker.call('os:getppid', (), 60))\n"
                      "import os\nprint(os.getpid())\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr
    answer, parent = done.stdout.split("\n")[:2]
    assert answer == f"6 {parent}"   # run once, by its own process: the worker never re-ran it
