"""Rank correlation of the static CPU model (codegen.cpu_model) with measured times.

Run:  .venv/bin/python experiments/cpu_model_rank.py                       # every case below
      .venv/bin/python experiments/cpu_model_rank.py --cases GMM1024 C9 --per-case 40
      .venv/bin/python experiments/cpu_model_rank.py --measure-trials 30   # measure the YOLO layers first
      .venv/bin/python experiments/cpu_model_rank.py --benchmark-records R.jsonl --cases C2 C9

Each case is a set of measured candidates of one operator on this CPU: the records of earlier
searches (experiments/results/sweep_cpu_operators_records and sweep_templates_records, 100-trial
Q and template searches; --records points elsewhere), and for the YOLO layers C2, C6, C9 and C13
of experiments/cpu_benchmark.py a random search this script measures when their record file is
missing (experiments/results/cpu_model_rank_records). Every successful candidate that replays
(its record keeps the schedule it measured) is priced by the model's evaluator, as
`flexsched tune --evaluator model` prices it (compiled to assembly in a worker, nothing run);
per case the script reports Kendall's tau between predicted and measured seconds, and the regret
of trusting the model: the measured time of the candidate the model ranks first over the best
measured one. With --benchmark-records, the cases are experiments/cpu_benchmark.py's (GMM, C1-C15)
and their candidates the records of that benchmark's searches. The records must come from this
kind of CPU: their target's cores and vector lanes must be the host's (with AVX2 code, the same
FLEXSCHED_LLVM_TARGET as the searches).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

from codegen.evaluators import CpuEvaluator, CpuModelEvaluator
from explore.optimize import optimize
from explore.records import load_records
from flexsched.registry import get_task, task_from_ref
from flexsched.stats import kendall_tau
from flexsched.target import get_target

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
SWEEPS = ("sweep_cpu_operators_records", "sweep_templates_records")
MEASURED = RESULTS / "cpu_model_rank_records"
# YOLO layers of experiments/cpu_benchmark.py (C, K, size, kernel, stride), measured by this script.
YOLO = {"C2": (64, 192, 112, 3, 1), "C6": (256, 512, 56, 3, 1), "C9": (512, 512, 28, 1, 1),
        "C13": (1024, 1024, 14, 3, 1)}
# Operators of the sweeps' record files (the file names' case names), besides the YOLO layers.
SWEEP_CASES = ("GMM1024", "GMM512", "GMV1024", "BIL3", "C1D4", "T1D1", "C2D-C8", "C3D3", "T2D3", "GRP3", "DEP5",
               "DIL2")


def yolo_task(name):
    channels, kernels, size, kernel, stride = YOLO[name]
    return get_task("C2D", 1, channels, size, size, kernels, kernel, stride, kernel // 2)


def measure_yolo(names, trials, seed):
    """A random search of trials points per YOLO layer, logged to MEASURED/<name>-random.jsonl."""
    MEASURED.mkdir(parents=True, exist_ok=True)
    # Every candidate under 0.5 s timed in full, none cut at a multiple of the best so far: ranks are the measure.
    settings = dict(timeout_s=60.0, warmup=1, repeats=3, min_run_seconds=0.02, slow_run_seconds=0.5,
                    slow_factor=math.inf)
    with CpuEvaluator(**settings) as evaluator:
        for name in names:
            path = MEASURED / f"{name}-random.jsonl"
            if path.exists():
                continue
            started = time.perf_counter()
            result = optimize(yolo_task(name), "llvm", trials=trials, method="random", seed=seed,
                              evaluator=evaluator, log=str(path), build_kernel=False)
            print(f"measured {name}: {result.history.num_ok}/{result.trials} ok in "
                  f"{time.perf_counter() - started:.0f} s", flush=True)


def candidates(paths, target, task=None):
    """(task, [(schedule JSON, measured seconds)]) of the ok records in paths that kept their schedule
    (only those of `task` where given)."""
    found = {}
    for path in paths:
        for record in load_records(path):
            if not record.ok or record.schedule is None or task is not None and not record.same_task(task):
                continue
            recorded = record.target
            if (recorded.get("cores"), recorded.get("vector_lanes")) != (target.cores, target.vector_lanes):
                sys.exit(f"{path}: recorded on {recorded.get('cores')} cores with {recorded.get('vector_lanes')} lanes, "
                         f"not this host's {target.cores} and {target.vector_lanes}")
            task = task or task_from_ref(record.task_ref)
            found.setdefault(record.schedule.to_json(), record.seconds)
    return task, list(found.items())


def case_files(name, record_dirs):
    if name in YOLO:
        return [MEASURED / f"{name}-random.jsonl"]
    return sorted(path for directory in record_dirs for path in Path(directory).glob(f"{name}-llvm-*.jsonl"))


def rank_case(name, paths, evaluator, per_case, seed, task=None):
    """The case's row: candidates priced, tau, regret, where the data came from."""
    task, measured = candidates(paths, evaluator.target, task)
    if len(measured) > per_case:
        measured = random.Random(seed).sample(measured, per_case)
    predicted, seconds, failures = [], [], 0
    started = time.perf_counter()
    for schedule, measured_seconds in measured:
        evaluation = evaluator.estimate(task, schedule)
        if not evaluation.ok:
            failures += 1
            continue
        predicted.append(evaluation.seconds)
        seconds.append(measured_seconds)
    elapsed = time.perf_counter() - started
    pick = min(range(len(predicted)), key=predicted.__getitem__) if predicted else None
    return {"case": name, "task": str(task), "sources": [str(Path(p).relative_to(ROOT)) if ROOT in Path(p).parents
                                                         else str(p) for p in paths],
            "candidates": len(predicted), "model_failures": failures,
            "tau": kendall_tau(predicted, seconds) if len(predicted) > 1 else None,
            "regret": seconds[pick] / min(seconds) if pick is not None else None,
            "model_seconds_per_candidate": elapsed / max(1, len(measured)),
            "predicted": predicted, "measured": seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="*", help=f"default: GMM1024, the YOLO layers {', '.join(YOLO)} and "
                                                   f"{', '.join(SWEEP_CASES[1:])}")
    parser.add_argument("--records", nargs="*", default=[str(RESULTS / name) for name in SWEEPS],
                        help="folders of sweep record files (<case>-llvm-<contender>-seed0.jsonl)")
    parser.add_argument("--benchmark-records", nargs="*", default=[],
                        help="record files of experiments/cpu_benchmark.py: rank its cases (--cases) on them instead")
    parser.add_argument("--per-case", type=int, default=60, help="candidates priced per case, drawn at random")
    parser.add_argument("--measure-trials", type=int, default=30,
                        help="random points measured per YOLO layer whose record file is missing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "cpu_model_rank.json"))
    args = parser.parse_args()
    if args.benchmark_records:
        rank_benchmark_cases(args)
        return
    names = args.cases or ["GMM1024", *YOLO, *SWEEP_CASES[1:]]
    missing = [name for name in names if name in YOLO and not (MEASURED / f"{name}-random.jsonl").exists()]
    if missing:
        measure_yolo(missing, args.measure_trials, args.seed)
    target = get_target("llvm")
    rows = []
    with CpuModelEvaluator(target) as evaluator:
        for name in names:
            paths = [p for p in case_files(name, args.records) if Path(p).exists()]
            if not paths:
                print(f"{name}: no record file, skipped")
                continue
            row = rank_case(name, paths, evaluator, args.per_case, args.seed)
            report(rows, row, target, args.out)
    summarise(rows)


def rank_benchmark_cases(args):
    """Rank the model on experiments/cpu_benchmark.py's cases from that benchmark's record files."""
    from cpu_benchmark import cases

    tasks = cases()
    names = args.cases or list(tasks)
    unknown = [name for name in names if name not in tasks]
    if unknown:
        sys.exit(f"--cases: {', '.join(unknown)} not among cpu_benchmark.py's cases ({', '.join(tasks)})")
    target = get_target("llvm")
    rows = []
    with CpuModelEvaluator(target) as evaluator:
        for name in names:
            row = rank_case(name, args.benchmark_records, evaluator, args.per_case, args.seed, tasks[name])
            if row["candidates"]:
                report(rows, row, target, args.out)
            else:
                print(f"{name}: no record of it priced, skipped")
    summarise(rows)


def report(rows, row, target, out):
    rows.append(row)
    Path(out).write_text(json.dumps({"cpu": target.device, "cases": rows}, indent=1))
    tau = "n/a" if row["tau"] is None else f"{row['tau']:+.2f}"
    print(f"{row['case']:8} tau {tau}  regret {row['regret']:.2f}  over {row['candidates']} candidates "
          f"({row['model_failures']} not priced), {row['model_seconds_per_candidate']:.2f} s each", flush=True)


def summarise(rows):
    taus = [row["tau"] for row in rows if row["tau"] is not None]
    if taus:
        print(f"median tau over {len(taus)} cases: {statistics.median(taus):+.2f}")


if __name__ == "__main__":
    main()
