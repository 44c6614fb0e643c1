"""The CPU template library: a default template for every operator, spaces a fraction of the
generated ones, and the template API's errors for inconsistent knobs and unknown names."""

import importlib.util
from pathlib import Path

import pytest

from analysis import analyze
from flexsched.registry import get_task
from flexsched.schedule import Schedule
from space import generate
from space.template import TemplateError, _TEMPLATES, get_template, register_template, template_space

OPERATORS = ("GMV", "GMM", "BIL", "C1D", "T1D", "C2D", "T2D", "C3D", "T3D", "GRP", "DEP", "DIL", "BCM", "SHO")


def _benchmark_shapes():
    """The benchmark shapes the space-size experiment uses (one per operator)."""
    path = Path(__file__).parents[2] / "experiments" / "template_space_sizes.py"
    spec = importlib.util.spec_from_file_location("template_space_sizes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SHAPES


@pytest.mark.parametrize("op", OPERATORS)
def test_every_operator_has_a_default_cpu_template(op):
    assert get_template(op, kind="cpu").op == op


@pytest.mark.parametrize("op,args", sorted(_benchmark_shapes().items()))
def test_a_template_space_is_smaller_than_the_generated_space(op, args):
    task = get_task(op, *args)
    info = analyze(task)
    assert template_space(task, info, "llvm").size < generate(info, "llvm").size


@pytest.fixture
def scratch_op():
    """A fresh operator name whose registry entry is removed afterwards."""
    op = "_TEST_TEMPLATE_OP"
    yield op
    _TEMPLATES.pop(op, None)


def _gmm():
    task = get_task("GMM", 16, 16, 16)
    return task, analyze(task)


def test_declaring_a_knob_twice_is_a_template_error(scratch_op):
    @register_template(scratch_op, name="twice")
    def twice(cfg, info, target):
        cfg.choice("unroll", (0, 1))
        cfg.choice("unroll", (0, 1))

    task, info = _gmm()
    with pytest.raises(TemplateError, match="declares knob 'unroll' twice"):
        template_space(task, info, "llvm", get_template(scratch_op, "twice"))


def test_reading_an_undeclared_knob_is_a_template_error(scratch_op):
    @register_template(scratch_op, name="sneaky")
    def sneaky(cfg, info, target):
        if cfg.choice("split", (0, 1)):  # its knobs depend on a value: the first run never sees "extra"
            cfg.choice("extra", (0, 1))
        return Schedule(())

    task, info = _gmm()
    space = template_space(task, info, "llvm", get_template(scratch_op, "sneaky"))
    with pytest.raises(TemplateError, match="asked for knob 'extra'"):
        space.schedule((1,))


def test_an_unknown_operator_lists_the_operators_with_templates():
    with pytest.raises(TemplateError, match="templates exist for: .*C2D.*GMM"):
        get_template("NOPE")


def test_an_unknown_template_name_lists_the_known_ones():
    with pytest.raises(TemplateError, match="known: gmm_register_blocked"):
        get_template("GMM", "nope")
