"""Hand-written schedule templates: what an AutoTVM user writes, as a Space the search tunes unchanged.

A template is a function `template(cfg, info, target) -> Schedule` registered for an operator.
It declares its tunable knobs through `cfg` as it builds the schedule, define-by-run:

    @register_template("GMM", default=True)
    def gmm_blocked(cfg, info, target):
        i = cfg.split("tile_i", 1024, 3)          # a split of extent 1024 into 3 factors
        unroll = cfg.choice("unroll", (0, 16, 64))
        return Schedule((Split("O", "i", i), ...))

Run once with a declaring cfg, the function names its knobs (each value taken as the first
of its knob); the Space then runs it once per point with the point's values. The knobs a
template declares must not depend on the values it is given, as in AutoTVM.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass

from flexsched.errors import FlexschedError
from flexsched.target import get_target

from .knobs import ChoiceKnob, SplitKnob
from .space import Space, SpaceError

# Importing these modules registers the template library.
LIBRARY_MODULES = ("space.template_library",)


class TemplateError(FlexschedError, ValueError):
    """An unknown template, or one that declares its knobs inconsistently."""


@dataclass(frozen=True)
class Template:
    """A registered template: the operator it schedules, its name, the target kinds it supports."""

    op: str
    name: str
    func: object
    kinds: tuple
    default: bool
    version: int
    description: str

    @property
    def space_name(self):
        return f"template:{self.op}:{self.name}"


_TEMPLATES = {}   # op -> {name: Template}, in registration order
_library_loaded = False


def register_template(op, name=None, kinds=("cpu",), default=False, version=1, description=None):
    """Register `template(cfg, info, target) -> Schedule` for operator `op` on the given target kinds.

    default: the template `tune --template` picks when none is named (per op and kind). version:
    raise it when the template changes what its points mean, so old records are not mixed in."""
    def decorate(func):
        template_name = name or func.__name__
        kinds_tuple = (kinds,) if isinstance(kinds, str) else tuple(kinds)
        text = description or (inspect.getdoc(func) or "").split("\n")[0]
        template = Template(op, template_name, func, kinds_tuple, bool(default), int(version), text)
        _TEMPLATES.setdefault(op, {})[template_name] = template
        return func
    return decorate


def _load_library():
    global _library_loaded
    if not _library_loaded:
        _library_loaded = True
        for module in LIBRARY_MODULES:
            importlib.import_module(module)


def list_templates(op=None, kind=None):
    """Every registered Template (of one operator and target kind, if given)."""
    _load_library()
    return [template for template_op, by_name in _TEMPLATES.items() if op in (None, template_op)
            for template in by_name.values() if kind in (None, *template.kinds)]


def get_template(op, name=None, kind="cpu"):
    """The template of `op` named `name`, or its default for the target kind when name is None."""
    candidates = list_templates(op, kind)
    if name is None:
        defaults = [template for template in candidates if template.default] or candidates
        if not defaults:
            raise TemplateError(f"operator '{op}' has no template for {kind} targets"
                                + _known_text(list_templates(kind=kind), "templates exist for"))
        return defaults[0]
    for template in candidates:
        if template.name == name:
            return template
    raise TemplateError(f"operator '{op}' has no template '{name}' for {kind} targets"
                        + _known_text(candidates, "known"))


def _known_text(templates, lead):
    names = sorted({t.name if lead == "known" else t.op for t in templates})
    return f"; {lead}: {', '.join(names)}" if names else ""


class _DeclaringConfig:
    """The cfg of the first run: records each knob and answers with its first value."""

    def __init__(self, template):
        self.template = template
        self.knobs = []

    def split(self, name, extent, parts, caps=None, floors=None, guarded=False):
        """Factors (outer to inner) splitting a loop of `extent` into `parts`; exact divisors unless guarded."""
        knob = SplitKnob(name, extent, parts, caps=caps, floors=floors, guarded=guarded)
        return self._declare(knob)

    def choice(self, name, values, kind="choice", ordered=True):
        """One of `values`; ordered: the search steps between neighbours, else to any other value."""
        return self._declare(ChoiceKnob(name, kind, tuple(values), ordered=ordered))

    def _declare(self, knob):
        if any(existing.name == knob.name for existing in self.knobs):
            raise TemplateError(f"template '{self.template.name}' declares knob '{knob.name}' twice")
        self.knobs.append(knob)
        return knob.values[0]


class _PointConfig:
    """The cfg of a point's run: answers each knob with the point's value."""

    def __init__(self, template, config):
        self.template = template
        self.config = config
        self.asked = []

    def split(self, name, extent, parts, caps=None, floors=None, guarded=False):
        return self._value(name)

    def choice(self, name, values, kind="choice", ordered=True):
        return self._value(name)

    def _value(self, name):
        value = self.config.get(name)
        if value is None:
            raise TemplateError(f"template '{self.template.name}' asked for knob '{name}', which it did not "
                                "declare on its first run (its knobs must not depend on their values)")
        self.asked.append(name)
        return value


def template_space(task, info, target, name=None):
    """The Space of a registered template of `task`'s operator on `target` (its default if name is None)."""
    target = get_target(target)
    template = name if isinstance(name, Template) else get_template(task.name, name, target.kind)
    if target.kind not in template.kinds:
        raise TemplateError(f"template '{template.name}' of {template.op} is for {', '.join(template.kinds)} "
                            f"targets, not {target.kind}")
    declaring = _DeclaringConfig(template)
    template.func(declaring, info, target)

    def emit(config):
        reading = _PointConfig(template, config)
        schedule = template.func(reading, info, target)
        if len(reading.asked) != len(declaring.knobs):
            raise SpaceError(f"template '{template.name}' read {len(reading.asked)} of its "
                             f"{len(declaring.knobs)} knobs for this point")
        return schedule

    return Space(info, target, declaring.knobs, emit, name=template.space_name, version=template.version)
