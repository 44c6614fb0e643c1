"""How far a search's timing of a kernel strays, timed alone and paired with a yardstick: two builds of
one benchmark best (their true ratio is 1), timed the search's way many times over a minute or two.

Run:  .venv/bin/python experiments/paired_timing_noise.py experiments/results/cpu_benchmark_q200_paired_cut15_avx512.json --case C1 --samples 60 --out experiments/results/paired_timing_noise_c1.json

Each sample times A and then B alone (the median of `--repeats` repeats each, as a search timed a
candidate before pairing), then A and B in `--repeats` alternating repeats (codegen.measure's
Yardstick: A as the candidate, B as the yardstick). It reports the spread of A/B over the samples
for separate timings, for the first paired repeat alone, and for the median of the paired repeats.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from codegen.measure import runs_per_repeat
from explore.finalists import checked_kernel
from flexsched.target import get_target

from cpu_benchmark import cases, cpu_description


def repeat_seconds(kernel, arrays, number):
    """Seconds per run over `number` runs back to back, timed as the kernel's back end times."""
    return kernel.backend.time_runs(lambda: kernel(*arrays), number)


def spread(ratios):
    """The median ratio and where the samples lie around it (relative to it)."""
    middle = statistics.median(ratios)
    relative = sorted(ratio / middle for ratio in ratios)
    tenth = len(relative) // 10
    return {"median": middle, "p10": relative[tenth], "p90": relative[-1 - tenth], "min": relative[0],
            "max": relative[-1]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", help="a results file of experiments/cpu_benchmark.py")
    parser.add_argument("--case", default="C1")
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per kernel and sample")
    parser.add_argument("--min-run-seconds", type=float, default=0.01, help="as the search's measurement")
    parser.add_argument("--pause", type=float, default=0.3, help="seconds between samples")
    parser.add_argument("--out", default=None, help="write the figures here as JSON")
    args = parser.parse_args()
    row = next(row for row in json.loads(Path(args.results).read_text()) if row["case"] == args.case)
    task, target = cases()[args.case], get_target("llvm")
    inputs = task.random_inputs(seed=1)
    reference = task.evaluate(*inputs)
    schedule = json.dumps(row["best_schedule"])
    (a, a_arrays), (b, b_arrays) = (checked_kernel(task, schedule, target, inputs, reference) for _ in range(2))
    number = runs_per_repeat(repeat_seconds(a, a_arrays, 3), args.min_run_seconds)
    separate, first_pair, paired = [], [], []
    for _ in range(args.samples):
        alone_a = statistics.median(repeat_seconds(a, a_arrays, number) for _ in range(args.repeats))
        alone_b = statistics.median(repeat_seconds(b, b_arrays, number) for _ in range(args.repeats))
        separate.append(alone_a / alone_b)
        pairs = [repeat_seconds(a, a_arrays, number) / repeat_seconds(b, b_arrays, number) for _ in range(args.repeats)]
        first_pair.append(pairs[0])
        paired.append(statistics.median(pairs))
        time.sleep(args.pause)
    figures = {"cpu": cpu_description(), "case": args.case, "results": args.results, "samples": args.samples,
               "repeats": args.repeats, "runs_per_repeat": number, "separate": spread(separate),
               "first_paired_repeat": spread(first_pair), "paired": spread(paired)}
    print(figures["cpu"])
    for name in ("separate", "first_paired_repeat", "paired"):
        f = figures[name]
        print(f"{name:20} A/B median {f['median']:.3f}; 10th-90th percentile {f['p10']:.2f}-{f['p90']:.2f} "
              f"of it, extremes {f['min']:.2f}-{f['max']:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
