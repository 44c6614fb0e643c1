"""Every point of a CPU space is valid: random points lower, compile, run and match the reference.

The default run checks a few points per operator; `pytest -m slow` checks dozens.
"""

import numpy as np
import pytest

import flexsched as fs
from analysis import analyze
from codegen.kernel import build
from flexsched.registry import get_task
from space import generate

from cases import SHAPES, LocalTask

pytestmark = pytest.mark.cpu


def assert_matches_reference(task, kernel, seed=0):
    inputs = task.random_inputs(seed)
    for out, ref in zip(kernel.run(*inputs), task.evaluate(*inputs)):
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * scale,
                                   err_msg=f"{task} under\n{kernel.schedule.to_json()}")


def check_random_points(task, count, seed=0):
    space = generate(analyze(task), "llvm")
    rng = np.random.default_rng(seed)
    for _ in range(count):
        point = space.random_point(rng)
        assert_matches_reference(task, build(task, space.schedule(point)))


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_random_points_of_every_operator(name):
    check_random_points(get_task(name, *SHAPES[name]), count=4)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_dozens_of_random_points_of_every_operator(name):
    check_random_points(get_task(name, *SHAPES[name]), count=40, seed=1)


def test_the_naive_schedule_runs():
    task = get_task("C2D", 1, 3, 7, 7, 4, 3, 1, 1)
    assert_matches_reference(task, build(task))


# Operators defined here, not in the library: nothing in lowering depends on it.

def _task(name, outputs_fn):
    """A minimal Task-like object for a computation built in the test."""
    inputs, outputs = outputs_fn()
    return LocalTask(name, inputs, outputs)


def matmul_relu():
    A, B = fs.placeholder((19, 23), name="A"), fs.placeholder((23, 21), name="B")
    k = fs.reduce_axis(23, "k")
    M = fs.compute((19, 21), lambda i, j: fs.sum(A[i, k] * B[k, j], axis=k), name="M")
    return (A, B), (fs.compute((19, 21), lambda i, j: fs.max(M[i, j], 0.0), name="R"),)


def softmax():
    X = fs.placeholder((6, 13), name="X")
    j = fs.reduce_axis(13, "j")
    row_max = fs.compute((6,), lambda i: fs.max(X[i, j], axis=j), name="row_max")
    E = fs.compute((6, 13), lambda i, c: fs.exp(X[i, c] - row_max[i]), name="E")
    q = fs.reduce_axis(13, "q")
    total = fs.compute((6,), lambda i: fs.sum(E[i, q], axis=q), name="total")
    return (X,), (fs.compute((6, 13), lambda i, c: E[i, c] / total[i], name="S"),)


def stencil():
    X = fs.placeholder((17, 15), name="X")
    return (X,), (fs.compute((15, 13), lambda i, j: (X[i, j + 1] + X[i + 2, j + 1] + X[i + 1, j]
                                                    + X[i + 1, j + 2]) * 0.25, name="S"),)


@pytest.mark.parametrize("definition", [matmul_relu, softmax, stencil])
def test_operators_outside_the_library(definition):
    task = _task(definition.__name__, definition)
    check_random_points(task, count=6, seed=2)
