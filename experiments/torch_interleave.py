"""Searched bests called between PyTorch operators, as inside a model: how the two thread pools slow each other.

Run:  .venv/bin/python experiments/torch_interleave.py experiments/results/cpu_benchmark_q200_zen5_collapsed_copies_avx512.json \
          --cases C3 C9 C11 --out experiments/results/torch_interleave_zen5_avx512.json

Each case's best schedule is rebuilt, checked against the reference evaluator, and called in three
ways: back to back with itself, right after the PyTorch call (torch, ours, torch, ours, ...; each
call timed alone), and the PyTorch call right after ours. Our pool's helpers spin between calls,
and so do PyTorch's OpenMP threads: a spinning thread takes a core from the other library's next
call. Three ways of running our chunks are timed in alternating rounds (codegen.runtime): the
pool's helpers spinning after every call (SPIN_GAP_SECONDS infinite), the helpers spinning only
when calls come close together, and PyTorch's own OpenMP team (the default where it is loaded).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path

import torch

import codegen.runtime as runtime
from explore.finalists import checked_kernel
from flexsched.library import checked_library
from flexsched.schedule import Schedule
from flexsched.target import get_target

from cpu_benchmark import cases, cpu_description

# (runtime.SHARE_OPENMP, runtime.SPIN_GAP_SECONDS) of each way.
POLICIES = {"helpers, always spin": (False, math.inf),
            "helpers, spin on close calls": (False, runtime.SPIN_GAP_SECONDS),
            "OpenMP team": (True, runtime.SPIN_GAP_SECONDS)}
CALLS_PER_ROUND = 100


def timed_calls(first, second, count):
    """Median seconds of `first` and of `second` over `count` pairs (first, second), each call timed alone."""
    firsts, seconds = [], []
    for _ in range(count):
        start = time.perf_counter()
        first()
        middle = time.perf_counter()
        second()
        firsts.append(middle - start)
        seconds.append(time.perf_counter() - middle)
    return statistics.median(firsts), statistics.median(seconds)


def interleaved(ours, library, rounds):
    """{policy: {"ours alone", "ours after torch", "torch after ours"}: median seconds over the rounds}."""
    table = {policy: {"ours alone": [], "ours after torch": [], "torch after ours": []} for policy in POLICIES}
    for _ in range(rounds):
        for policy, (share, gap) in POLICIES.items():
            runtime.SHARE_OPENMP, runtime.SPIN_GAP_SECONDS = share, gap
            table[policy]["ours alone"].append(timed_calls(ours, ours, CALLS_PER_ROUND)[1])
            table[policy]["ours after torch"].append(timed_calls(library, ours, CALLS_PER_ROUND)[1])
            table[policy]["torch after ours"].append(timed_calls(ours, library, CALLS_PER_ROUND)[1])
    runtime.SHARE_OPENMP, runtime.SPIN_GAP_SECONDS = POLICIES["OpenMP team"]
    return {policy: {way: statistics.median(values) for way, values in ways.items()} for policy, ways in table.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", help="a cpu_benchmark.py results file (its best schedules)")
    parser.add_argument("--cases", nargs="+", default=["C3", "C9", "C11"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", help="write the figures to this JSON file")
    args = parser.parse_args()
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    bests = {row["case"]: row["best_schedule"] for row in json.loads(Path(args.results).read_text())}
    target, rows = get_target("llvm"), []
    print(f"{cpu_description()}; seconds per call, medians of {args.rounds} rounds of {CALLS_PER_ROUND} pairs")
    for name in args.cases:
        task = cases()[name]
        inputs = task.random_inputs(seed=1)
        reference = task.evaluate(*inputs)
        kernel, arrays = checked_kernel(task, json.dumps(bests[name]), target, inputs, reference)
        library = checked_library(task, target, inputs, reference)
        figures = interleaved(lambda: kernel(*arrays), library.call, args.rounds)
        rows.append({"case": name, "schedule": json.loads(Schedule.from_json(json.dumps(bests[name])).to_json()),
                     "seconds": figures})
        for policy, ways in figures.items():
            print(f"  {name} {policy:29} " + ", ".join(f"{way} {seconds * 1e3:.3f} ms" for way, seconds in ways.items()),
                  flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"cpu": cpu_description(), "results": args.results,
                                              "rounds": args.rounds, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
