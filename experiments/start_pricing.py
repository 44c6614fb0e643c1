"""What pricing a search's start pool costs: random points of each case priced by the CPU model on one
worker per core, as explore's start screen does, and a digest of the prices.

Run:  .venv/bin/python experiments/start_pricing.py --cases C1 --points 64

A search with --start-pool prices its pool before it measures anything (YOLO C1, the first 3 x 3
layer, prices all 128). The same seed draws the same points, so two commits compare on equal terms
(run one from a git worktree with PYTHONPATH set to it): equal digests, the same prices.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import numpy as np

from analysis import analyze
from codegen.evaluators import CpuModelEvaluator
from flexsched.target import get_target, host_cores
from space import generate

from cpu_benchmark import cases, cpu_description


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="*", default=["C1"])
    parser.add_argument("--points", type=int, default=64, help="points per case")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    target = get_target("llvm")
    model = CpuModelEvaluator(target, workers=host_cores())
    rng = np.random.default_rng(args.seed)
    print(cpu_description())
    try:
        for name in args.cases:
            task = cases()[name]
            space = generate(analyze(task), target)
            points = [space.random_point(rng) for _ in range(args.points)]
            model.evaluate(task, space, points[:1])   # the workers' imports and LLVM's start, not timed
            started = time.perf_counter()
            prices = model.evaluate(task, space, points)
            seconds = time.perf_counter() - started
            digest = hashlib.sha1(json.dumps([[p.status, p.seconds] for p in prices]).encode()).hexdigest()[:12]
            print(f"{name:4} {len(points)} points priced in {seconds:6.2f} s ({sum(p.ok for p in prices)} priced), "
                  f"prices {digest}", flush=True)
    finally:
        model.close()


if __name__ == "__main__":
    main()
