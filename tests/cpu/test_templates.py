"""Every CPU template is correct: random points of each operator's template space build, run
and match the reference, and the explorer tunes a template space."""

from dataclasses import replace

import numpy as np
import pytest

from analysis import analyze
from codegen.kernel import build
from explore.optimize import optimize
from flexsched.registry import get_task
from flexsched.target import get_target
from space.template import list_templates, template_space

from cases import SHAPES

pytestmark = pytest.mark.cpu

TEMPLATES = sorted((t.op, t.name) for t in list_templates(kind="cpu"))


# The schedule a template writes depends on the vector width; both widths of these machines
# (AVX2, AVX-512) build and run on either.
@pytest.mark.parametrize("lanes", (8, 16))
@pytest.mark.parametrize("op,name", TEMPLATES)
def test_random_points_of_every_template_match_the_reference(op, name, lanes):
    task = get_task(op, *SHAPES[op])
    target = replace(get_target("llvm"), vector_lanes=lanes)
    space = template_space(task, analyze(task), target, name)
    rng = np.random.default_rng(lanes)
    for seed in range(2):
        point = space.random_point(rng)
        kernel = build(task, space.schedule(point), "llvm")
        inputs = task.random_inputs(seed)
        for out, ref in zip(kernel.run(*inputs), task.evaluate(*inputs)):
            np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4,
                                       err_msg=f"{op}/{name} at {space.config(point)}")


def test_optimize_tunes_a_template_space():
    task = get_task("GMM", *SHAPES["GMM"])
    result = optimize(task, trials=3, method="q", space="template", build_kernel=False)
    assert result is not None
