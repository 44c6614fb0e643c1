"""generate(info, target): the schedule space of an analysed computation on a target."""

from __future__ import annotations

from flexsched.target import get_target

from . import cpu, fpga, gpu
from .space import Space

# Raise when a change to the rules would give a recorded config another meaning.
GENERATED_VERSION = 1
# The rules per kind of machine; each reads the target's capabilities, never its name.
_RULES = {"cpu": cpu, "gpu": gpu, "fpga": fpga}


def generate(info, target):
    """The Space of `info` (an AnalysisInfo) on `target` (a Target or its name)."""
    target = get_target(target)
    rules = _RULES[target.kind]
    family, fits = getattr(rules, "family", None), getattr(rules, "fits", None)
    return Space(info, target, rules.knobs(info, target), lambda config: rules.emit(info, target, config),
                 version=GENERATED_VERSION, family=family and (lambda config: family(info, target, config)),
                 fits=fits and (lambda config: fits(info, target, config)))
