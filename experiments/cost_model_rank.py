"""Rank quality of the learned cost models: Kendall's tau against measured times on held-out candidates.

Run:  .venv/bin/python experiments/cost_model_rank.py --out experiments/results/cost_model_rank.json

Data: every measured record of the record files given (by default the CPU operator and template sweeps'
records under experiments/results/, measured on this project's 2-core CPU machines).
- within a task: each task's candidates split 70/30 at random (per seed); a model is trained on the
  70% of that task together with every other task's candidates, and ranks the held-out 30%;
- an unseen operator: the graph model trained on every other operator's candidates ranks all the
  candidates of the held-out operator (the generalisation test of the TPU cost-model paper).
Each is reported for the pairwise rank loss and for the squared error on relative speed. A candidate
recorded more than once counts once, at its fastest time.

Search records cluster near good schedules and were timed while the machine's speed changed, so part
of their order is noise. A second data set measures uniformly random candidates of GMM 1024^3 and the
YOLO layers of experiments/cpu_benchmark.py on a quiet machine (--measure, once; the records go to
experiments/results/cost_model_records/), each candidate twice in passes minutes apart: a candidate is
one sample at its faster time, and the two passes' agreement is the ceiling noise puts on any tau:

      .venv/bin/python experiments/cost_model_rank.py --measure GMM C2 C6 C9 C13 --measure-trials 120 \
          --records "experiments/results/cost_model_records/*.jsonl" --seeds 0 1 2 --studies within \
          --out experiments/results/cost_model_rank_random.json
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from codegen.evaluators import CpuEvaluator
from explore.cost_model import make_model, samples_from_records
from explore.optimize import optimize
from explore.records import load_records
from flexsched.registry import task_from_ref
from flexsched.stats import kendall_tau

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_benchmark import cases as benchmark_cases, cpu_description  # noqa: E402  (GMM 1024^3, YOLO layers)

DEFAULT_RECORDS = ["experiments/results/sweep_cpu_operators_records/*.jsonl",
                   "experiments/results/sweep_templates_records/*.jsonl"]
RANDOM_RECORDS = Path("experiments/results/cost_model_records")
# A random candidate can be slow: its checked run alone tells it from a good one. Every candidate
# under 0.5 s is timed in full, not cut at a multiple of the best so far: ranks are the measure here.
MEASURE_SETTINGS = dict(timeout_s=60.0, warmup=1, repeats=3, min_run_seconds=0.02, slow_run_seconds=0.5,
                        slow_factor=math.inf)
VARIANTS = {("xgb", "rank"): {"objective": "rank:pairwise"}, ("xgb", "mse"): {"objective": "reg:squarederror"},
            ("gnn", "rank"): {"loss": "rank"}, ("gnn", "mse"): {"loss": "mse"}}


def measure_random(names, trials, seed, passes):
    """Uniformly random candidates of the named benchmark cases, measured into RANDOM_RECORDS, each
    candidate `passes` times in passes minutes apart (the same seed draws the same points); a record file
    that exists is not measured again."""
    RANDOM_RECORDS.mkdir(parents=True, exist_ok=True)
    tasks = benchmark_cases()
    for number in range(1, passes + 1):
        for name in names:
            path = RANDOM_RECORDS / (f"{name}-random-seed{seed}.jsonl" if number == 1 else
                                     f"{name}-random-seed{seed}-pass{number}.jsonl")
            if path.exists():
                continue
            started = time.perf_counter()
            partial = path.with_suffix(".partial")   # a stopped run leaves no half data set behind
            partial.unlink(missing_ok=True)
            with CpuEvaluator(**MEASURE_SETTINGS) as evaluator:
                result = optimize(tasks[name], "llvm", trials=trials, method="random", seed=seed, log=str(partial),
                                  evaluator=evaluator, build_kernel=False)
            partial.rename(path)
            print(f"measured {name} (pass {number}): {result.history.num_ok}/{result.trials} ok in "
                  f"{time.perf_counter() - started:.0f} s", flush=True)


def self_agreement(files):
    """{task: Kendall's tau between two measurements of the same candidates}, for the tasks some
    candidates of which the files measured more than once: the ceiling noise puts on any model's tau."""
    times = {}
    for path in files:
        for record in load_records(path):
            if record.ok and record.schedule is not None:
                key = (json.dumps(record.task_ref, sort_keys=True), record.schedule.to_json())
                times.setdefault(key, []).append(record.seconds)
    pairs = {}
    for (task_ref, _), seconds in times.items():
        if len(seconds) >= 2:
            pairs.setdefault(task_ref, []).append(seconds[:2])
    agreement = {str(task_from_ref(json.loads(task_ref))): kendall_tau([a for a, _ in both], [b for _, b in both])
                 for task_ref, both in pairs.items() if len(both) > 1}
    return dict(sorted(agreement.items()))


def tau(model, samples):
    ok = [s for s in samples if math.isfinite(s.seconds)]
    return kendall_tau(model.scores([s.features for s in ok]), [-s.seconds for s in ok])


def within_task(samples, variant, seeds):
    name, loss = variant
    by_group = {}
    for sample in samples:
        by_group.setdefault(sample.group, []).append(sample)
    taus = {}
    for group, members in sorted(by_group.items()):
        values = []
        for seed in seeds:
            order = np.random.default_rng(seed).permutation(len(members))
            cut = int(0.7 * len(members))
            train = [members[i] for i in order[:cut]] + [s for s in samples if s.group != group]
            model = make_model(name, seed=seed, **VARIANTS[variant])
            model.fit(train)
            values.append(tau(model, [members[i] for i in order[cut:]]))
        taus[group] = statistics.median(values)
        print(f"within {name}/{loss} {group}: {taus[group]:.3f}", flush=True)
    return taus


def unseen_operator(samples, loss):
    operators = sorted({s.group.split("(")[0] for s in samples})
    taus = {}
    for operator in operators:
        held = [s for s in samples if s.group.split("(")[0] == operator]
        model = make_model("gnn", **VARIANTS[("gnn", loss)])
        model.fit([s for s in samples if s.group.split("(")[0] != operator])
        per_task = {}
        for sample in held:
            per_task.setdefault(sample.group, []).append(sample)
        taus[operator] = statistics.median(tau(model, members) for members in per_task.values())
        print(f"unseen gnn/{loss} {operator}: {taus[operator]:.3f}", flush=True)
    return taus


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", nargs="+", default=DEFAULT_RECORDS, help="record files (globs)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--variants", nargs="+", default=["xgb/rank", "xgb/mse", "gnn/rank", "gnn/mse"])
    parser.add_argument("--studies", nargs="+", default=["within", "unseen"], choices=["within", "unseen"],
                        help="within a task, and the graph model on an unseen operator")
    parser.add_argument("--measure", nargs="*", default=[], help="benchmark cases to measure random candidates of")
    parser.add_argument("--measure-trials", type=int, default=120)
    parser.add_argument("--measure-passes", type=int, default=2, help="measurements of each random candidate")
    parser.add_argument("--out", default="experiments/results/cost_model_rank.json")
    args = parser.parse_args()
    if args.measure:
        measure_random(args.measure, args.measure_trials, seed=0, passes=args.measure_passes)
    files = sorted(f for pattern in args.records for f in glob.glob(pattern))
    start = time.perf_counter()
    samples, skipped = samples_from_records(files)
    print(f"{len(samples)} candidates of {len({s.group for s in samples})} tasks from {len(files)} files "
          f"({skipped} skipped), features in {time.perf_counter() - start:.0f} s", flush=True)
    agreement = self_agreement(files)
    for task, value in agreement.items():
        print(f"measurement against itself {task}: {value:.3f}", flush=True)
    result = {"cpu": cpu_description(), "files": files, "candidates": len(samples), "measurement_self_agreement": agreement,
              "within_task": {}, "unseen_operator": {}}
    for text in args.variants:
        variant = tuple(text.split("/"))
        if "within" in args.studies:
            taus = within_task(samples, variant, args.seeds)
            result["within_task"][text] = {"median": statistics.median(taus.values()), "tasks": taus}
        if variant[0] == "gnn" and "unseen" in args.studies:
            unseen = unseen_operator(samples, variant[1])
            result["unseen_operator"][text] = {"median": statistics.median(unseen.values()), "operators": unseen}
        Path(args.out).write_text(json.dumps(result, indent=1))
    for kind in ("within_task", "unseen_operator"):
        for text, found in result[kind].items():
            print(f"{kind} {text}: median Kendall tau {found['median']:.3f}")


if __name__ == "__main__":
    main()
