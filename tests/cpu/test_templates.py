"""Every CPU template is correct: random points of each operator's template space build, run
and match the reference, and the explorer tunes a template space."""

import numpy as np
import pytest

from analysis import analyze
from codegen.kernel import build
from explore.optimize import optimize
from flexsched.registry import get_task
from space.template import list_templates, template_space

from cases import SHAPES

pytestmark = pytest.mark.cpu

TEMPLATES = sorted((t.op, t.name) for t in list_templates(kind="cpu"))


@pytest.mark.parametrize("op,name", TEMPLATES)
def test_random_points_of_every_template_match_the_reference(op, name):
    task = get_task(op, *SHAPES[op])
    space = template_space(task, analyze(task), "llvm", name)
    rng = np.random.default_rng(0)
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
