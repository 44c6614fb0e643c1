"""Rank quality of the learned cost models: Kendall's tau against measured times on held-out candidates.

Run:  .venv/bin/python experiments/cost_model_rank.py --out experiments/results/cost_model_rank.json

Data: every measured record of the record files given (by default the CPU operator and template sweeps'
records under experiments/results/, measured on this project's 2-core CPU machines).
- within a task: each task's candidates split 70/30 at random (per seed); a model is trained on the
  70% of that task together with every other task's candidates, and ranks the held-out 30%;
- an unseen operator: the graph model trained on every other operator's candidates ranks all the
  candidates of the held-out operator (the generalisation test of the TPU cost-model paper).
Each is reported for the pairwise rank loss and for the squared error on relative speed.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import statistics
import time
from pathlib import Path

import numpy as np

from explore.cost_model import make_model, samples_from_records
from flexsched.stats import kendall_tau

DEFAULT_RECORDS = ["experiments/results/sweep_cpu_operators_records/*.jsonl",
                   "experiments/results/sweep_templates_records/*.jsonl"]
VARIANTS = {("xgb", "rank"): {"objective": "rank:pairwise"}, ("xgb", "mse"): {"objective": "reg:squarederror"},
            ("gnn", "rank"): {"loss": "rank"}, ("gnn", "mse"): {"loss": "mse"}}


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
    parser.add_argument("--out", default="experiments/results/cost_model_rank.json")
    args = parser.parse_args()
    files = sorted(f for pattern in args.records for f in glob.glob(pattern))
    start = time.perf_counter()
    samples, skipped = samples_from_records(files)
    print(f"{len(samples)} candidates of {len({s.group for s in samples})} tasks from {len(files)} files "
          f"({skipped} skipped), features in {time.perf_counter() - start:.0f} s", flush=True)
    result = {"files": files, "candidates": len(samples), "within_task": {}, "unseen_operator": {}}
    for text in args.variants:
        variant = tuple(text.split("/"))
        taus = within_task(samples, variant, args.seeds)
        result["within_task"][text] = {"median": statistics.median(taus.values()), "tasks": taus}
        if variant[0] == "gnn":
            unseen = unseen_operator(samples, variant[1])
            result["unseen_operator"][text] = {"median": statistics.median(unseen.values()), "operators": unseen}
        Path(args.out).write_text(json.dumps(result, indent=1))
    for kind in ("within_task", "unseen_operator"):
        for text, found in result[kind].items():
            print(f"{kind} {text}: median Kendall tau {found['median']:.3f}")


if __name__ == "__main__":
    main()
