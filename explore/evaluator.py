"""Evaluators as the search sees them: the interface (flexsched.evaluation) and the one for a target."""

# Each target kind's evaluators are registered by the package that owns the kind (flexsched.plugins:
# codegen measures on CPUs and GPUs and has the static GPU model, fpga_model has the FPGA model);
# this module asks that registry by name and imports no back end or model itself.

from __future__ import annotations

from flexsched import plugins
from flexsched.evaluation import Evaluation, Evaluator, ExplorationError
from flexsched.target import get_target

__all__ = ["Evaluation", "Evaluator", "ExplorationError", "evaluator_for", "evaluator_names"]


def evaluator_names(target):
    """The evaluator names registered for the target's kind, its default first."""
    return plugins.evaluator_names(get_target(target).kind)


def evaluator_for(target, evaluator=None, **options):
    """A new evaluator for target: its kind's one called evaluator ("measure", "model"), or the kind's default."""
    target = get_target(target)
    try:
        return plugins.make_evaluator(target, evaluator, **options)
    except plugins.PluginError as err:
        raise ExplorationError(str(err)) from None
