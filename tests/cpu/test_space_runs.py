"""Every point of a CPU space is valid: random points lower, compile, run and match the reference.

The default run checks a few points per operator; `pytest -m slow` checks dozens.
"""

import time

import numpy as np
import pytest

from analysis import analyze
from codegen.kernel import build
from flexsched.registry import get_task
from space import generate
from space.config import Config

from cases import SHAPES
from graphs import GRAPHS, covering_points, depthwise_separable, stress_points

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


# Multi-node graphs defined in the tests, not in the library: nothing in lowering depends on it.

@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_random_points_of_graphs_outside_the_library(name):
    check_random_points(GRAPHS[name](), count=4, seed=2)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_attached_padded_and_packed_points_of_graphs(name):
    """Producers computed inside consumers, guarded splits and packed reads at once."""
    task = GRAPHS[name]()
    space = generate(analyze(task), "llvm")
    for point in stress_points(space, 4, seed=5):
        assert_matches_reference(task, build(task, space.schedule(point)))


def test_the_depthwise_separable_point_that_clobbered_a_row():
    """A 28-lane loop over half of a 56-wide local row, under a 64-over-56 guarded split: padded
    vector lanes once added twice at w = 28..31."""
    task = depthwise_separable(C=2, H=2, W=56, K=2)
    space = generate(analyze(task), "llvm")
    config = space.config(space.random_point(0)).to_dict()
    config.update({"P.split.w": [4, 16], "P.attach": "at", "D.split.w": [1, 1, 2, 28], "D.order": 1,
                   "D.accumulate": "memory", "D.pack.P": "S1", "D.attach": "at", "O.split.w": [1, 2, 2, 16],
                   "O.accumulate": "memory", "O.pack.D": "R0"})
    assert_matches_reference(task, build(task, space.schedule(Config.from_dict(config))))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_every_choice_of_graphs_outside_the_library(name, record_property):
    """Every value of every choice knob, and dozens of stress points; the slowest builds reported."""
    task = GRAPHS[name]()
    space = generate(analyze(task), "llvm")
    builds = []
    for point in covering_points(space, seed=6) + stress_points(space, 24, seed=7):
        began = time.perf_counter()
        kernel = build(task, space.schedule(point))
        builds.append((time.perf_counter() - began, space.config(point).to_json()))
        assert_matches_reference(task, kernel)
    builds.sort(reverse=True)
    record_property("slowest_builds", builds[:3])
    print(f"{name}: {len(builds)} points, slowest builds {[round(t, 2) for t, _ in builds[:3]]} s")


@pytest.mark.parametrize("kernel_size", [1, 3])
def test_channel_vectorised_points_that_block_the_input_along_the_reduction(kernel_size):
    """The input (or its padded copy) stored blocked along the channels the tile reduces over, with
    the padding inlined or computed at root, and the channel split's innermost factor as the block."""
    task = get_task("C2D", 1, 16, 16, 16, 32, kernel_size, 1, kernel_size // 2)
    space = generate(analyze(task), "llvm")
    lanes = space.target.vector_lanes
    rng = np.random.default_rng(5)
    checked = 0
    for attach in ("inline", "root"):
        if attach not in next(k.values for k in space.knobs if k.name == "pad.attach"):
            continue   # a padding select is never inlined
        for rc in ((1, 4, 4), (2, 1, 8), (1, 8, 2)):
            config = space.config(space.random_point(rng)).to_dict()
            config.update({"pad.attach": attach, "O.accumulate": "registers", "O.vector": "k",
                           "O.split.k": (32, 1, 1, 1), "O.split.w": (16 // lanes, 1, 1, lanes), "O.split.rc": rc,
                           "O.block.pad": "blocked"})
            schedule = space.schedule(space.point(Config.from_dict(config)))
            assert any(step.kind == "layout" and step.tensor in ("I", "pad") and step.block == rc[-1]
                       for step in schedule.steps)
            assert_matches_reference(task, build(task, schedule))
            checked += 1
    assert checked >= 3


@pytest.mark.parametrize("width", [7, 14])
def test_channel_tiles_over_columns_that_fill_no_vector(width):
    """A 7- or 14-wide map's columns as the rows of a one-vector channel tile (14 accumulators fill
    all the registers of AVX2 code but two), with the weights packed or not: each point matches the
    reference."""
    task = get_task("C2D", 1, 8, 7, width, 32, 3, 1, 1)
    space = generate(analyze(task), "llvm")
    rng = np.random.default_rng(8)
    for pack in ("none", "R0"):
        config = space.config(space.random_point(rng)).to_dict()
        config.update({"O.accumulate": "registers", "O.vector": "k", "O.split.k": (1, 8, 1, 4),
                       "O.split.h": (7, 1, 1, 1), "O.split.w": (1, 1, 1, width), "O.pack.W": pack})
        point = space.point(Config.from_dict(config))
        assert space.family(point) == (("O", "registers", "k", 1),)
        assert_matches_reference(task, build(task, space.schedule(point)))
