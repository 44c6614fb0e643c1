"""The CPU space's promise at real sizes: random and stress points (producers attached, splits
padded, inputs packed) of multi-node graphs built, run and checked against the reference,
with each build's time. The graphs are the test suite's (tests/graphs.py), at the sizes of a
MobileNet-like block, a YOLO-like layer with bias and ReLU, and a softmax over 1000 classes.

Run: .venv/bin/python experiments/validity_sweep.py [--points 20] [--out experiments/results/validity_sweep.json]
Prints one line per graph (points, wrong kernels, build seconds: median, 90th percentile, max)
and the slowest builds with their configs.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))   # the suite's graphs

from analysis import analyze  # noqa: E402
from codegen.cpu_backend import host_register_lanes  # noqa: E402
from codegen.kernel import build  # noqa: E402
from graphs import conv_bias_relu, depthwise_separable, softmax_chain, stress_points  # noqa: E402
from space import generate  # noqa: E402

CASES = {
    "depthwise_separable 1x32x56x56 -> 64": lambda: depthwise_separable(C=32, H=56, W=56, K=64),
    "conv_bias_relu 1x64x28x28 -> 64, 3x3": lambda: conv_bias_relu(C=64, H=28, W=28, K=64),
    "softmax 128x1000": lambda: softmax_chain(N=128, M=1000),
}


def check(task, kernel, inputs, expected):
    """The number of output elements that differ from the reference."""
    wrong = 0
    for out, ref in zip(kernel.run(*inputs), expected):
        scale = max(1.0, float(np.abs(ref).max()))
        wrong += int((~np.isclose(out, ref, rtol=1e-4, atol=1e-4 * scale)).sum())
    return wrong


def sweep(label, task, points, seed):
    space = generate(analyze(task), "llvm")
    rng = np.random.default_rng(seed)
    chosen = stress_points(space, points // 2, seed) + [space.random_point(rng) for _ in range(points - points // 2)]
    inputs = task.random_inputs(0)
    expected = task.evaluate(*inputs)
    rows = []
    for number, point in enumerate(chosen):
        began = time.perf_counter()
        kernel = build(task, space.schedule(point))
        seconds = time.perf_counter() - began
        wrong = check(task, kernel, inputs, expected)
        rows.append({"kind": "stress" if number < points // 2 else "random", "build_seconds": round(seconds, 3),
                     "wrong_elements": wrong, "fallbacks": list(kernel.compiled.fallbacks),
                     "config": space.config(point).to_dict()})
        print(f"  {label} #{number} {rows[-1]['kind']}: build {seconds:.2f} s, wrong {wrong}", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=20, help="points per graph, half of them stress points")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="experiments/results/validity_sweep.json")
    args = parser.parse_args()
    results = {"cpu": platform.processor() or platform.machine(), "vector_lanes_f32": host_register_lanes(),
               "points_per_graph": args.points, "graphs": {}}
    for label, make in CASES.items():
        results["graphs"][label] = sweep(label, make(), args.points, args.seed)
    print()
    slowest = []
    for label, rows in results["graphs"].items():
        times = sorted(row["build_seconds"] for row in rows)
        wrong = sum(row["wrong_elements"] > 0 for row in rows)
        print(f"{label}: {len(rows)} points, {wrong} wrong kernels, build median {statistics.median(times):.2f} s, "
              f"p90 {times[int(0.9 * (len(times) - 1))]:.2f} s, max {times[-1]:.2f} s")
        slowest += [(row["build_seconds"], label, row["config"]) for row in rows]
    for seconds, label, config in sorted(slowest, key=lambda item: -item[0])[:3]:
        print(f"slow build {seconds:.2f} s: {label} {json.dumps(config)}")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as out:
        json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
