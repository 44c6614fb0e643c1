"""Time variants of a CPU benchmark's best schedule, its split factors edited by hand, side by side
with it and the PyTorch call, and say what the static CPU model predicts for each.

Run:  FLEXSCHED_LLVM_TARGET="llvm -mattr=-avx512f" ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
      .venv/bin/python experiments/schedule_variants.py experiments/results/cpu_benchmark_q200_emr_after_avx2.json C4 \
          "O:w=2,10,1,3" "O:w=1,4,5,3" "O:h=2,10,1,3" --blocks 3

A variant is `node:loop=f0,f1,...` edits joined by `;`: the split of that node's loop takes those
factors (a schedule the space may or may not offer). Each variant is built, checked against the
reference evaluator (one that does not build or is wrong is reported and left out) and timed with
the best and torch in alternating rounds (explore.side_by_side), `--blocks` times in a row: a
question such as "would a 12-accumulator tile beat the searched 8-accumulator one here?" answered
by measurement, with the model's answer beside it.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

from analysis import analyze
from codegen import cpu_model
from explore.finalists import checked_kernel, kernel_timed
from explore.side_by_side import time_side_by_side
from flexsched.library import checked_library
from flexsched.target import get_target

from cpu_benchmark import cases, cpu_description


def edited(steps, variant):
    """The schedule steps with the variant's split factors in place (KeyError naming a missing split)."""
    steps = json.loads(json.dumps(steps))
    for edit in variant.split(";"):
        where, factors = edit.split("=")
        node, loop = where.split(":")
        splits = [step for step in steps if step["kind"] == "split" and step["node"] == node and step["loop"] == loop]
        if not splits:
            raise KeyError(f"the schedule splits no loop {loop!r} of node {node!r}")
        splits[0]["factors"] = [int(factor) for factor in factors.split(",")]
    return steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", help="a results file of experiments/cpu_benchmark.py")
    parser.add_argument("case", help="its case whose best schedule the variants edit")
    parser.add_argument("variants", nargs="+", help="node:loop=f0,f1,...[;node:loop=...]")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--blocks", type=int, default=2, help="blocks of alternating rounds, one after another")
    parser.add_argument("--out", default=None, help="write the figures here as JSON")
    args = parser.parse_args()
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    best = {row["case"]: row for row in json.loads(Path(args.results).read_text())}[args.case]["best_schedule"]
    task, target = cases()[args.case], get_target("llvm")
    inputs = task.random_inputs(seed=1)
    reference = task.evaluate(*inputs)
    flops = analyze(task).flops
    print(cpu_description())
    contestants, predicted = [], {}
    for name in ["best", *args.variants]:
        try:
            steps = best if name == "best" else edited(best, name)
            kernel, arrays = checked_kernel(task, json.dumps(steps), target, inputs, reference)
        except Exception as err:   # a variant that does not build or match is reported, not timed
            print(f"{name:32} left out: {type(err).__name__}: {str(err)[:160]}")
            continue
        predicted[name] = cpu_model.estimate(task, json.dumps(steps), target).seconds
        contestants.append(kernel_timed(name, kernel, arrays))
    library = checked_library(task, target, inputs, reference)
    blocks = [time_side_by_side([*contestants, library], args.rounds) for _ in range(args.blocks)]
    rows = []
    for timed in [*contestants, library]:
        gflops = [flops / block.seconds(timed.name) / 1e9 for block in blocks]
        model = predicted.get(timed.name)
        rows.append({"name": timed.name, "gflops": gflops, "model_seconds": model})
        print(f"{timed.name:32} {' '.join(f'{value:6.1f}' for value in gflops)} GFLOPS"
              + (f"  model {model * 1e3:.2f} ms ({flops / model / 1e9:.0f} GFLOPS)" if model else ""), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"cpu": cpu_description(), "results": args.results, "case": args.case,
                                              "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
