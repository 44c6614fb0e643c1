"""Each schedule of points files built twice, scheduled by the host CPU's own LLVM model and as shipped
(codegen.cpu_backend.scheduling_cpu), then timed side by side with PyTorch on the same buffers.

Run:  .venv/bin/python experiments/scheduling_model.py experiments/points/{gmm,c3,c9,c11}_zen5_run_bests.json \
          experiments/points/c7_zen_spilled_tile.json --out experiments/results/scheduling_model_zen5_avx512.json
      .venv/bin/python experiments/scheduling_model.py --bests experiments/results/cpu_benchmark_q200_zen5_avx512.json \
          --out experiments/results/scheduling_model_bests_zen5_avx512.json

A points file is cpu_points.py's; --bests takes every case's best schedule from a cpu_benchmark.py results file.

On a CPU whose code the shipped rule schedules by its own model the two builds are the same code.
Every build is checked against the reference evaluator before it is timed; beside each figure the
hottest block's multiply-adds and stack references say whether its register tile spilled. The two
builds of a schedule share their argument buffers, so where they land in memory is no difference.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ["FLEXSCHED_KERNEL_CACHE"] = "off"   # the two builds of a schedule share their cache key

import torch  # noqa: E402

from codegen import cpu_backend  # noqa: E402
from codegen.kernel import build  # noqa: E402
from codegen.measure import compare_outputs  # noqa: E402
from explore.finalists import kernel_timed  # noqa: E402
from explore.side_by_side import time_side_by_side  # noqa: E402
from flexsched.schedule import Schedule  # noqa: E402

from cpu_benchmark import cpu_description  # noqa: E402
from cpu_points import case_with_torch  # noqa: E402
from hot_loop import hottest_block  # noqa: E402

SHIPPED = cpu_backend.scheduling_cpu
RULES = (("own model", lambda cpu, features: cpu), ("shipped", SHIPPED))


def checked_build(task, steps, inputs, reference, rule):
    """(kernel, its hottest block) of steps built under a scheduling rule; ValueError names a mismatch."""
    cpu_backend.scheduling_cpu = rule
    cpu_backend.clear_cache()
    try:
        kernel = build(task, Schedule.from_json(json.dumps(steps)))
        hot = hottest_block(kernel.asm())   # the assembly is printed on demand, by the rule in force
    finally:
        cpu_backend.scheduling_cpu = SHIPPED
    outputs = [kernel.backend.to_host(out) for out in kernel.run(*inputs)]
    mismatch = compare_outputs(outputs, reference, [t.name for t in task.outputs])
    if mismatch:   # a fast wrong kernel is no result
        raise ValueError(mismatch)
    return kernel, hot


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("points", nargs="*", help="cpu_points.py files")
    parser.add_argument("--bests", help="a cpu_benchmark.py results file: time each case's best schedule")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", help="write the figures to this JSON file")
    args = parser.parse_args()
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    rows = []
    print(cpu_description())
    specs = [json.loads(Path(path).read_text()) for path in args.points]
    if args.bests:
        specs += [{"case": row["case"], "schedules": {"searched best": row["best_schedule"]}}
                  for row in json.loads(Path(args.bests).read_text()) if row.get("best_schedule")]
    for spec in specs:
        task, flops, inputs, reference, library = case_with_torch(spec["case"])
        contestants, hot = [library], {}
        for label, steps in spec["schedules"].items():
            shared = None
            for variant, rule in RULES:
                kernel, block = checked_build(task, steps, inputs, reference, rule)
                shared = shared or kernel.arguments(inputs)
                name = f"{label} [{variant}]"
                hot[name] = block
                contestants.append(kernel_timed(name, kernel, shared))
        side = time_side_by_side(contestants, args.rounds)
        for timed in contestants[1:]:
            median, low, high = side.ratio(timed.name, library.name)
            block = hot[timed.name]
            rows.append({"case": spec["case"], "label": timed.name, "gflops": flops / side.seconds(timed.name) / 1e9,
                         "ratio_median": median, "ratio_min": low, "ratio_max": high,
                         "multiply_adds": block["multiply_adds"], "stack_references": block["stack_references"]})
            print(f"{spec['case']:4} {timed.name[:64]:64} {block['multiply_adds']:4} FMAs {block['stack_references']:3} "
                  f"stack refs {rows[-1]['gflops']:6.0f} GFLOPS, vs torch {median:.2f} ({low:.2f}-{high:.2f})", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"cpu": cpu_description(), "points": args.points, "bests": args.bests, "rows": rows},
                                             indent=1) + "\n")


if __name__ == "__main__":
    main()
