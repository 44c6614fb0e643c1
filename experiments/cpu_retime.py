"""Re-time a CPU benchmark's best kernels against PyTorch in a fresh process, without searching.

Run:  .venv/bin/python experiments/cpu_retime.py experiments/results/cpu_benchmark_q200_transfer.json --cases C3 C9 C11 --repeat 3

Each case's best schedule from the results file is rebuilt (in the isolated build worker), checked against the reference
evaluator, then timed against the PyTorch call in alternating rounds (explore.side_by_side), as
cpu_benchmark.py does, `--repeat` times in a row, with the kernel and the PyTorch call also timed
alone before each block: a second opinion on a benchmark's figures from the same kernels on the
same host. Torch alone says which of its two speeds a process got on the layers where it has two
(YOLO C14 at 40-45 or 96-103 GFLOPS, alone and alternated alike, from one process to the next).
With --roof each block ends with the FMA loop on every core (codegen.roof) timed alone, and the
kernels' speeds alone are given as shares of it: read seconds apart, in the same phase of the host's
speed as a rule. (Timed in the same rounds as the kernels, the loop slowed what ran after it: AVX-512
YOLO C3 at 177 GFLOPS beside it against 208 alone.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
from pathlib import Path

import torch

from analysis import analyze
from codegen.roof import FmaOnEveryCore
from explore.finalists import checked_kernel, kernel_timed
from explore.side_by_side import TARGET_TIMING_SECONDS, Timed, time_side_by_side
from flexsched.library import checked_library
from flexsched.schedule import Schedule
from flexsched.target import get_target

from cpu_benchmark import cases, cpu_description


def retime(task, schedule, rounds, repeat, roof=None):
    """[(ours GFLOPS alone, ours GFLOPS beside torch, torch GFLOPS, median ratio, torch GFLOPS alone,
    roof GFLOPS, ours and torch's shares of it alone, or three None)] per block; `roof` an
    FmaOnEveryCore timed after each block's kernels."""
    target = get_target("llvm")
    inputs = task.random_inputs(seed=1)
    reference = task.evaluate(*inputs)
    kernel, arrays = checked_kernel(task, schedule.to_json(), target, inputs, reference)   # a wrong one raises
    library = checked_library(task, target, inputs, reference)
    ours = kernel_timed("ours", kernel, arrays)
    flops = analyze(task).flops
    blocks = []
    for _ in range(repeat):
        alone = time_side_by_side([ours], rounds)
        library_alone = time_side_by_side([library], rounds)
        side = time_side_by_side([ours, library], rounds)
        ours_alone = flops / alone.seconds("ours") / 1e9
        library_alone_gflops = flops / library_alone.seconds(library.name) / 1e9
        roof_figures = (None, None, None)
        if roof:
            roof_gflops = roof.flops / time_side_by_side([Timed("FMA roof", roof)], rounds).seconds("FMA roof") / 1e9
            roof_figures = (roof_gflops, ours_alone / roof_gflops, library_alone_gflops / roof_gflops)
        blocks.append((ours_alone, flops / side.seconds("ours") / 1e9, flops / side.seconds(library.name) / 1e9,
                       statistics.median(side.ratios("ours", library.name)), library_alone_gflops, *roof_figures))
    return blocks


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", help="a results file of experiments/cpu_benchmark.py")
    parser.add_argument("--cases", nargs="*", default=None, help="its cases to re-time (default: all)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3, help="blocks of rounds per case, one after another")
    parser.add_argument("--roof", action="store_true", help="time the FMA roof loop on every core in the same rounds")
    parser.add_argument("--out", default=None, help="write the figures here as JSON")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    torch.set_num_threads(cores)
    target = get_target("llvm")
    roof = (FmaOnEveryCore(cores, target.vector_lanes, target.vector_registers, seconds=TARGET_TIMING_SECONDS)
            if args.roof else None)
    rows = {row["case"]: row for row in json.loads(Path(args.results).read_text())}
    tasks = cases()
    names = args.cases or list(rows)
    unknown = [name for name in names if name not in rows]
    if unknown:
        parser.error(f"{args.results} has no case {', '.join(unknown)}")
    print(cpu_description())
    out = []
    for name in names:
        schedule = Schedule.from_json(json.dumps(rows[name]["best_schedule"]))
        blocks = retime(tasks[name], schedule, args.rounds, args.repeat, roof)
        ratios = [block[3] for block in blocks]
        out.append({"case": name, "benchmark_ratio": rows[name]["ratio_median"], "ratios": ratios,
                    "blocks": [dict(zip(("alone_gflops", "gflops", "torch_gflops", "ratio", "torch_alone_gflops",
                                         "roof_gflops", "roof_share_alone", "torch_roof_share_alone"), b))
                               for b in blocks]})
        print(f"{name:4} benchmark {rows[name]['ratio_median']:.2f}; re-timed "
              + ", ".join(f"{b[3]:.2f} ({b[1]:.0f} vs {b[2]:.0f} GFLOPS; alone {b[0]:.0f} vs {b[4]:.0f}"
                          + (f"; roof {b[5]:.0f}: ours alone {b[6]:.2f}, torch {b[7]:.2f} of it" if b[5] else "")
                          + ")" for b in blocks),
              flush=True)
    conv = [statistics.median(row["ratios"]) for row in out if row["case"].startswith("C")]
    if conv:
        print(f"YOLO geometric mean of the re-timed medians over {len(conv)} layers: "
              f"{math.exp(statistics.mean(math.log(r) for r in conv)):.3f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"results": args.results, "cpu": cpu_description(), "cases": out},
                                             indent=1))


if __name__ == "__main__":
    main()
