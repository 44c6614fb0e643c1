"""GPU templates: random points of each CUDA template emulate to the reference with no race,
compile for sm_90 within the register file, and run correctly on a GPU where there is one."""

import numpy as np
import pytest

from analysis import analyze
from codegen.cuda_backend import modules_for
from flexsched.registry import get_task
from space import list_templates, template_space

from test_gpu_points import assert_emulates_correctly

TASKS = {"GMM": get_task("GMM", 48, 40, 64), "C2D": get_task("C2D", 1, 8, 14, 14, 16, 3, 1, 1)}


def template_schedules(task, count, seed):
    space = template_space(task, analyze(task), "cuda")
    rng = np.random.default_rng(seed)
    return [space.schedule(space.random_point(rng)) for _ in range(count)]


def test_every_gpu_template_is_tested_here():
    assert {template.op for template in list_templates(kind="gpu")} <= set(TASKS)


@pytest.mark.parametrize("op", sorted(TASKS))
def test_template_points_emulate_to_the_reference(op):
    for schedule in template_schedules(TASKS[op], 4, seed=1):
        assert_emulates_correctly(TASKS[op], schedule)


@pytest.mark.nvcc
@pytest.mark.parametrize("op", sorted(TASKS))
def test_template_points_compile_for_sm_90(op):
    for module in modules_for(TASKS[op], template_schedules(TASKS[op], 3, seed=2), "cuda"):
        assert not isinstance(module, Exception), f"{op}: {module}"
        assert all(0 < r.registers <= 255 for r in module.resources.values())


@pytest.mark.gpu
def test_a_template_tunes_with_measurement_on_the_gpu():
    from explore.optimize import optimize

    task = get_task("GMM", 256, 256, 256)
    result = optimize(task, "cuda", trials=8, method="q", evaluator="measure", space="template")
    assert result.space.name.startswith("template:GMM") and result.history.num_ok >= 1
    inputs = task.random_inputs(2)
    np.testing.assert_allclose(result.kernel.run(*inputs)[0], task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-3)
