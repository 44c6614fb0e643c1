"""The post-search re-timing phase: the search's fastest few points, rebuilt, checked against the
reference once more and timed again side by side; the fastest of them is the result.

One search-time measurement can land in a slow phase of a core, so a best of hundreds chosen by it
alone is often not the fastest kernel; timing the top few together in alternating rounds is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from flexsched.errors import FlexschedError

from .side_by_side import Timed, time_side_by_side

DEFAULT_FINALISTS = 5
DEFAULT_ROUNDS = 5


@dataclass(frozen=True)
class Finalist:
    """One re-timed point: its schedule, its search-time seconds and its re-timed median seconds
    (inf when it failed the check or the build; error says why)."""

    schedule_json: str
    search_seconds: float
    seconds: float
    error: str = ""


@dataclass(frozen=True)
class FinalistsResult:
    """The re-timed finalists, fastest first, and the kernel of the fastest."""

    finalists: tuple
    kernel: Any

    @property
    def best(self):
        return self.finalists[0]


class FinalistError(FlexschedError, RuntimeError):
    """No finalist could be built and checked."""


def fastest_entries(history, count):
    """The `count` fastest successful entries of a History (their schedules are distinct already)."""
    good = sorted((entry for entry in history if entry.ok and math.isfinite(entry.seconds)),
                  key=lambda entry: entry.seconds)
    return good[:max(0, count)]


def checked_kernel(task, schedule_json, target, inputs, reference):
    """(kernel, its arguments on the device) built in the isolated worker and run once; raises
    ValueError with the mismatch when its outputs differ from the reference."""
    from codegen.isolated_build import build_isolated

    return checked(build_isolated(task, schedule_json, target), inputs, reference)


def checked(kernel, inputs, reference):
    """(kernel, its arguments on the device) after one run; ValueError with the mismatch when its
    outputs differ from the reference."""
    from codegen.measure import compare_outputs

    arrays = kernel.arguments(inputs)
    kernel(*arrays)
    outputs = [kernel.backend.to_host(array) for array in arrays[len(inputs):]]
    mismatch = compare_outputs(outputs, reference, [t.name for t in kernel.task.outputs])
    if mismatch:
        raise ValueError(mismatch)
    return kernel, arrays


def kernel_timed(name, kernel, arrays):
    """A Timed call of a kernel on its arguments, timed the way its back end times."""
    return Timed(name, lambda: kernel(*arrays), kernel.backend.time_runs)


def retime(task, target, entries, rounds=DEFAULT_ROUNDS, inputs=None, reference=None):
    """FinalistsResult of History entries: each rebuilt (side by side, one worker per core), checked
    and timed side by side."""
    from codegen.isolated_build import build_many_isolated
    from flexsched.target import get_target

    target = get_target(target)
    if inputs is None:
        inputs = task.random_inputs(seed=1)
    if reference is None:
        reference = task.evaluate(*inputs)
    built, failed = [], []
    for entry, kernel in zip(entries, build_many_isolated(task, [e.schedule_key for e in entries], target)):
        try:
            if isinstance(kernel, Exception):   # its build failed: it drops out like a wrong one
                raise kernel
            kernel, arrays = checked(kernel, inputs, reference)
        except Exception as err:  # a failure is a value: this finalist drops out, the others go on
            failed.append(Finalist(entry.schedule_key, entry.seconds, math.inf, f"{type(err).__name__}: {err}"))
            continue
        built.append((entry, kernel, arrays))
    if not built:
        raise FinalistError(f"none of the {len(entries)} finalists of {task} built and matched the reference: "
                            + (failed[0].error if failed else "no finalist"))
    timing = time_side_by_side([kernel_timed(str(i), kernel, arrays) for i, (_, kernel, arrays) in enumerate(built)],
                               rounds)
    timed = [(Finalist(entry.schedule_key, entry.seconds, timing.seconds(str(i))), kernel)
             for i, (entry, kernel, _) in enumerate(built)]
    timed.sort(key=lambda pair: pair[0].seconds)
    return FinalistsResult(tuple(f for f, _ in timed) + tuple(failed), timed[0][1])
