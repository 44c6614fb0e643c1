"""flexsched.build takes the task as a user holds it: a registered name with its arguments, a Task,
or a computation's output tensor; naive or under a given schedule."""

import numpy as np
import pytest

import flexsched as fs
from flexsched.schedule import Schedule, Split

pytestmark = pytest.mark.cpu


def test_build_accepts_every_form_of_a_task():
    A = fs.placeholder((8, 6), name="A")
    B = fs.placeholder((6, 4), name="B")
    k = fs.reduce_axis(6, "rk")
    O = fs.compute((8, 4), lambda i, j: fs.sum(A[i, k] * B[k, j], axis=k), name="O")
    a, b = fs.get_task("GMM", 8, 6, 4).random_inputs(seed=3)
    split = Schedule((Split("O", "i", (2, 4)),))
    for task in (("GMM", 8, 6, 4), fs.get_task("GMM", 8, 6, 4), O, [A, B, O]):
        for schedule in (None, split, split.to_json()):
            kernel = fs.build(task, schedule=schedule)
            np.testing.assert_allclose(kernel.run(a, b)[0], a @ b, rtol=1e-5, atol=1e-5)
    assert isinstance(kernel.task, fs.Task) and kernel.schedule == split
