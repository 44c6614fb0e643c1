"""Time hand-picked schedules of one benchmark case against PyTorch, side by side, without searching.

Run:  .venv/bin/python experiments/cpu_points.py experiments/points/c7_merged_tiles.json --rounds 9

The file names a case of cpu_benchmark.py and a few schedules (lists of steps, as a record or a
results file holds them). Each is built, checked against the reference evaluator (a wrong one is
reported and left out), then all are timed with the PyTorch call in alternating rounds
(explore.side_by_side): a question about the space ("does this kind of point pay?") answered by
measurement, apart from the search's luck in reaching it. An input or output a schedule takes
blocked at its interface (Layout(..., interface=True)) is passed blocked, so such a point times
the computation without that conversion.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

from analysis import analyze
from codegen.kernel import build
from codegen.measure import compare_outputs
from explore.finalists import kernel_timed
from explore.side_by_side import time_side_by_side
from flexsched.library import checked_library
from flexsched.schedule import Schedule

from cpu_benchmark import cases, cpu_description


def case_with_torch(name):
    """(task, its flops, inputs, reference outputs, the PyTorch call checked on them) of a benchmark case."""
    task = cases()[name]
    inputs = task.random_inputs(seed=1)
    reference = task.evaluate(*inputs)
    return task, analyze(task).flops, inputs, reference, checked_library(task, "llvm", inputs, reference)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("points", help="JSON: {\"case\": NAME, \"schedules\": {label: [step, ...]}}")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out", help="write the figures to this JSON file")
    args = parser.parse_args()
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    spec = json.loads(Path(args.points).read_text())
    task, flops, inputs, reference, library = case_with_torch(spec["case"])
    contestants, wrong = [library], {}
    for label, steps in spec["schedules"].items():
        kernel = build(task, Schedule.from_json(json.dumps(steps)))
        mismatch = compare_outputs([kernel.backend.to_host(out) for out in kernel.run(*inputs)], reference,
                                   [t.name for t in task.outputs])
        if mismatch:   # a fast wrong kernel is no result
            wrong[label] = mismatch
            print(f"{label}: WRONG, left out: {mismatch}", flush=True)
            continue
        contestants.append(kernel_timed(label, kernel, kernel.arguments(inputs)))
    side = time_side_by_side(contestants, args.rounds)
    rows = []
    print(f"{spec['case']} ({task}) on {cpu_description()}, {args.rounds} alternating rounds")
    for timed in contestants:
        seconds = side.seconds(timed.name)
        median, low, high = side.ratio(timed.name, library.name)
        rows.append({"label": timed.name, "gflops": flops / seconds / 1e9, "ratio_median": median,
                     "ratio_min": low, "ratio_max": high})
        print(f"  {timed.name:60} {flops / seconds / 1e9:7.1f} GFLOPS, vs torch {median:.2f} ({low:.2f}-{high:.2f})")
    if args.out:
        Path(args.out).write_text(json.dumps({"case": spec["case"], "cpu": cpu_description(), "rows": rows,
                                              "wrong": wrong}, indent=1))


if __name__ == "__main__":
    main()
