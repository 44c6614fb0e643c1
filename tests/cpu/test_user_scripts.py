"""flexsched.optimize as a user calls it, each in a fresh interpreter: a script without a main guard,
`python -c`, the REPL, code read from stdin and notebook cells (run in a __main__ without
__file__), with an operator registered there or given as tensors. Each checks the
tuned kernel against the reference."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parents[2]

# An operator registered in __main__: its definition exists only in the user's process.
REGISTERED = """
import numpy as np
import flexsched as fs

@fs.register_task("SCALED_ROWSUM")
def scaled_rowsum(n, m):
    A = fs.placeholder((n, m), name="A")
    k = fs.reduce_axis(m, "k")
    return A, fs.compute((n,), lambda i: fs.sum(A[i, k] * 2.0, axis=k), name="S")

result = fs.optimize(("SCALED_ROWSUM", 12, 10), trials=3, method="random", evaluator_options=FAST)
task = fs.get_task("SCALED_ROWSUM", 12, 10)
inputs = task.random_inputs(seed=1)
ok = np.allclose(result.kernel.run(*inputs)[0], task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)
print("kernel matches:", ok, result.history.num_ok)
"""

# A computation given as its output tensor, tuned with a record file, resumed, then rebuilt from it.
TENSORS = """
import numpy as np
import flexsched as fs

A = fs.placeholder((16, 12), name="A")
B = fs.placeholder((12, 8), name="B")
k = fs.reduce_axis(12, "k")
Y = fs.compute((16, 8), lambda i, j: fs.sum(A[i, k] * B[k, j], axis=k), name="Y")
first = fs.optimize(Y, trials=3, log="records.jsonl", evaluator_options=FAST)
again = fs.optimize(Y, trials=5, log="records.jsonl", resume=True, evaluator_options=FAST)
kernel = fs.build_best("records.jsonl", task=Y)
a, b = again.task.random_inputs(seed=2)
ok = all(np.allclose(k.run(a, b)[0], a @ b, rtol=1e-4, atol=1e-4) for k in (first.kernel, again.kernel, kernel))
print("kernel matches:", ok, first.history.num_ok, again.evaluated, again.resumed_from.used)
"""

FAST = "FAST = dict(repeats=1, warmup=0, min_run_seconds=0.0)\n"


def run_python(args, tmp_path, stdin=None):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_script_without_a_main_guard_tunes_an_operator_it_registers(tmp_path):
    script = tmp_path / "tune_mine.py"
    script.write_text(FAST + REGISTERED)
    assert "kernel matches: True 3" in run_python([str(script)], tmp_path)


def test_a_script_tunes_a_computation_given_as_tensors_with_a_log_and_resume(tmp_path):
    script = tmp_path / "tune_tensors.py"
    script.write_text(FAST + TENSORS)
    assert "kernel matches: True 3 2 3" in run_python([str(script)], tmp_path)


def test_python_c(tmp_path):
    assert "kernel matches: True 3" in run_python(["-c", FAST + REGISTERED], tmp_path)


def test_the_repl(tmp_path):
    # The interactive interpreter reads statement by statement; a blank line ends the definition.
    lines = (FAST + REGISTERED).replace('name="S")\n', 'name="S")\n\n', 1)
    assert "kernel matches: True 3" in run_python(["-i", "-q"], tmp_path, stdin=lines)


def test_code_read_from_stdin(tmp_path):
    assert "kernel matches: True 3 2 3" in run_python(["-"], tmp_path, stdin=FAST + TENSORS)


# A notebook kernel runs each cell in a __main__ module of its own making, with no __file__.
NOTEBOOK = """
import json, sys, types
main = types.ModuleType("__main__")
sys.modules["__main__"] = main
for cell in json.loads(sys.stdin.read()):
    exec(compile(cell, "<cell>", "exec"), main.__dict__)
"""


def test_notebook_cells(tmp_path):
    definition, tuning = REGISTERED.split("result = ", 1)
    cells = json.dumps([FAST, definition, "result = " + tuning])
    assert "kernel matches: True 3" in run_python(["-c", NOTEBOOK], tmp_path, stdin=cells)
