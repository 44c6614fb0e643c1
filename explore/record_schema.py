"""The schema of a record file's lines: each field's type and range, checked before anything uses it.

A record file is untrusted input (copied between machines, edited, truncated by a killed run,
forged), so a line is used only once it passes: the required fields with their types, a result
status that some evaluator gives, a finite positive time for a success, the optional fields
type-checked where present, strings that print safely, and nesting shallow enough that no code
reading it can recurse out of stack. A line either passes or raises RecordSchemaError naming the
field at fault. Claim lines (see explore.claims) have a schema of their own.
"""

from __future__ import annotations

import math
import re

from codegen.measure import STATUSES as MEASURED_STATUSES
from flexsched.errors import FlexschedError
from flexsched.schedule import ScheduleError, step_from_dict

# The models' verdicts besides "ok": explore.evaluator's GPU model and fpga_model's evaluator; and
# a candidate whose Ray worker was lost twice (explore.ray_evaluator).
STATUSES = MEASURED_STATUSES + ("rejected", "error", "worker_lost")
REQUIRED = ("task", "target", "config", "result")
# record_line writes at most 6 levels (a GPU estimate's launches in result.details); anything
# far deeper is hostile, and Config, json.dumps and friends recurse over it.
MAX_DEPTH = 32
# A JSON escape of a UTF-16 surrogate (\uD800-\uDFFF): the only way a line read as strict UTF-8 holds one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class RecordSchemaError(FlexschedError, ValueError):
    """A line that breaks the schema; `field` names the part at fault ("line" for the whole)."""

    def __init__(self, field, message):
        super().__init__(message)
        self.field = field


def check_line(data, text=None):
    """Check one parsed line; "record" or "claim" (what kind of line it is), else RecordSchemaError.
    text: the JSON it was parsed from, if known (its strings then need checking only where it escapes
    a surrogate)."""
    _check_nesting_and_strings(data, text is None or _escapes_a_surrogate(text))
    if not isinstance(data, dict):
        raise RecordSchemaError("line", f"line: expected a JSON object, got {_kind(data)}")
    if "claim" in data:
        check_claim(data)
        return "claim"
    check_record(data)
    return "record"


def check_record(data):
    """The fields of a record line (an object already known to be shallow)."""
    missing = [name for name in REQUIRED if name not in data]
    if missing:
        raise RecordSchemaError(missing[0], f"missing {', '.join(missing)}")
    _check_task(data["task"], "task")
    _object(data["target"], "target")
    _optional(data["target"], "name", _printable, "target")
    _optional(data["target"], "cpu", _printable, "target")
    _optional(data["target"], "features_digest", _printable, "target")
    _check_config(data["config"], "config")
    _check_result(data["result"])
    _optional(data, "trial", _natural)
    _optional(data, "trials", _natural)   # the whole run's, on the line a tuning database keeps
    _optional(data, "point", _naturals)
    _optional(data, "origin", _check_origin, nullable=True)
    _optional(data, "elapsed", _non_negative)
    _optional(data, "gflops", _non_negative, nullable=True)
    _optional(data, "seconds", _non_negative, nullable=True)
    _optional(data, "judged_by", _printable)
    _optional(data, "space", _check_space)
    _optional(data, "schedule", _check_schedule)
    _optional(data, "method", _printable)
    _optional(data, "seed", _integer, nullable=True)
    _optional(data, "error", _string, nullable=True)
    _optional(data, "time", _string)
    _optional(data, "version", _string)


def check_claim(data):
    """A claim line: {"claim": {run, pid, host, time, and scope with configs, or ended: true}}."""
    if set(data) != {"claim"}:
        extra = sorted(set(data) - {"claim"})[0]
        raise RecordSchemaError(extra, f"{extra}: a claim line holds nothing but its claim")
    claim = _object(data["claim"], "claim")
    for name, check in (("run", _printable), ("host", _printable), ("pid", _positive_integer),
                        ("time", _finite)):
        if name not in claim:
            raise RecordSchemaError(f"claim.{name}", f"claim.{name}: missing")
        check(claim[name], f"claim.{name}")
    if claim.get("ended") is True:
        return
    if "ended" in claim:
        raise RecordSchemaError("claim.ended", f"claim.ended: expected true, got {_kind(claim['ended'])}")
    for name in ("scope", "configs"):
        if name not in claim:
            raise RecordSchemaError(f"claim.{name}", f"claim.{name}: missing")
    _printable(claim["scope"], "claim.scope")
    configs = _list(claim["configs"], "claim.configs")
    for index, config in enumerate(configs):
        _check_config(config, f"claim.configs[{index}]")


def _check_task(task, field):
    _object(task, field)
    if "name" not in task or "args" not in task:
        missing = "name" if "name" not in task else "args"
        raise RecordSchemaError(f"{field}.{missing}", f"{field}.{missing}: missing")
    _printable(task["name"], f"{field}.name")
    if not task["name"]:
        raise RecordSchemaError(f"{field}.name", f"{field}.name: empty")
    for index, arg in enumerate(_list(task["args"], f"{field}.args")):
        _scalar(arg, f"{field}.args[{index}]")
        if isinstance(arg, str):
            _printable(arg, f"{field}.args[{index}]")
    _optional(task, "module", _printable, field, nullable=True)


def _check_space(space, field):
    _object(space, field)
    for name in ("name", "version"):
        if name not in space:
            raise RecordSchemaError(f"{field}.{name}", f"{field}.{name}: missing")
    _printable(space["name"], f"{field}.name")
    _natural(space["version"], f"{field}.version")


