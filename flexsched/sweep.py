"""Running a sweep: every case x target x tuning contender x seed as a resumable tuning job, then each
case's contenders' best kernels and the library call timed side by side in alternating rounds.

Each job logs to its own record file and runs with resume, so a killed sweep resumes: a job whose file
already holds its trials is not searched again (its best is rebuilt from the records), a half-done one
continues from its records. The results file is rewritten after every case.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass

from .errors import FlexschedError
from .sweep_spec import LIBRARY


class _OutOfTime(Exception):
    """Raised from the progress callback when a job's share of the case's time budget is spent."""


@dataclass(frozen=True)
class Candidate:
    """A recorded point as the re-timing phase sees it."""

    schedule_key: str
    seconds: float


@dataclass(frozen=True)
class JobOutcome:
    """One tuning job's result, read back from its record file."""

    contender: str
    seed: int
    trials: int
    seconds: float            # its best: re-timed when finalists were re-timed, else the search's
    search_seconds: float     # the search's own best time
    tuning_seconds: float     # the search's wall time, resumed sessions included
    curve: list               # [(trial, elapsed seconds, best GFLOPS so far)]
    kernel: object
    stop: str                 # "trials", "resumed" (nothing left to search), "time budget", or the search's reason

    def to_dict(self, flops):
        return {"seed": self.seed, "trials": self.trials, "best_seconds": self.seconds,
                "gflops": flops / self.seconds / 1e9, "search_best_seconds": self.search_seconds,
                "tuning_seconds": self.tuning_seconds, "stop": self.stop,
                "curve": [{"trial": t, "elapsed": e, "best_gflops": g} for t, e, g in self.curve]}


def job_file(records_dir, case, target, contender, seed):
    """The record file of one job (names made safe for any file system)."""
    text = f"{case.name}-{target}-{contender}-seed{seed}"
    return records_dir / ("".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text) + ".jsonl")


def space_name(contender):
    return "generated" if contender in ("q", "p", "random") else contender


def method_of(contender, spec):
    return contender if contender in ("q", "p", "random") else spec.template_method


def job_records(path, task, target):
    """The records of this task and target in a job's file, in trial order."""
    from explore.records import load_records

    if not path.exists():
        return []
    return sorted((r for r in load_records(path) if r.matches(task, target)), key=lambda r: r.data["trial"])


def tune_job(task, target, trials, method, space, seed, path, budget_s, report, cost_model=None, screen_ratio=None):
    """Search one job into its record file, resuming from it; the stop reason ("resumed" if the file
    already holds its trials, "time budget" if budget_s ran out, else the search's)."""
    from explore.optimize import optimize

    if len(job_records(path, task, target)) >= trials:
        return "resumed"
    started = time.monotonic()

    def progress(history):
        report(history)
        if budget_s is not None and time.monotonic() - started > budget_s:
            raise _OutOfTime()
    try:
        return optimize(task, target, trials=trials, method=method, log=str(path), resume=True, seed=seed,
                        space=space, build_kernel=False, progress=progress, cost_model=cost_model,
                        screen_ratio=screen_ratio).stop_reason
    except _OutOfTime:
        return "time budget"


def run_job(spec, case, task, target, contender, seed, path, budget_s, report, stop=None):
    """JobOutcome of one tuning job: searched (resumed from its file) unless its file holds its trials,
    or `stop` says it was searched elsewhere (on a cluster) and why it stopped."""
    from explore.finalists import retime
    from explore.optimize import build_best

    if stop is None:
        stop = tune_job(task, target, spec.trials, method_of(contender, spec), space_name(contender), seed, path,
                        budget_s, report, spec.cost_model, spec.screen_ratio)
    records = job_records(path, task, target)
    good = sorted((r for r in records if r.ok and r.schedule is not None), key=lambda r: r.seconds)
    if not good:
        raise FlexschedError(f"{case.name} {contender} seed {seed}: no successful record in {path}")
    curve, best = [], 0.0
    for record in records:
        best = max(best, record.gflops)
        curve.append((record.data["trial"] + 1, float(record.data.get("elapsed") or 0.0), best))
    if spec.finalists > 0:
        finalists = retime(task, target, [Candidate(r.schedule.to_json(), r.seconds) for r in good[:spec.finalists]])
        seconds, kernel = finalists.best.seconds, finalists.kernel
    else:
        seconds, kernel = good[0].seconds, build_best(path, task, target)
    return JobOutcome(contender, seed, len(records), seconds, good[0].seconds, curve[-1][1], curve, kernel, stop)


class Progress:
    """One line on stderr per event: case k of n, contender, best so far, elapsed, remaining estimate."""

    def __init__(self, total_jobs, stream=None):
        self.total = max(1, total_jobs)
        self.finished = 0
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.where = ""
        self._last = 0.0

    def remaining(self):
        elapsed = time.monotonic() - self.started
        return elapsed / self.finished * (self.total - self.finished) if self.finished else math.nan

    def line(self, text):
        elapsed = time.monotonic() - self.started
        left = self.remaining()
        left_text = "?" if math.isnan(left) else _clock(left)
        self.stream.write(f"sweep: {self.where}: {text}  elapsed {_clock(elapsed)}, about {left_text} left\n")
        self.stream.flush()

    def history(self, history):
        if time.monotonic() - self._last >= 5.0:  # a line every few seconds, not one per trial
            self._last = time.monotonic()
            self.line(f"{len(history)} trials, best {history.best_gflops:.2f} GFLOPS")


