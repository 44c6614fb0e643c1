"""How steady this host's arithmetic speed is: the FMA roof loop (codegen.roof) on every core,
sampled every few tenths of a second, so a benchmark can say how often a timing lands in a slow phase.

Run:  .venv/bin/python experiments/core_speed_probe.py --seconds 90 --out experiments/results/core_speed_probe.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from codegen.roof import fma_gflops
from flexsched.target import get_target, host_cores


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--pause", type=float, default=0.3, help="seconds between samples")
    parser.add_argument("--out", default="experiments/results/core_speed_probe.json")
    args = parser.parse_args()
    target, cores = get_target("llvm"), host_cores()
    samples, started = [], time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        samples.append((round(time.perf_counter() - started, 2), fma_gflops(cores, target.vector_lanes,
                                                                       target.vector_registers)))
        time.sleep(args.pause)
    gflops = [value for _, value in samples]
    fast = max(gflops)
    slow = [value for value in gflops if value < 0.75 * fast]   # a level, not jitter: samples sit near 1/2
    summary = {"cpu": f"{target.cpu}, {cores} cores, {target.vector_lanes} float32 lanes", "samples": len(gflops),
               "best_gflops": fast, "median_gflops": statistics.median(gflops),
               "slow_samples": len(slow), "slow_median_gflops": statistics.median(slow) if slow else None,
               "series": samples}
    Path(args.out).write_text(json.dumps(summary, indent=1))
    print(f"{summary['cpu']}: best {fast:.1f} GFLOPS, median {summary['median_gflops']:.1f}; "
          f"{len(slow)} of {len(gflops)} samples below 3/4 of the best"
          + (f" (their median {summary['slow_median_gflops']:.1f})" if slow else ""))


if __name__ == "__main__":
    main()
