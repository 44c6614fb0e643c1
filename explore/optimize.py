"""optimize(): tune a task on a target and hand back the best config, its time, GFLOPS and kernel.

With `log`, every evaluated point is appended to a JSON-lines record file as it comes back;
runs sharing the file claim points first, so none evaluates a config another already has
(explore.claims). With `resume=True`, the records of the same task and target already in that
file join the history first and are never evaluated again; the trial budget counts them, and
TuneResult.resumed_from says how many were used and why the rest were left out. What resume
guarantees: no recorded point is re-measured, the best can only stay or improve, and the run
continues deterministically for a given seed and record file (the random generator is seeded
from the seed and the number of resumed records; the Q-network is retrained from the logged
moves). It does not promise the same points an uninterrupted run would have visited.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from typing import Any

from flexsched import plugins
from flexsched.target import get_target, host_cores

from .claims import SharedRecords
from .evaluator import ExplorationError, evaluator_for
from .history import History
from .records import check_record_file, load_records, record_line
from .methods import DEFAULT_GAMMA
from .resume import best_replayable_record, resume_history, task_of_best_record
from .search import Search
from .transfer import transferred_points

logger = logging.getLogger("flexsched.explore.optimize")

# Points carried over per start (transfer_from): `starts` of them the best of each kind of kernel
# the other tasks found, the rest the next best of the broad kinds those cover. On the YOLO layers
# the first four hold one of every kind (on the late 3x3 layers one kind ran at 4-25 GFLOPS), and
# the four more held a faster one on C4, C6, C8, C10, C12, C13 and C14 with AVX2 code (1.06-1.38x)
# and on C10, C11, C13, C14 and C15 with AVX-512 (1.06-1.25x), timed side by side
# (experiments/transfer_starts.py).
TRANSFERRED_PER_START = 2


@dataclass(frozen=True)
class TuneResult:
    """The outcome of a tuning run; kernel is None for targets this process cannot build for."""

    task: Any
    target: Any
    method: str
    config: Any           # space.Config of the best point
    schedule: Any         # its flexsched.schedule.Schedule
    seconds: float
    gflops: float
    kernel: Any
    history: History
    trials: int           # points in the history (resumed ones included)
    evaluated: int        # points evaluated by this run
    stop_reason: str
    reused: int = 0       # points another run sharing the record file evaluated meanwhile
    resumed_from: Any = None  # the ResumeReport of a resumed run
    space: Any = None         # the Space searched
    finalists: tuple = ()     # the re-timed finalists (explore.finalists.Finalist), fastest first; () if none
    seed: int = 0
    judged_by: str = "measured"   # how the evaluator judged points ("measured" or "modelled")
    screened_out: int = 0         # proposals a cost model ranked out, never evaluated
    cost_model: Any = None        # the explore.cost_model.CostModel that screened, trained on this search
    priced_starts: int = 0        # random points the target's static model priced to pick the first starts
    transferred_starts: int = 0   # first starts carried over from other tasks' records (transfer_from)

    @property
    def gbps(self):
        """The task's compulsory bytes (inputs read and outputs written once) per second, in GB/s."""
        return self.history.bytes_moved / self.seconds / 1e9 if self.seconds > 0 else 0.0

    def summary(self):
        """A JSON-ready summary (the CLI's --json line)."""
        return {"task": str(self.task), "target": self.target.name, "method": self.method,
                "trials": self.trials, "evaluated": self.evaluated, "ok": self.history.num_ok,
                "stop_reason": self.stop_reason, "best_seconds": self.seconds, "best_gflops": self.gflops,
                "best_gbps": self.gbps, "flops": self.history.flops, "bytes": self.history.bytes_moved,
                "config": self.config.to_dict(), "elapsed": self.history.entries[-1].elapsed,
                "space": self.space.name if self.space is not None else None,
                "finalists": len(self.finalists), "screened_out": self.screened_out,
                "cost_model": self.cost_model.name if self.cost_model is not None else None}

    def best_record(self):
        """The record line of the chosen best point, with the run's trial count: what a tuning
        database keeps of this run."""
        entry = self.history.entry_for_key(self.schedule.to_json()) or self.history.best
        line = record_line(self.task, self.target, entry, self.method, self.seed, self.space, self.judged_by)
        return {**line, "trials": self.trials}


def _task_of(task):
    from flexsched.registry import as_task

    return as_task(task)


def resumed_history(path, task, target, space, judged_by=None):
    """A History holding the file's records of this task and target, judged the same way, that fit
    the space (duplicates dropped; see explore.resume for the report of what was left out)."""
    return resume_history(path, task, target, space, judged_by)[0]


