"""How a kernel's speed depends on where its arrays start: one benchmark best, built once per byte offset
from a 64-byte line, its arguments and workspaces all placed at that offset, timed side by side with torch.

Run:  .venv/bin/python experiments/array_alignment.py experiments/results/cpu_benchmark_q200_paired_avx512.json --cases C2 C6 C9 GMM --offsets 0 16 --blocks 3 --out experiments/results/array_alignment_avx512.json

An offset of 0 is a 64-byte line 1 KB into a page (so the arrays do not all share a page offset);
16 is where numpy's own allocations often start. The kernel's own scratch (packed panels, from the
heap inside the kernel) is aligned either way.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np
import torch

from analysis import analyze
from explore.finalists import checked_kernel, kernel_timed
from explore.side_by_side import time_side_by_side
from flexsched.library import checked_library
from flexsched.target import get_target

from cpu_benchmark import cases, cpu_description

PAGE_OFFSET = 1024   # bytes into a page where offset 0 lies


def placed(shape, dtype, offset):
    """An uninitialised C-contiguous array starting `offset` bytes past a 64-byte line."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + 4096 + PAGE_OFFSET + offset, dtype=np.uint8)
    start = -raw.ctypes.data % 4096 + PAGE_OFFSET + offset
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def kernel_at(task, row, target, inputs, reference, offset):
    """The case's best kernel with copies of its arguments, and its workspaces, at `offset`."""
    kernel, arrays = checked_kernel(task, json.dumps(row["best_schedule"]), target, inputs, reference)
    moved = []
    for array in arrays:
        copy = placed(array.shape, array.dtype, offset)
        copy[...] = array
        moved.append(copy)
    # The kernel keeps a calling thread's workspaces here, allocated on its first call: place them first.
    kernel._local.workspaces = [placed(b.shape, b.dtype, offset) for b in kernel.lowered.workspaces]
    kernel(*moved)
    return kernel_timed(f"offset {offset}", kernel, moved)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", help="a results file of experiments/cpu_benchmark.py")
    parser.add_argument("--cases", nargs="+", default=["C2", "C6"])
    parser.add_argument("--offsets", nargs="+", type=int, default=[0, 16])
    parser.add_argument("--blocks", type=int, default=3, help="blocks of alternating rounds")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=None, help="write the figures here as JSON")
    args = parser.parse_args()
    torch.set_num_threads(2)
    rows = {row["case"]: row for row in json.loads(Path(args.results).read_text())}
    target = get_target("llvm")
    figures = {"cpu": cpu_description(), "results": args.results, "offsets": args.offsets, "cases": []}
    print(figures["cpu"])
    for case in args.cases:
        task = cases()[case]
        inputs = task.random_inputs(seed=1)
        reference = task.evaluate(*inputs)
        timed = [kernel_at(task, rows[case], target, inputs, reference, offset) for offset in args.offsets]
        library = checked_library(task, target, inputs, reference)
        flops = analyze(task).flops
        blocks = []
        for _ in range(args.blocks):
            side = time_side_by_side([*timed, library], args.rounds)
            blocks.append({t.name: {"gflops": flops / side.seconds(t.name) / 1e9,
                                    "ratio_to_torch": statistics.median(side.ratios(t.name, library.name))}
                           for t in timed})
            print(case, "  ".join(f"{name}: {f['gflops']:.0f} GFLOPS, {f['ratio_to_torch']:.2f} of torch"
                                  for name, f in blocks[-1].items()), flush=True)
        figures["cases"].append({"case": case, "blocks": blocks})
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
