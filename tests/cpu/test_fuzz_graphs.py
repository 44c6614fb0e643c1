"""Fuzzing the CPU space's promise: random points of random small graphs (elementwise nodes,
padding, shifted reads, row reductions, products, chained) build and compute the reference's
answer. A fixed budget of examples keeps it in the default suite."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from analysis import analyze
from codegen.kernel import build
from space import generate

from graphs import small_graphs, stress_points

pytestmark = pytest.mark.cpu


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(task=small_graphs(), seed=st.integers(0, 2**16), stress=st.booleans())
def test_random_points_of_random_graphs_compute_the_reference(task, seed, stress):
    space = generate(analyze(task), "llvm")
    point = stress_points(space, 1, seed)[0] if stress else space.random_point(seed)
    kernel = build(task, space.schedule(point))
    inputs = task.random_inputs(seed)
    for out, ref in zip(kernel.run(*inputs), task.evaluate(*inputs)):
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * scale,
                                   err_msg=f"{task.outputs} under\n{kernel.schedule.to_json()}")
