"""The registry of target kinds: evaluators by name, back ends and FPGA parts, each loaded from its owner."""

import subprocess
import sys

import pytest

from flexsched import plugins
from flexsched.evaluation import Evaluator
from flexsched.target import Target, get_target


def test_each_kind_names_its_evaluators_default_first():
    assert plugins.evaluator_names("cpu") == ("measure", "model")
    assert plugins.evaluator_names("gpu") == ("measure", "model")
    assert plugins.evaluator_names("fpga") == ("model",)


def test_an_unknown_name_lists_those_of_the_kind_in_one_line():
    with pytest.raises(plugins.PluginError) as raised:
        plugins.make_evaluator(get_target("cuda"), "guess")
    assert str(raised.value) == "unknown evaluator 'guess' for gpu targets; choose one of measure, model"


def test_a_kind_without_a_back_end_says_which_have_one():
    with pytest.raises(plugins.PluginError, match="no back end for target kind 'fpga'; back ends exist for: cpu, gpu"):
        plugins.backend("fpga")
    assert plugins.has_backend(get_target("llvm")) and not plugins.has_backend("fpga")


def test_fpga_parts_reach_the_target_by_registration():
    parts, default = plugins.devices("fpga")
    assert default == "vu9p" and {"vu9p", "zu9eg", "vx485t"} <= set(parts)
    assert get_target("fpga:zu9eg").dsp_slices == parts["zu9eg"]["dsp_slices"] == 2520


def test_a_new_kind_plugs_in_without_touching_explore(monkeypatch):
    from explore.evaluator import evaluator_for

    class Toy(Evaluator):
        name = "toy"

        def __init__(self, target, scale=1):
            self.target, self.scale = target, scale

        def evaluate(self, task, space, points):
            return []

    monkeypatch.setattr(plugins, "_evaluators", {**plugins._evaluators})
    monkeypatch.setattr(plugins, "_defaults", {**plugins._defaults})
    plugins.register_evaluator("toy", "estimate", Toy, default=True)
    toy = Target("toy", "toy", "a toy device")
    made = evaluator_for(toy, scale=3)
    assert isinstance(made, Toy) and made.scale == 3 and made.target is toy


def test_asking_for_an_evaluator_loads_no_back_end():
    code = ("import sys; from explore.evaluator import evaluator_for; evaluator_for('llvm'); evaluator_for('fpga');"
            "print(sorted(m for m in sys.modules if m in ('codegen.cpu_backend', 'codegen.cuda_backend', "
            "'torch', 'cupy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