def _check_schedule(steps, field):
    """A list of schedule steps, each one a known step kind with its fields."""
    for index, step in enumerate(_list(steps, field)):
        _object(step, f"{field}[{index}]")
        try:
            step_from_dict(step)
        except (ScheduleError, TypeError) as err:
            raise RecordSchemaError(f"{field}[{index}]", f"{field}[{index}]: {err}") from None


def _check_config(config, field):
    _object(config, field)
    for name, value in config.items():
        if not name:
            raise RecordSchemaError(field, f"{field}: a knob with an empty name")
        _knob_value(value, f"{field}.{name}")


def _knob_value(value, field):
    """A scalar, or a list of knob values (split factors are lists)."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            _knob_value(item, f"{field}[{index}]")
    else:
        _scalar(value, field)


def _check_result(result):
    _object(result, "result")
    if "status" not in result:
        raise RecordSchemaError("result.status", "result.status: missing")
    status = result["status"]
    if not isinstance(status, str) or status not in STATUSES:
        raise RecordSchemaError("result.status", f"result.status: expected one of {', '.join(STATUSES)}, "
                                                 f"got {_show(status)}")
    if status == "ok":
        seconds = result.get("seconds")
        if not _is_number(seconds) or not math.isfinite(seconds) or seconds <= 0:
            raise RecordSchemaError("result.seconds", "result.seconds: expected a finite number > 0 for an ok "
                                                      f"result, got {_show(seconds)}")
    else:
        _optional(result, "seconds", _non_negative, "result", nullable=True)
    _optional(result, "error", _string, "result", nullable=True)
    _optional(result, "details", _object, "result", nullable=True)


def _check_origin(origin, field):
    _object(origin, field)
    for name in ("start", "direction"):
        if name not in origin:
            raise RecordSchemaError(f"{field}.{name}", f"{field}.{name}: missing")
    _naturals(origin["start"], f"{field}.start")
    _natural(origin["direction"], f"{field}.direction")
    _optional(origin, "direction_name", _string, field)


def _check_nesting_and_strings(data, strings=True):
    """No container deeper than MAX_DEPTH; with `strings`, no string (key or value) that cannot be
    written as UTF-8."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise RecordSchemaError("line", f"line: nested deeper than {MAX_DEPTH} levels")
            if isinstance(value, dict):
                if strings:
                    for key in value:
                        if isinstance(key, str):
                            _encodable(key, "line")
                value = value.values()
            # Only containers and (where asked) strings need a visit: a record holds hundreds of numbers.
            stack.extend((item, depth + 1) for item in value
                         if isinstance(item, (dict, list)) or (strings and isinstance(item, str)))
        elif strings and isinstance(value, str):
            _encodable(value, "line")


def _escapes_a_surrogate(text):
    """Whether JSON text may decode to a string holding a surrogate: strict UTF-8 holds none, so only
    a \\uD800-\\uDFFF escape can (a literal backslash before "ud8" may also match: then the strings
    are checked, no harm)."""
    return _SURROGATE_ESCAPE.search(text) is not None


def _encodable(text, field):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise RecordSchemaError(field, f"{field}: a string with an unpaired surrogate") from None


# ---------------------------------------------------------------- value checks: (value, field) -> value

def _optional(data, name, check, parent=None, nullable=False):
    if name not in data or (nullable and data[name] is None):
        return
    check(data[name], f"{parent}.{name}" if parent else name)


def _object(value, field):
    if not isinstance(value, dict):
        raise RecordSchemaError(field, f"{field}: expected an object, got {_kind(value)}")
    return value


def _list(value, field):
    if not isinstance(value, list):
        raise RecordSchemaError(field, f"{field}: expected a list, got {_kind(value)}")
    return value


def _string(value, field):
    if not isinstance(value, str):
        raise RecordSchemaError(field, f"{field}: expected a string, got {_kind(value)}")
    return value


def _printable(value, field):
    """A string shown to people as is: no control characters (no terminal escapes, no line breaks)."""
    _string(value, field)
    if not value.isprintable():
        raise RecordSchemaError(field, f"{field}: holds control characters")
    return value


def _scalar(value, field):
    if isinstance(value, float) and not math.isfinite(value):
        raise RecordSchemaError(field, f"{field}: expected a finite number, got {_show(value)}")
    if not isinstance(value, (str, int, float)):  # bool is an int
        raise RecordSchemaError(field, f"{field}: expected a string, number or boolean, got {_kind(value)}")
    return value


def _integer(value, field):
    if not isinstance(value, int) or isinstance(value, bool):
        raise RecordSchemaError(field, f"{field}: expected an integer, got {_kind(value)}")
    return value


def _natural(value, field):
    if _integer(value, field) < 0:
        raise RecordSchemaError(field, f"{field}: expected an integer >= 0, got {value}")
    return value


def _positive_integer(value, field):
    if _integer(value, field) <= 0:
        raise RecordSchemaError(field, f"{field}: expected an integer > 0, got {value}")
    return value


def _naturals(value, field):
    for index, item in enumerate(_list(value, field)):
        _natural(item, f"{field}[{index}]")
    return value


def _finite(value, field):
    if not _is_number(value) or not math.isfinite(value):
        raise RecordSchemaError(field, f"{field}: expected a finite number, got {_show(value)}")
    return value


def _non_negative(value, field):
    if _finite(value, field) < 0:
        raise RecordSchemaError(field, f"{field}: expected a number >= 0, got {_show(value)}")
    return value


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind(value):
    """The JSON type of a value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _show(value):
    """A value in a message: short, and only the type for containers."""
    if isinstance(value, (dict, list)):
        return _kind(value)
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
