"""Sweep files: a TOML description of cases, targets, contenders, budgets and output paths, validated
whole before anything runs (an error names the field).

    trials = 100                 # per tuning job (case x target x contender x seed)
    seeds = [0]
    targets = ["llvm"]           # default
    contenders = ["q", "template", "library"]   # q, p, random (generated space), template[:NAME], library
    template_method = "q"        # how template contenders are searched (default q)
    finalists = 5                # re-time each job's fastest K side by side (0: the search's best)
    rounds = 5                   # alternating rounds of the final side-by-side comparison
    time_budget_s = 600          # optional: tuning seconds per case, shared evenly by its jobs
    results = "experiments/results/NAME.json"
    records = "experiments/results/NAME_records"
    modules = ["my_ops.py"]      # optional: modules (or .py files, relative to this file) defining operators

    [[cases]]
    name = "GMM1024"
    op = "GMM"
    args = [1024, 1024, 1024]

Relative paths are relative to the directory the sweep runs in.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import FlexschedError

METHODS = ("q", "p", "random")
LIBRARY = "library"
KEYS = {"name", "trials", "seeds", "targets", "contenders", "template_method", "finalists", "rounds",
        "time_budget_s", "results", "records", "cases", "description", "modules", "cost_model", "screen_ratio"}
CASE_KEYS = {"name", "op", "args"}


class SpecError(FlexschedError):
    """A sweep file that cannot be read or does not describe a sweep (one line, naming the field)."""


@dataclass(frozen=True)
class Case:
    """One operator instance of a sweep."""

    name: str
    op: str
    args: tuple

    def task(self):
        from .registry import get_task

        return get_task(self.op, *self.args)


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep file."""

    name: str
    cases: tuple
    targets: tuple
    contenders: tuple
    trials: int
    seeds: tuple
    template_method: str
    finalists: int
    rounds: int
    time_budget_s: float | None
    results: Path
    records: Path
    modules: tuple = ()   # the modules the file names, loaded when it was read
    cost_model: str | None = None    # screen every tuning job's proposals with this model (a name or a saved file)
    screen_ratio: int | None = None  # candidates ranked per candidate measured

    @property
    def tuners(self):
        """The contenders that are tuning jobs (all but the library)."""
        return tuple(c for c in self.contenders if c != LIBRARY)


def is_contender(name):
    return name in METHODS or name == LIBRARY or name == "template" or (
        isinstance(name, str) and name.startswith("template:") and len(name) > len("template:"))