def _clock(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@dataclass(frozen=True)
class Job:
    """One tuning job of a sweep as a cluster runs it: where it is in the sweep, and what it searches."""

    where: str      # "case 1 of 2 (GMM64 on llvm), q seed 0"
    task: object
    target: object
    method: str
    space: str
    seed: int
    path: object    # its record file (a Path)


def planned_jobs(spec):
    """Every tuning job of the sweep, in the order run_sweep runs them (contenders without a space left out)."""
    from analysis import analyze
    from explore.optimize import space_for
    from flexsched.target import get_target

    jobs = []
    for number, case in enumerate(spec.cases, 1):
        task = case.task()
        info = analyze(task)
        for target_name in spec.targets:
            target = get_target(target_name)
            for contender in spec.tuners:
                try:
                    space_for(task, target, space_name(contender), info)
                except FlexschedError:
                    continue   # run_sweep marks it skipped
                jobs += [Job(f"case {number} of {len(spec.cases)} ({case.name} on {target.name}), {contender} seed "
                             f"{seed}", task, target, method_of(contender, spec), space_name(contender), seed,
                             job_file(spec.records, case, target.name, contender, seed)) for seed in spec.seeds]
    return jobs


def run_sweep(spec, stream=None, cluster=None):
    """Run every job of a SweepSpec and write its results file; returns the results (a dict).

    With cluster (an explore.ray_cluster.Cluster), every job's search runs first, as a task on that Ray
    cluster (flexsched.sweep_ray); then this process, alone, re-times the finalists and times the
    contenders side by side, as without one."""
    from analysis import analyze
    from explore.finalists import kernel_timed
    from explore.optimize import space_for
    from explore.side_by_side import Timed, time_side_by_side
    from flexsched.target import get_target

    from .library import checked_library

    spec.records.mkdir(parents=True, exist_ok=True)
    spec.results.parent.mkdir(parents=True, exist_ok=True)
    searched = {}   # record file -> why its search stopped, for jobs searched on the cluster
    if cluster is not None:
        from .sweep_ray import search_on_cluster

        searched = search_on_cluster(spec, planned_jobs(spec), cluster, stream)
    jobs_per_case = len(spec.tuners) * len(spec.seeds)
    progress = Progress(len(spec.cases) * len(spec.targets) * jobs_per_case, stream)
    results = {"sweep": spec.name, "trials": spec.trials, "seeds": list(spec.seeds), "finalists": spec.finalists,
               "rounds": spec.rounds, "ratio": "library seconds / contender seconds (above 1: faster than the library)",
               "cases": []}
    for number, case in enumerate(spec.cases, 1):
        task = case.task()
        info = analyze(task)
        for target_name in spec.targets:
            target = get_target(target_name)
            row = {"case": case.name, "task": str(task), "target": target.name, "flops": info.flops,
                   "bytes": info.compulsory_bytes, "contenders": {}}
            timed, budget = [], None
            if spec.time_budget_s is not None:
                budget = spec.time_budget_s / max(1, jobs_per_case)
            inputs = task.random_inputs(seed=1)
            reference = task.evaluate(*inputs)  # once per case: the reference evaluator is slow on big layers
            for contender in spec.contenders:
                entry = row["contenders"].setdefault(contender, {})
                if contender == LIBRARY:
                    call = checked_library(task, target, inputs, reference)
                    if call is None:
                        entry["skipped"] = f"no library call for {case.op}"
                    else:
                        entry["call"] = call.name
                        timed.append(Timed(LIBRARY, call.call, call.time_runs))
                    continue
                try:
                    space = space_for(task, target, space_name(contender), info)
                except FlexschedError as err:
                    entry["skipped"] = f"no template for {case.op}: {err}" if contender.startswith("template") \
                        else str(err)
                    progress.finished += len(spec.seeds)
                    continue
                entry.update({"space": space.name, "space_size": space.size,
                              "method": method_of(contender, spec), "seeds": []})
                outcomes = []
                for seed in spec.seeds:
                    progress.where = (f"case {number} of {len(spec.cases)} ({case.name} on {target.name}), "
                                      f"{contender} seed {seed}")
                    path = job_file(spec.records, case, target.name, contender, seed)
                    outcome = run_job(spec, case, task, target, contender, seed, path, budget, progress.history,
                                      searched.get(path))
                    progress.finished += 1
                    progress.line(f"done, {outcome.trials} trials ({outcome.stop}), best "
                                  f"{info.flops / outcome.seconds / 1e9:.2f} GFLOPS")
                    outcomes.append(outcome)
                    entry["seeds"].append({**outcome.to_dict(info.flops), "records": str(path)})
                best = min(outcomes, key=lambda o: o.seconds)
                entry.update({"trials": sum(o.trials for o in outcomes),
                              "tuning_seconds": sum(o.tuning_seconds for o in outcomes), "best_seed": best.seed})
                arrays = best.kernel.arguments(inputs)
                timed.append(kernel_timed(contender, best.kernel, arrays))
            if timed:
                progress.where = f"case {number} of {len(spec.cases)} ({case.name} on {target.name})"
                progress.line(f"timing {', '.join(t.name for t in timed)} side by side, {spec.rounds} rounds")
                side = time_side_by_side(timed, spec.rounds)
                row["side_by_side"] = {"names": list(side.names), "rounds": [list(r) for r in side.rounds]}
                for name in side.names:
                    entry = row["contenders"][name]
                    entry["best_seconds"] = side.seconds(name)
                    entry["gflops"] = info.flops / side.seconds(name) / 1e9
                    entry["gbps"] = info.compulsory_bytes / side.seconds(name) / 1e9
                    if LIBRARY in side.names:
                        median, low, high = side.ratio(name, LIBRARY)
                        entry["ratio_to_library"] = {"median": median, "min": low, "max": high}
            results["cases"].append(row)
            spec.results.write_text(json.dumps(results, indent=1))  # kept after every case
    return results
