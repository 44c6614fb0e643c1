"""Each schedule of points files built under variants of the CPU back end, every build checked against
the reference evaluator, then timed side by side with PyTorch on the same buffers: a change to code
generation measured on the same points, apart from the search's luck in reaching them.

The experiments that use it name their variants (experiments/scheduling_model.py, experiments/fence_pressure.py).
A points file is cpu_points.py's; --bests takes every case's best schedule from a cpu_benchmark.py results
file. Beside each figure the hottest block's multiply-adds and stack references say whether its register
tile spilled; a schedule whose variants make the same code is reported once and not timed. The builds of a
schedule share their argument buffers, so where they land in memory is no difference.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ["FLEXSCHED_KERNEL_CACHE"] = "off"   # the builds of a schedule share their cache key

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


def checked_build(task, steps, inputs, reference, variant):
    """(kernel, its assembly) of steps built with a variant in force (a context manager); ValueError names
    a mismatch."""
    with variant():
        cpu_backend.clear_cache()
        kernel = build(task, Schedule.from_json(json.dumps(steps)))
        assembly = kernel.asm()   # printed on demand, by the variant in force
    cpu_backend.clear_cache()
    outputs = [kernel.backend.to_host(out) for out in kernel.run(*inputs)]
    mismatch = compare_outputs(outputs, reference, [t.name for t in task.outputs])
    if mismatch:   # a fast wrong kernel is no result
        raise ValueError(mismatch)
    return kernel, assembly


def main(description, variants):
    """The command line of an experiment timing `variants` ((name, context manager factory), ...)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("points", nargs="*", help="cpu_points.py files")
    parser.add_argument("--bests", nargs="*", default=[],
                        help="cpu_benchmark.py results files: time each case's best schedule")
    parser.add_argument("--cases", nargs="*", help="only these cases of the --bests files")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", help="write the figures to this JSON file")
    args = parser.parse_args()
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    rows = []
    print(cpu_description())
    specs = [json.loads(Path(path).read_text()) for path in args.points]
    for path in args.bests:
        specs += [{"case": row["case"], "schedules": {f"best of {Path(path).stem}": row["best_schedule"]}}
                  for row in json.loads(Path(path).read_text())
                  if row.get("best_schedule") and (not args.cases or row["case"] in args.cases)]
    for spec in specs:
        task, flops, inputs, reference, library = case_with_torch(spec["case"])
        contestants, hot = [library], {}
        for label, steps in spec["schedules"].items():
            shared, builds = None, []
            for variant, context in variants:
                kernel, assembly = checked_build(task, steps, inputs, reference, context)
                builds.append((f"{label} [{variant}]", kernel, assembly))
            if len({assembly for *_, assembly in builds}) == 1:
                print(f"{spec['case']:4} {label[:64]:64} the same code in every variant", flush=True)
                rows.append({"case": spec["case"], "label": label, "same_code": True})
                continue
            for name, kernel, assembly in builds:
                shared = shared or kernel.arguments(inputs)
                hot[name] = hottest_block(assembly)
                contestants.append(kernel_timed(name, kernel, shared))
        if len(contestants) == 1:
            continue
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
        Path(args.out).write_text(json.dumps({"cpu": cpu_description(), "points": args.points, "bests": args.bests,
                                              "variants": [name for name, _ in variants], "rows": rows}, indent=1) + "\n")
