"""Where a candidate's build time goes, on a fixed sample of random points: no search, no timing.

Run:  .venv/bin/python experiments/build_cost.py --points 4 --out experiments/results/build_cost.json

With --passes N, LLVM times its passes too (optimisation and code generation), and the N costliest
are printed, each pass's runs over all the points summed.

With --records F, each case's points are a search's own candidates instead, spread evenly over
its records in F (the benchmark's --records file): where the search wandered decides its builds.

The same seed draws the same points from each case's CPU space, so two commits compare on equal
terms (run one from a git worktree with PYTHONPATH set to it). Each point is lowered and compiled
with the kernel cache off, and its unoptimised LLVM instructions (after the code-size budget) and
seconds to emit the IR, optimise it and generate machine code are reported, with a digest of each
case's object code (equal on two commits: they make the same machine code). A search's own
candidates/s also depends on where it wanders; this does not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np

from analysis import analyze
from codegen import cpu_backend
from codegen.kernel import lower_for
from explore.records import load_records
from flexsched.target import get_target
from space import generate

from cpu_benchmark import cases, cpu_description

DEFAULT_CASES = ["GMM"] + [f"C{number}" for number in range(1, 16)]


def build_cost(task, schedule, target):
    """{instructions, emit, optimize, machine_code, object_sha1} of one schedule, built from scratch
    (the kernel cache off); the object code's digest tells whether two commits make the same code."""
    _, lowered = lower_for(task, schedule, target)
    code, report = cpu_backend.machine_code_with_report(lowered.func, target=target)
    return {"instructions": cpu_backend._instruction_count(code.unoptimized_ir), "emit": report.emit_seconds,
            "optimize": report.optimize_seconds, "machine_code": report.machine_code_seconds,
            "object_sha1": hashlib.sha1(code.object_code).hexdigest()}


def recorded_points(records, task, space, count):
    """count of the task's recorded points in this space, evenly spread over the records in order."""
    points = [record.point_in(space) for record in records if record.same_task(task) and record.same_space(space)]
    return points[::max(1, len(points) // count)][:count]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="*", default=DEFAULT_CASES)
    parser.add_argument("--points", type=int, default=4, help="points per case")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--records", metavar="F",
                        help="take each case's points from its records in F, evenly spread, not at random")
    parser.add_argument("--passes", type=int, default=0, metavar="N",
                        help="also time LLVM's passes and print the N costliest, summed over the points")
    parser.add_argument("--out", help="write every point's figures to this JSON file")
    args = parser.parse_args()
    llvm.set_time_passes(bool(args.passes))
    os.environ["FLEXSCHED_KERNEL_CACHE"] = "off"
    target = get_target("llvm")
    rng = np.random.default_rng(args.seed)
    records = load_records(args.records) if args.records else []
    rows = []
    for name in args.cases:
        task = cases()[name]
        space = generate(analyze(task), target)
        points = (recorded_points(records, task, space, args.points) if args.records
                  else [space.random_point(rng) for _ in range(args.points)])
        costs = [build_cost(task, space.schedule(point), target) for point in points]
        rows += [{"case": name, "point": list(point), **cost} for point, cost in zip(points, costs)]
        total = [cost["emit"] + cost["optimize"] + cost["machine_code"] for cost in costs]
        print(f"{name:4} instructions median {statistics.median(c['instructions'] for c in costs):7.0f}, "
              f"emit {sum(c['emit'] for c in costs):6.2f} s, optimize {sum(c['optimize'] for c in costs):6.2f} s, "
              f"machine code {sum(c['machine_code'] for c in costs):6.2f} s, total {sum(total):6.2f} s, "
              f"objects {_digest(c['object_sha1'] for c in costs)}", flush=True)
    phases = {phase: sum(row[phase] for row in rows) for phase in ("emit", "optimize", "machine_code")}
    print(f"all {len(rows)} points on {cpu_description()}: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
          + f", total {sum(phases.values()):.2f} s")
    passes = pass_seconds(llvm.report_and_reset_timings()) if args.passes else {}
    for name, seconds in sorted(passes.items(), key=lambda item: -item[1])[:args.passes]:
        print(f"  {seconds:6.2f} s {seconds / sum(passes.values()):6.1%}  {name}")
    if args.out:
        Path(args.out).write_text(json.dumps({"cpu": cpu_description(), "seed": args.seed, "points": rows,
                                              "pass_seconds": passes}, indent=1))


def _digest(hexdigests):
    """A short digest of a case's object codes, in order: equal on two commits, the same code."""
    return hashlib.sha1("".join(hexdigests).encode()).hexdigest()[:12]


def pass_seconds(report):
    """{pass name: wall seconds} of LLVM's pass timing report, each pass's runs (on every function
    and module, numbered '#2', '#3', ...) summed, the report's total left out."""
    seconds = {}
    for line in report.splitlines():
        match = PASS_LINE.match(line)
        if match and match["name"] != "Total":
            name = re.sub(r" #\d+$", "", match["name"])
            seconds[name] = seconds.get(name, 0.0) + float(match["wall"])
    return seconds


# A row of the report: user, system, user + system and wall seconds, each with its share, then the name.
PASS_LINE = re.compile(r"^\s+(?:[\d.]+ \(\s*[\d.]+%\)\s+){3}(?P<wall>[\d.]+) \(\s*[\d.]+%\)\s+(?P<name>\S.*?)\s*$")


if __name__ == "__main__":
    main()
