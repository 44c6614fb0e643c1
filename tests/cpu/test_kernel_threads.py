"""One kernel called from several Python threads at once: every call computes its own answer
(workspaces are per thread, and concurrent calls share the thread pool safely)."""

import threading

import numpy as np
import pytest

from analysis import analyze
from codegen.kernel import build
from flexsched.registry import get_task
from space import Config, generate

pytestmark = pytest.mark.cpu

THREADS = 6
CALLS = 120


def test_one_kernel_with_a_workspace_called_from_many_threads():
    task = get_task("C2D", 1, 8, 16, 16, 16, 3, 1, 1)
    space = generate(analyze(task), "llvm")
    config = space.config(space.random_point(0)).to_dict()
    config["pad.attach"] = "root"  # the padded input is an intermediate stage in a workspace
    kernel = build(task, space.schedule(space.point(Config.from_dict(config))))
    assert "pad" in [b.name for b in kernel.lowered.workspaces]   # (with any blocked copies beside it)
    assert any(extent for _, extent in kernel.compiled.segments), "expected a parallel segment"
    cases = []
    for seed in range(THREADS):
        inputs = task.random_inputs(seed)
        cases.append((inputs, task.evaluate(*inputs)[0]))
    wrong, errors = [], []

    def calls(index):
        inputs, expected = cases[index]
        try:
            for call in range(CALLS):
                (out,) = kernel.run(*inputs)
                if not np.allclose(out, expected, rtol=1e-4, atol=1e-4):
                    wrong.append((index, call))
        except Exception as err:  # noqa: BLE001 - reported below, a thread's exception is otherwise lost
            errors.append(err)

    threads = [threading.Thread(target=calls, args=(index,)) for index in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert not wrong, f"{len(wrong)} of {THREADS * CALLS} calls computed a wrong output"
