"""Fuzzing the GPU and FPGA spaces' promise through the loop-IR interpreter: random points of
random small graphs, after the GPU passes (threads in barrier-separated phases, races
reported) or as the HLS printer sees them, compute the reference's answer."""

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from analysis import analyze
from codegen.hls import lower_hls
from codegen.kernel import lower_for
from space import generate

from graphs import assert_interprets_to_reference, small_graphs, stress_points


def loop_ir(task, schedule, target):
    return lower_for(task, schedule, "cuda")[1].func if target == "cuda" else lower_hls(task, schedule)[2].func


@pytest.mark.parametrize("target", ["cuda", "fpga"])
@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(task=small_graphs(), seed=st.integers(0, 2**16), stress=st.booleans())
def test_random_points_of_random_graphs_interpret_to_the_reference(target, task, seed, stress):
    space = generate(analyze(task), target)
    point = stress_points(space, 1, seed)[0] if stress else space.random_point(seed)
    schedule = space.schedule(point)
    assert_interprets_to_reference(task, loop_ir(task, schedule, target), schedule, seed)
