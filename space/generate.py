"""generate(info, target): the schedule space of an analysed computation on a target."""

from __future__ import annotations

from flexsched.target import get_target

from . import cpu, fpga, gpu
from .space import Space

# Raise when a change to the rules would give a recorded config another meaning.
GENERATED_VERSION = 5
# The rules per kind of machine; each reads the target's capabilities, never its name.
_RULES = {"cpu": cpu, "gpu": gpu, "fpga": fpga}


def generate(info, target):
    """The Space of `info` (an AnalysisInfo) on `target` (a Target or its name)."""
    target = get_target(target)
    rules = _RULES[target.kind]
    optional = {name: _bound(getattr(rules, name, None), info, target) for name in ("family", "broad_family", "fits")}
    return Space(info, target, rules.knobs(info, target), lambda config: rules.emit(info, target, config),
                 version=GENERATED_VERSION, **optional)


def _bound(rule, info, target):
    """rule(info, target, config) as a function of config alone; None where the rules lack it."""
    return rule and (lambda config: rule(info, target, config))
