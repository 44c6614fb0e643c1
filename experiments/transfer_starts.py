"""How fast the starts carried over to each layer are: the first N points the transfer moves from
the layers tuned before it, against the N more it adds, built, checked and timed side by side.

Run:  .venv/bin/python experiments/transfer_starts.py R.jsonl --out experiments/results/transfer_starts.json

R is a whole benchmark run's record file (cpu_benchmark.py --records R --transfer). For each case,
the layers tuned before it are those whose first record comes earlier in the file, as they were
when its search began. Its moved points come as explore.transfer.transferred_points gives them
with count N and more N: the first N the best of each kind of kernel, the rest the fastest others
of the broad kinds those cover; `--any-kind` takes the rest from every kind instead, as the first
N's order continues. Each point is checked against the
reference evaluator (a wrong one is reported and left out) and all of a case's are timed in
alternating rounds (explore.side_by_side). Run it with the target the records were made with
(FLEXSCHED_LLVM_TARGET for AVX2 code).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from analysis import analyze
from codegen.kernel import build
from explore.finalists import checked, kernel_timed
from explore.records import load_records
from explore.side_by_side import time_side_by_side
from explore.transfer import transferred_points
from flexsched.target import get_target
from space import generate

from cpu_benchmark import cases, cpu_description


def task_key(task_ref):
    return json.dumps([task_ref["name"], task_ref["args"]])


def moved_gflops(task, points, space, rounds):
    """{point: GFLOPS} of the points whose kernels match the reference, timed side by side."""
    inputs = task.random_inputs(seed=1)
    reference = task.evaluate(*inputs)
    timed, kept = [], []
    for point in points:
        try:
            kernel, arrays = checked(build(task, space.schedule(point)), inputs, reference)
        except ValueError as mismatch:   # a fast wrong kernel is no result
            print(f"  point {point}: WRONG, left out: {mismatch}", flush=True)
            continue
        timed.append(kernel_timed(str(len(kept)), kernel, arrays))
        kept.append(point)
    if not timed:
        return {}
    side = time_side_by_side(timed, rounds)
    flops = analyze(task).flops
    return {point: flops / side.seconds(str(index)) / 1e9 for index, point in enumerate(kept)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", help="a whole benchmark run's record file")
    parser.add_argument("--starts", type=int, default=4, help="N: the starts a search carries over now")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--any-kind", action="store_true",
                        help="the N more in the transfer's order, of any kind, not only the first N's broad kinds")
    parser.add_argument("--out", help="write the figures to this JSON file")
    args = parser.parse_args()
    os.environ.setdefault("FLEXSCHED_KERNEL_CACHE", "off")
    target = get_target("llvm")
    records = load_records(args.records)
    order = list(dict.fromkeys(task_key(record.task_ref) for record in records))
    by_key = {task_key({"name": task.name, "args": list(task.args)}): (name, task) for name, task in cases().items()}
    rows = []
    print(f"{args.records} on {cpu_description()}: the first {args.starts} moved points against {args.starts} more"
          + (" of any kind" if args.any_kind else ""))
    for position, key in enumerate(order[1:], 1):
        if key not in by_key:
            continue
        name, task = by_key[key]
        earlier = set(order[:position])
        space = generate(analyze(task), target)
        earlier_records = [r for r in records if task_key(r.task_ref) in earlier]
        points = (transferred_points(space, earlier_records, task, target, 2 * args.starts) if args.any_kind else
                  transferred_points(space, earlier_records, task, target, args.starts, more=args.starts))
        gflops = moved_gflops(task, points, space, args.rounds)
        first = [gflops.get(point, 0.0) for point in points[:args.starts]]
        rest = [gflops.get(point, 0.0) for point in points[args.starts:]]
        rows.append({"case": name, "first": first, "more": rest})
        best_first, best_next = max(first, default=0.0), max(rest, default=0.0)
        gain = f"{best_next / best_first:.2f}" if best_first else "-"
        print(f"{name:4} first {[round(g) for g in first]} more {[round(g) for g in rest]}: "
              f"best of the more over best of the first {gain}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"records": args.records, "cpu": cpu_description(),
                                              "starts": args.starts, "rounds": args.rounds, "cases": rows}, indent=1))


if __name__ == "__main__":
    main()
