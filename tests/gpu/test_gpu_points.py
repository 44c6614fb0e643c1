"""Every point of a GPU space is a correct kernel: random points of the 14 library operators and
of the multi-node graphs in tests/graphs.py (attached and padded stress points among them) go
through the GPU passes, run in the CPU emulator (threads in barrier-separated phases, races
reported) to the reference's answer, and compile with nvcc for sm_90 with ptxas figures read back.

The emulation needs nothing; the compile tests need nvcc. The default run checks a few points
per operator; `pytest -m slow` checks dozens.
"""

import math

import numpy as np
import pytest

from analysis import analyze
from codegen.cuda_backend import modules_for
from codegen.kernel import lower_for
from space import generate

from cases import SHAPES
from graphs import GRAPHS, assert_interprets_to_reference, stress_points, task_named

def random_schedules(task, count, seed):
    space = generate(analyze(task), "cuda")
    rng = np.random.default_rng(seed)
    return [space.schedule(space.random_point(rng)) for _ in range(count)]


def gpu_function(task, schedule):
    """The loop IR the CUDA back end prints for a schedule: lowered, GPU passes, legalised."""
    return lower_for(task, schedule, "cuda")[1].func


def assert_emulates_correctly(task, schedule, seed=0):
    assert_interprets_to_reference(task, gpu_function(task, schedule), schedule, seed)


LOCAL_TASKS = GRAPHS


@pytest.mark.parametrize("name", sorted(SHAPES) + sorted(LOCAL_TASKS))
def test_random_points_emulate_to_the_reference_with_no_race(name):
    task = task_named(name)
    for schedule in random_schedules(task, 4, seed=3):
        assert_emulates_correctly(task, schedule)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_attached_and_padded_points_of_graphs_emulate_to_the_reference(name):
    task = GRAPHS[name]()
    space = generate(analyze(task), "cuda")
    for point in stress_points(space, 3, seed=5):
        assert_emulates_correctly(task, space.schedule(point))


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
