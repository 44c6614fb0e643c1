"""What the schedules of a points file become in their hottest block of machine code: its multiply-adds,
broadcasts and stack references (a register tile LLVM could not keep in registers spills there), beside
the static CPU model's time and bound.

Run:  FLEXSCHED_LLVM_TARGET="llvm -mattr=-avx512f" .venv/bin/python experiments/hot_loop.py \
          experiments/points/c4_three_row_tiles.json --out experiments/results/hot_loop_c4_three_row_tiles_avx2.json

The points file is cpu_points.py's ({"case": NAME, "schedules": {label: [step, ...]}}); nothing is timed,
so the figures depend on the target's code generation alone, not on the machine's load. The hottest block
is the one with the most multiply-adds (the innermost loop body of a register tile).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from codegen import cpu_model
from codegen.kernel import build
from flexsched.schedule import Schedule
from flexsched.target import get_target

from cpu_benchmark import cases, cpu_description

LABEL = re.compile(r"^\.?[A-Za-z_][\w.$]*:")


def blocks(assembly):
    """The assembly's basic blocks, each a list of instruction lines, split at labels."""
    found, current = [], []
    for line in assembly.splitlines():
        if LABEL.match(line.strip()) and current:
            found.append(current)
            current = []
        current.append(line.strip())
    return found + [current]


def hottest_block(assembly):
    """{"instructions", "multiply_adds", "broadcasts", "stack_references"} of the block with the most FMAs."""
    block = max(blocks(assembly), key=lambda lines: sum("vfmadd" in line for line in lines))
    instructions = [line for line in block if line and not LABEL.match(line) and not line.startswith(".")]
    return {"instructions": len(instructions),
            "multiply_adds": sum("vfmadd" in line for line in instructions),
            "broadcasts": sum("vbroadcast" in line for line in instructions),
            "stack_references": sum("(%rsp)" in line for line in instructions)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("points", help="JSON: {\"case\": NAME, \"schedules\": {label: [step, ...]}}")
    parser.add_argument("--out", help="write the figures to this JSON file")
    args = parser.parse_args()
    spec = json.loads(Path(args.points).read_text())
    task, target = cases()[spec["case"]], get_target("llvm")
    print(f"{spec['case']} ({task}) on {cpu_description()}")
    rows = []
    for label, steps in spec["schedules"].items():
        schedule_json = json.dumps(steps)
        kernel = build(task, Schedule.from_json(schedule_json))
        estimate = cpu_model.estimate(task, schedule_json, target)
        row = {"name": label, **hottest_block(kernel.asm()), "model_seconds": estimate.seconds,
               "model_bound": estimate.bound}
        rows.append(row)
        print(f"  {label[:60]:60} {row['multiply_adds']:4} FMAs {row['broadcasts']:3} broadcasts "
              f"{row['stack_references']:3} stack refs; model {estimate.seconds * 1e3:.2f} ms, {estimate.bound}")
    if args.out:
        Path(args.out).write_text(json.dumps({"cpu": cpu_description(), "points": args.points, "rows": rows},
                                             indent=1) + "\n")


if __name__ == "__main__":
    main()
