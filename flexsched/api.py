"""The entry points a user calls from flexsched: tune, build, rebuild from records. Each takes the task
as the user holds it (a registered name with its arguments, a Task, or a computation's output
tensors) and imports the heavy layers (explore, codegen, torch) only when called.
"""

from __future__ import annotations

from .registry import as_task


def optimize(task, target="llvm", trials=100, method="q", log=None, **options):
    """Tune `task` on `target`: a TuneResult with the best config, its seconds and GFLOPS, a built
    kernel (CPU) and the history. See explore.optimize.optimize for the options."""
    from explore.optimize import optimize as run

    return run(as_task(task), target, trials=trials, method=method, log=log, **options)


def build(task, schedule=None, target="llvm"):
    """A Kernel of `task` for `target` under `schedule` (a Schedule or its JSON; None: the naive
    loop nest), compiled in this process."""
    from codegen.kernel import build as build_kernel

    return build_kernel(as_task(task), schedule, target)


def build_best(path, task=None, target="llvm"):
    """The Kernel of the best record in a record file, replayed without searching (of `task` if given,
    else of the best record's task, which must be registered in this process)."""
    from explore.optimize import build_best as rebuild

    return rebuild(path, None if task is None else as_task(task), target)