def load_spec(path, **overrides):
    """The SweepSpec of a TOML file; overrides (trials, finalists, rounds, results, records) replace
    the file's values when not None."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"no sweep file '{path}'") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"cannot read sweep file '{path}': {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{path}: not valid TOML: {err}") from None
    data.update({key: value for key, value in overrides.items() if value is not None})
    return parse_spec(data, path)


def _fail(path, field, message):
    raise SpecError(f"{path}: field '{field}': {message}")


def _int(path, data, field, default, least):
    value = data.get(field, default)
    if value is None:
        _fail(path, field, "missing")
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        _fail(path, field, f"must be an integer of at least {least}, got {value!r}")
    return value


def _strings(path, data, field, default):
    value = data.get(field, default)
    if value is None:
        _fail(path, field, "missing")
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        _fail(path, field, f"must be a non-empty list of strings, got {value!r}")
    return tuple(value)


def parse_spec(data, path="sweep"):
    """Validate a sweep file's table, loading the modules it names first (their operators are its cases');
    a SpecError names the first bad field."""
    from .registry import task_definition
    from .target import get_target

    unknown = sorted(set(data) - KEYS)
    if unknown:
        _fail(path, unknown[0], f"unknown field (known: {', '.join(sorted(KEYS))})")
    modules = _load_modules(path, data)
    targets = _strings(path, data, "targets", ["llvm"])
    for target in targets:
        try:
            get_target(target)
        except FlexschedError as err:
            _fail(path, "targets", str(err))
    contenders = _strings(path, data, "contenders", None)
    for contender in contenders:
        if not is_contender(contender):
            _fail(path, "contenders", f"unknown contender {contender!r} (known: q, p, random, template, "
                                      "template:NAME, library)")
    template_method = data.get("template_method", "q")
    if template_method not in METHODS:
        _fail(path, "template_method", f"must be one of {', '.join(METHODS)}, got {template_method!r}")
    trials = _int(path, data, "trials", None, 1)
    seeds = data.get("seeds", [0])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool)
                                                           for s in seeds):
        _fail(path, "seeds", f"must be a non-empty list of integers, got {seeds!r}")
    finalists = _int(path, data, "finalists", 5, 0)
    rounds = _int(path, data, "rounds", 5, 1)
    budget = data.get("time_budget_s")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget <= 0):
        _fail(path, "time_budget_s", f"must be a positive number of seconds, got {budget!r}")
    cost_model = data.get("cost_model")
    if cost_model is not None and (not isinstance(cost_model, str) or not cost_model):
        _fail(path, "cost_model", f"must be a model name (xgb, gnn) or a saved model's file, got {cost_model!r}")
    screen_ratio = _int(path, data, "screen_ratio", None, 1) if "screen_ratio" in data else None
    if screen_ratio is not None and cost_model is None:
        _fail(path, "screen_ratio", "needs cost_model")
    name = data.get("name", Path(str(path)).stem)
    paths = {}
    for field, default in (("results", f"{name}.json"), ("records", f"{name}_records")):
        value = data.get(field, default)
        if not isinstance(value, (str, Path)) or not str(value):
            _fail(path, field, f"must be a path, got {value!r}")
        paths[field] = Path(value)
    cases = data.get("cases")
    if not isinstance(cases, list) or not cases:
        _fail(path, "cases", "must be a non-empty array of tables ([[cases]] with name, op, args)")
    parsed, seen = [], set()
    for number, case in enumerate(cases, 1):
        field = f"cases[{number}]"
        if not isinstance(case, dict):
            _fail(path, field, "must be a table with name, op and args")
        unknown = sorted(set(case) - CASE_KEYS)
        if unknown:
            _fail(path, f"{field}.{unknown[0]}", "unknown field (known: name, op, args)")
        op, args = case.get("op"), case.get("args", [])
        if not isinstance(op, str):
            _fail(path, f"{field}.op", f"must be an operator name, got {op!r}")
        if not isinstance(args, list):
            _fail(path, f"{field}.args", f"must be a list of the operator's arguments, got {args!r}")
        case_name = case.get("name", f"{op}({', '.join(map(str, args))})")
        if not isinstance(case_name, str) or case_name in seen:
            _fail(path, f"{field}.name", f"must be a string unique in the sweep, got {case_name!r}")
        seen.add(case_name)
        try:
            definition = task_definition(op)
        except FlexschedError as err:
            _fail(path, f"{field}.op", str(err))
        try:
            definition.create(*args)
        except FlexschedError as err:
            _fail(path, f"{field}.args", str(err))
        parsed.append(Case(case_name, op, tuple(args)))
    return SweepSpec(name, tuple(parsed), targets, contenders, trials, tuple(seeds), template_method, finalists,
                     rounds, float(budget) if budget is not None else None, paths["results"], paths["records"],
                     modules, cost_model, screen_ratio)


def _load_modules(path, data):
    """Load the modules the file's 'modules' list names (.py paths relative to the file); their names."""
    from .user_modules import ModuleLoadError, load_modules

    modules = data.get("modules", [])
    if not isinstance(modules, list) or not all(isinstance(m, str) and m for m in modules):
        _fail(path, "modules", f"must be a list of module names or .py files, got {modules!r}")
    try:
        load_modules(modules, base_dir=Path(str(path)).parent)
    except ModuleLoadError as err:
        _fail(path, "modules", str(err))
    return tuple(modules)
