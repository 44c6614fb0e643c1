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
from pathlib import Path

from codegen import cpu_model, x86_asm
from codegen.kernel import build
from flexsched.schedule import Schedule
from flexsched.target import get_target

from cpu_benchmark import cases, cpu_description


def hottest_block(assembly):
    """{"instructions", "multiply_adds", "broadcasts", "stack_references"} of the basic block, over every
    function of the assembly (codegen.x86_asm), with the most FMAs."""
    blocks = [[function.instructions[index] for index in function.block_instructions(block)]
              for function in x86_asm.parse(assembly).values() for block in range(len(function.blocks))]
    block = max(blocks, key=lambda instructions: sum(i.mnemonic.startswith("vfmadd") for i in instructions))
    return {"instructions": len(block),
            "multiply_adds": sum(i.mnemonic.startswith("vfmadd") for i in block),
            "broadcasts": sum(i.mnemonic.startswith("vbroadcast") for i in block),
            "stack_references": sum(any("(%rsp)" in operand for operand in i.operands) for i in block)}


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