def _has_back_end(target):
    """Whether some back end builds kernels for the target's kind (FPGA designs have none here)."""
    return plugins.has_backend(target)


def _check_resumable(report, task):
    """ExplorationError when a record file to resume from holds records, all of other tasks."""
    others = report.count("task")
    if report.used == 0 and others and sum(count for _, count in report.ignored) == others + report.count("corrupt"):
        raise ExplorationError(f"{report.path}: none of its {others} record{'s' if others != 1 else ''} is of {task}, "
                               "so there is nothing to resume (without resume, this task's records are added to it)")


def build_best(path, task=None, target="llvm"):
    """The kernel of the best record in a file on the target, built without searching (of `task` if
    given, else of the best record's task, which must be registered in this process), in the
    isolated build worker (a build that fails, hangs or crashes is a codegen BuildError). The
    record's own schedule is replayed, whichever space (generated or template) it came from."""
    from analysis import analyze
    from codegen.isolated_build import build_isolated
    from space import generate

    target = get_target(target)
    records = load_records(path)
    task = _task_of(task) if task is not None else task_of_best_record(path, records, target)
    _, schedule = best_replayable_record(path, records, task, target, lambda: generate(analyze(task), target))
    return build_isolated(task, schedule, target)


def space_for(task, target, space=None, info=None):
    """The Space to search: `space` itself if it is one; else by name: None or "generated" (the
    template-free space), "template" (the operator's default template) or "template:NAME"."""
    from analysis import analyze
    from space import Space, generate, template_space

    if isinstance(space, Space):
        return space
    info = info or analyze(task)
    if space in (None, "generated"):
        return generate(info, target)
    if isinstance(space, str) and (space == "template" or space.startswith("template:")):
        name = space.partition(":")[2] or None
        return template_space(task, info, target, name)
    raise ExplorationError(f"unknown space {space!r}: expected 'generated', 'template' or 'template:NAME'")


