"""Every point of a GPU space is a correct kernel: random points of the 14 library operators and
of operators defined here (a 4-node softmax chain, a max pooling) go through the GPU passes, run
in the CPU emulator (threads in barrier-separated phases, races reported) to the reference's
answer, and compile with nvcc for sm_90 with ptxas figures read back.

The emulation needs nothing; the compile tests need nvcc. The default run checks a few points
per operator; `pytest -m slow` checks dozens.
"""

import math

import numpy as np
import pytest

import flexsched as fs
from analysis import analyze
from codegen.cuda_backend import modules_for
from codegen.interpret import run
from codegen.kernel import lower_for
from flexsched.registry import get_task
from space import generate

from cases import SHAPES, LocalTask

def softmax_chain():
    """Softmax over the rows of X as four nodes: row maximum, shifted exponent, row sum, quotient."""
    X = fs.placeholder((9, 37), name="X")
    j, q = fs.reduce_axis(37, "j"), fs.reduce_axis(37, "q")
    row_max = fs.compute((9,), lambda i: fs.max(X[i, j], axis=j), name="row_max")
    E = fs.compute((9, 37), lambda i, c: fs.exp(X[i, c] - row_max[i]), name="E")
    total = fs.compute((9,), lambda i: fs.sum(E[i, q], axis=q), name="total")
    S = fs.compute((9, 37), lambda i, c: E[i, c] / total[i], name="S")
    return LocalTask("softmax", (X,), (S,))


def max_pooling():
    """3x3 max pooling with stride 2 and a padding node of -inf, over 1 x 5 x 13 x 11."""
    I = fs.placeholder((1, 5, 13, 11), name="I")
    P = fs.compute((1, 5, 15, 13),
                   lambda b, c, h, w: fs.select(fs.all_of(h >= 1, h < 14, w >= 1, w < 12), I[b, c, h - 1, w - 1],
                                                float("-inf")), name="P")
    rh, rw = fs.reduce_axis(3, "rh"), fs.reduce_axis(3, "rw")
    O = fs.compute((1, 5, 7, 6), lambda b, c, h, w: fs.max(P[b, c, h * 2 + rh, w * 2 + rw], axis=[rh, rw]), name="O")
    return LocalTask("maxpool", (I,), (O,))


def random_schedules(task, count, seed):
    space = generate(analyze(task), "cuda")
    rng = np.random.default_rng(seed)
    return [space.schedule(space.random_point(rng)) for _ in range(count)]


def gpu_function(task, schedule):
    """The loop IR the CUDA back end prints for a schedule: lowered, GPU passes, legalised."""
    return lower_for(task, schedule, "cuda")[1].func


def assert_emulates_correctly(task, schedule, seed=0):
    func = gpu_function(task, schedule)
    inputs = task.random_inputs(seed)
    arrays = [*inputs, *(np.empty(b.shape, dtype=b.dtype) for b in func.params[len(inputs):])]
    run(func, arrays)   # raises on a race, a divergent barrier or an out-of-bounds access
    for out, ref in zip(arrays[len(inputs):], task.evaluate(*inputs)):
        scale = max(1.0, float(np.abs(ref[np.isfinite(ref)]).max()))
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * scale, err_msg=f"{task} under\n{schedule.to_json()}")


LOCAL_TASKS = {"softmax": softmax_chain, "maxpool": max_pooling}


def task_named(name):
    return LOCAL_TASKS[name]() if name in LOCAL_TASKS else get_task(name, *SHAPES[name])


@pytest.mark.parametrize("name", sorted(SHAPES) + sorted(LOCAL_TASKS))
def test_random_points_emulate_to_the_reference_with_no_race(name):
    task = task_named(name)
    for schedule in random_schedules(task, 4, seed=3):
        assert_emulates_correctly(task, schedule)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHAPES) + sorted(LOCAL_TASKS))
def test_dozens_of_random_points_emulate_to_the_reference(name):
    task = task_named(name)
    for schedule in random_schedules(task, 40, seed=4):
        assert_emulates_correctly(task, schedule)


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(SHAPES) + sorted(LOCAL_TASKS))
def test_random_points_compile_for_sm_90(name):
    task = task_named(name)
    for module in modules_for(task, random_schedules(task, 4, seed=3), "cuda"):
        assert not isinstance(module, Exception), f"{name}: {module}"
        assert set(module.resources) == {entry for entry, _ in module.cuda.entries}
        assert all(0 < r.registers <= 255 for r in module.resources.values())
        assert all(math.isfinite(w) for w in module.cuda.line_weights.values())
