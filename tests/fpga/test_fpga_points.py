"""Every point of an FPGA space is a correct design: random points of the 14 library operators
and of the multi-node graphs in tests/graphs.py (attached and padded stress points among them)
lower to the loop IR the HLS printer prints, and that IR, run by the loop-IR interpreter,
computes the reference's answer. (The C simulation in test_hls_csim.py checks the printed C.)"""

import numpy as np
import pytest

from analysis import analyze
from codegen.hls import lower_hls
from space import generate

from cases import SHAPES
from graphs import GRAPHS, assert_interprets_to_reference, build_small_graph, stress_points, task_named

pytestmark = pytest.mark.fpga


def assert_interprets_correctly(task, schedule, seed=0):
    assert_interprets_to_reference(task, lower_hls(task, schedule)[2].func, schedule, seed)


def random_points_interpret_correctly(name, count, seed):
    task = task_named(name)
    space = generate(analyze(task), "fpga")
    rng = np.random.default_rng(seed)
    for _ in range(count):
        assert_interprets_correctly(task, space.schedule(space.random_point(rng)))


@pytest.mark.parametrize("name", sorted(SHAPES) + sorted(GRAPHS))
def test_random_points_interpret_to_the_reference(name):
    random_points_interpret_correctly(name, 3, seed=8)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_attached_and_padded_points_of_graphs_interpret_to_the_reference(name):
    task = GRAPHS[name]()
    space = generate(analyze(task), "fpga")
    for point in stress_points(space, 3, seed=9):
        assert_interprets_correctly(task, space.schedule(point))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHAPES) + sorted(GRAPHS))
def test_dozens_of_random_points_interpret_to_the_reference(name):
    random_points_interpret_correctly(name, 30, seed=10)


def test_a_one_step_reduction_over_a_single_row_keeps_its_output_at_a_spatial_loop():
    """Every loop of the row sum is trivial, the reduction's too: the output buffer still sits at
    the spatial one (found by the random-graph fuzz)."""
    task = build_small_graph([1, 1], [("centre", None)])
    space = generate(analyze(task), "fpga")
    for seed in range(3):
        assert_interprets_correctly(task, space.schedule(space.random_point(seed)))
