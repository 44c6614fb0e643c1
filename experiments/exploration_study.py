"""Exploration study (the paper's Figures 6d and 7): best GFLOPS against trials and wall time
for the Q-method, the P-method and random search, several seeds per case, on this CPU.

Run (hours on a quiet machine; every candidate is built, checked and timed):
  .venv/bin/python experiments/exploration_study.py --cases GMM C2 C6 C13 --seeds 0 1 2 --trials 200 \\
      --out experiments/results/exploration_study.json
  .venv/bin/python experiments/exploration_report.py experiments/results/exploration_study.json

Each run writes its points to a record file beside --out (records/CASE-METHOD-SEED.jsonl); a
killed study run again with the same arguments resumes every run from its records (points
already measured are not measured again) and skips runs that are complete. The JSON keeps, per
case, method and seed, one row per trial: (trial, wall seconds since the run started, best
GFLOPS so far).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # cpu_benchmark's case list

from cpu_benchmark import cases as benchmark_cases  # noqa: E402

from codegen.evaluators import CpuEvaluator  # noqa: E402
from explore.optimize import optimize  # noqa: E402
from flexsched.registry import get_task  # noqa: E402

METHODS = ("q", "p", "random")


def study_cases():
    """{name: task}: the CPU benchmark's GMM 1024^3 and YOLO layers, plus GMM256 for smoke runs."""
    result = {name: task for name, (task, _) in benchmark_cases().items()}
    result["GMM256"] = get_task("GMM", 256, 256, 256)
    return result


def warm_up_worker(task, evaluator):
    from analysis import analyze
    from space import generate

    space = generate(analyze(task), "llvm")
    evaluator.evaluate(task, space, [space.random_point(12345)])


def run_one(task, method, seed, args, log, evaluator):
    result = optimize(task, "llvm", trials=args.trials, method=method, seed=seed, log=str(log), resume=True,
                      evaluator=evaluator, starts=args.starts, build_kernel=False)
    return {"task": str(task), "method": method, "seed": seed, "trials": result.trials,
            "ok": result.history.num_ok, "best_gflops": result.gflops, "best_seconds": result.seconds,
            "config": result.config.to_dict(), "stop_reason": result.stop_reason,
            "curve": [list(point) for point in result.history.best_curve()]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=["GMM", "C2", "C6", "C13"],
                        help="GMM, C1..C15 (the CPU benchmark's cases) or GMM256 (default: GMM C2 C6 C13)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--starts", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--slow-run", type=float, default=0.5,
                        help="candidates slower than this per run are timed once (they cannot win)")
    parser.add_argument("--out", default="experiments/results/exploration_study.json")
    args = parser.parse_args()
    available = study_cases()
    unknown = [name for name in args.cases if name not in available]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(available)}")
    out = Path(args.out)
    records = out.parent / "records"
    records.mkdir(parents=True, exist_ok=True)
    runs = []
    with CpuEvaluator(timeout_s=args.timeout, warmup=1, repeats=3, min_run_seconds=0.02,
                      slow_run_seconds=args.slow_run) as evaluator:
        for case in args.cases:
            # Start the worker and cache the task's reference outputs before any run's clock
            # starts, so the first method of a case does not pay for them.
            warm_up_worker(available[case], evaluator)
            for method in args.methods:
                for seed in args.seeds:
                    log = records / f"{out.stem}-{case}-{method}-{seed}.jsonl"
                    run = run_one(available[case], method, seed, args, log, evaluator)
                    run["case"] = case
                    runs.append(run)
                    out.write_text(json.dumps({"settings": vars(args), "runs": runs}, indent=1))  # after every run
                    print(f"{case:6} {method:6} seed {seed}: {run['best_gflops']:8.2f} GFLOPS after "
                          f"{run['trials']} trials ({run['ok']} ok), {run['curve'][-1][1]:.0f} s", flush=True)


if __name__ == "__main__":
    main()
