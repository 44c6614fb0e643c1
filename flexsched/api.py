"""The entry points a user calls from flexsched: tune, build, rebuild from records. Each takes the task
as the user holds it (a registered name with its arguments, a Task, or a computation's output
tensors) and imports the heavy layers (explore, codegen, torch) only when called. optimize keeps
each run's best record in the tuning database; build applies a workload's stored best at once.
"""

from __future__ import annotations

import logging

from .registry import as_task

logger = logging.getLogger("flexsched")


def optimize(task, target="llvm", trials=100, method="q", log=None, database=None, **options):
    """explore.optimize.optimize, then its best record added to the tuning database (None: the
    user's, a path, or False for none); the TuneResult."""
    from explore.optimize import optimize as search

    from .database import remember

    result = search(as_task(task), target, trials=trials, method=method, log=log, **options)
    remember(result, database)
    return result


def build(task, target="llvm", schedule=None, database=None):
    """A Kernel of `task` (a Task, (name, *args) or output tensor(s)) on `target`: under `schedule`
    if given, else under the best schedule the tuning database holds for this workload on this very
    target (None: the user's database, a path, False: none), else the naive one. kernel.origin says
    which, in one line that is also logged ("from the database: 12.3 GFLOPS, tuned 2025-06-01 ...");
    kernel.record is the record applied, if any. Records of another CPU are never applied."""
    from codegen.kernel import build as compile_kernel

    from .database import Lookup, open_database
    from .errors import FlexschedError
    from .target import get_target

    task, target = as_task(task), get_target(target)
    if schedule is not None:
        kernel = compile_kernel(task, schedule, target)
        kernel.origin = "the schedule given"
        return kernel
    if database is False:
        lookup = Lookup(None, None, f"{task}: naive schedule (no database)")
    else:
        lookup = open_database(database).lookup(task, target)
    if lookup.applied:
        try:
            kernel = compile_kernel(task, lookup.schedule, target)
        except (FlexschedError, ValueError) as err:  # today's code generator refuses a schedule it once built
            lookup = Lookup(None, None, f"{task}: the stored schedule (line {lookup.record.line} of "
                                        f"{open_database(database).path}) no longer builds ({err}); naive schedule", warn=True)
    if not lookup.applied:
        kernel = compile_kernel(task, None, target)
    kernel.origin, kernel.record = lookup.note, lookup.record
    logger.log(logging.WARNING if lookup.warn else logging.INFO, "%s", lookup.note)
    return kernel


def build_best(path, task=None, target="llvm"):
    """The Kernel of the best record in a record file, replayed without searching (of `task` if given,
    else of the best record's task, which must be registered in this process)."""
    from explore.optimize import build_best as rebuild

    return rebuild(path, None if task is None else as_task(task), target)