def optimize(task, target="llvm", trials=100, method="q", log=None, resume=False, seed=0, evaluator=None,
             starts=4, gamma=DEFAULT_GAMMA, early_stopping=None, min_improvement=0.01, build_kernel=True, progress=None,
             evaluator_options=None, space=None, finalists=0, cost_model=None, screen_ratio=None, ray=None,
             start_pool=0, transfer_from=None, **method_options):
    """Search the schedule space of `task` on `target`; a TuneResult with the best point found.

    task: a Task, (name, *args) of a registered task, or the output tensor(s) of a computation. method: "q" (Q-network directions), "p" (every direction)
    or "random". log: a JSON-lines record file; resume: continue from it. evaluator: any
    explore.evaluator.Evaluator, or the name of one for the target ("measure", "model"; default:
    the target kind's, closed afterwards). progress: called
    with the History after each evaluated point. early_stopping: stop after this many trials
    without a relative improvement of min_improvement. finalists: re-time the search's fastest
    this many points side by side after the search and report the fastest of them (explore.finalists;
    only for measured targets this process can build for; 0: the search's own best).
    cost_model: "xgb" or "gnn" (a new model learning from this search), a saved model's file, or an
    explore.cost_model.CostModel: each round, screen_ratio times more points are proposed than evaluated
    and the model's best-ranked are evaluated (explore.guided); None: every proposal is evaluated.    ray: measure
    the candidates on a Ray cluster (True: a local one, "ADDRESS", or an explore.ray_cluster.Cluster),
    each by the target kind's evaluator on the node that runs it (explore.ray_evaluator); the records,
    the finalists and the kernel stay here. start_pool: price this many random points with the target
    kind's static model (one worker per core) and measure its best-ranked first, as the search's
    first starts (explore.search), a quarter as many where starts carried over; 0: the first starts
    are random. transfer_from: a record file whose other tasks' best configs (same target, same
    knobs) are moved to this space and up to TRANSFERRED_PER_START times `starts` of them measured
    among the first starts (explore.transfer); it may be `log` itself, one file for a whole network.
    """
    task = _task_of(task)
    target = get_target(target)
    if resume and not log:
        raise ExplorationError("resume needs a record file (log=...)")
    if trials < 1:
        raise ExplorationError(f"trials must be at least 1, got {trials}")
    space = space_for(task, target, space)
    if log:
        check_record_file(log)
    own_evaluator = evaluator is None or isinstance(evaluator, str)
    if ray not in (None, False) and not own_evaluator:
        raise ExplorationError("ray= measures with the target's own evaluator on each node: give it an "
                               "evaluator name, not an Evaluator (or pass an explore.ray_evaluator.RayEvaluator)")
    if own_evaluator and ray not in (None, False):
        from .ray_evaluator import RayEvaluator

        evaluator = RayEvaluator(target, ray, evaluator, **(evaluator_options or {}))
    elif own_evaluator:
        evaluator = evaluator_for(target, evaluator, **(evaluator_options or {}))
    with contextlib.ExitStack() as cleanup:   # what this run opened is closed however it ends
        if own_evaluator:
            cleanup.callback(evaluator.close)
        # Every refusal comes before the record file is written to.
        if hasattr(evaluator, "check"):
            evaluator.check(task)
        judged_by = getattr(evaluator, "judged_by", "measured")
        start_screen = _start_screen(target, judged_by, start_pool) if start_pool else None
        if start_screen is not None:
            cleanup.callback(start_screen.close)
        logger.debug("tuning %s on %s: %s space of %d points, method %s, evaluator %s", task, target.name,
                     space.name, space.size, method, getattr(evaluator, "name", type(evaluator).__name__))
        history, report = History(space.info.flops, space.info.compulsory_bytes), None
        if resume:
            history, report = resume_history(log, task, target, space, judged_by)
            _check_resumable(report, task)
        start_points = (_transferred(transfer_from, space, task, target, starts, judged_by,
                                     more=(TRANSFERRED_PER_START - 1) * starts) if transfer_from else ())
        shared = None
        if log:
            shared = SharedRecords(log, task, target, space, judged_by,
                                   lambda entry: record_line(task, target, entry, method, seed, space, judged_by))
            cleanup.callback(shared.close)

        def on_entry(entry):
            if progress:
                progress(history)

        screen = None
        if cost_model is not None:
            from .guided import DEFAULT_RATIO, ModelScreen

            screen = ModelScreen(cost_model, task, space, target, screen_ratio or DEFAULT_RATIO, seed=seed)
        search = Search(task, space, evaluator, method, seed=seed, starts=starts, gamma=gamma,
                        early_stopping=early_stopping, min_improvement=min_improvement, on_entry=on_entry,
                        shared=shared, screen=screen, start_screen=start_screen, start_pool=start_pool,
                        start_points=start_points, **method_options)
        outcome = search.run(trials, history)

    history = outcome.history
    best = history.best
    if best is None:  # only possible when every resumed point failed and the budget was spent
        raise ExplorationError(f"no point of {task} succeeded in {len(history)} trials")
    kernel, retimed, seconds = None, (), best.seconds
    if finalists > 0 and judged_by == "measured" and _has_back_end(target):
        from .finalists import fastest_entries, retime

        outcome_of_retime = retime(task, target, fastest_entries(history, finalists))
        retimed, kernel = outcome_of_retime.finalists, outcome_of_retime.kernel
        best, seconds = history.entry_for_key(outcome_of_retime.best.schedule_json), outcome_of_retime.best.seconds
    schedule = space.schedule(best.point)
    if kernel is None and build_kernel and _has_back_end(target):
        from codegen.isolated_build import build_isolated

        kernel = build_isolated(task, schedule, target)  # its limits protect this process from the compiler
    return TuneResult(task, target, method, space.config(best.point), schedule, seconds,
                      space.info.flops / seconds / 1e9 if retimed else best.gflops,
                      kernel, history, len(history), len(history) - outcome.resumed - outcome.reused,
                      outcome.stop_reason, outcome.reused, report, space, retimed, seed, judged_by,
                      screen.screened_out if screen else 0, screen.model if screen else None, outcome.priced,
                      outcome.transferred)


def _transferred(path, space, task, target, count, judged_by, more=0):
    """Points of `space` carried over from the record file's other tasks (none from a missing file)."""
    if not os.path.exists(path):
        return ()
    check_record_file(path)
    return tuple(transferred_points(space, load_records(path), task, target, count, judged_by, more))


def _start_screen(target, judged_by, start_pool):
    """The target kind's static model, one worker per core, to rank start_pool random starts."""
    if start_pool < 0:
        raise ExplorationError(f"start_pool must be 0 or more, got {start_pool}")
    if judged_by != "measured":
        raise ExplorationError("start_pool ranks random starts with the target's static model before they are "
                               "measured; this search's evaluator is a model already, so there is nothing to screen")
    if "model" not in plugins.evaluator_names(target.kind):
        raise ExplorationError(f"start_pool needs a static model of {target.kind} targets, and none is registered")
    return evaluator_for(target, "model", workers=host_cores())
