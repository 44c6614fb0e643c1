"""Exported libraries against the tuned kernel: is the .so `flexsched export` writes as fast as
the Kernel the tuning built, parallel loops included?

Run:  .venv/bin/python experiments/export_benchmark.py --trials 40 --out experiments/results/export_benchmark.json

Each case is tuned (Q-method) into a private tuning database, its best schedule is built as a
Kernel (flexsched.build) and exported (flexsched export's code path), the library's outputs are
checked against the reference, and both are timed in alternating rounds in this process; the
ratio is the Kernel's time over the library's (above 1: the library is faster).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

import flexsched as fs
from codegen.measure import compare_outputs
from explore.side_by_side import Timed, time_side_by_side

CASES = {"GMM256": ("GMM", 256, 256, 256), "GMM1024": ("GMM", 1024, 1024, 1024),
         "C2D-C9": ("C2D", 1, 512, 28, 28, 512, 1, 1, 0)}


def library_call(kernel, directory, arrays):
    """The exported library's entry point bound to these arrays, as a no-argument call."""
    library_path, _ = kernel.save(directory, "bench")
    library = ctypes.CDLL(str(library_path))
    entry = library.bench
    entry.restype = ctypes.c_int
    pointers = [array.ctypes.data_as(ctypes.c_void_p) for array in arrays]

    def call():
        if entry(*pointers) != 0:
            raise RuntimeError("the library could not allocate its scratch memory")
    return call


def run_case(name, task_args, trials, rounds, database):
    task = fs.get_task(*task_args)
    started = time.perf_counter()
    fs.optimize(task, trials=trials, database=database)
    tuning_seconds = time.perf_counter() - started
    kernel = fs.build(task, database=database)
    inputs = task.random_inputs(seed=1)
    reference = task.evaluate(*inputs)
    kernel_arrays = kernel.arguments(inputs)
    library_arrays = kernel.arguments(inputs)
    with tempfile.TemporaryDirectory() as directory:
        call = library_call(kernel, directory, library_arrays)
        call()
        mismatch = compare_outputs(library_arrays[len(inputs):], reference, [t.name for t in task.outputs])
        if mismatch:
            raise SystemExit(f"{name}: the exported library is wrong: {mismatch}")
        kernel(*kernel_arrays)
        mismatch = compare_outputs(kernel_arrays[len(inputs):], reference, [t.name for t in task.outputs])
        if mismatch:
            raise SystemExit(f"{name}: the kernel is wrong: {mismatch}")
        side = time_side_by_side([Timed("kernel", lambda: kernel(*kernel_arrays)), Timed("library", call)], rounds)
    median, low, high = side.ratio("library", "kernel")
    parallel = [extent for _, extent in kernel.compiled.segments if extent]
    return {"case": name, "task": str(task), "kernel_seconds": side.seconds("kernel"),
            "library_seconds": side.seconds("library"), "ratio_kernel_over_library": median,
            "ratio_range": [low, high], "parallel_extents": parallel, "tuning_seconds": tuning_seconds,
            "origin": kernel.origin}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=["GMM256", "GMM1024", "C2D-C9"], choices=sorted(CASES))
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    target = fs.get_target("llvm")
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        database = Path(directory) / "tuning.jsonl"
        for name in args.cases:
            row = run_case(name, CASES[name], args.trials, args.rounds, database)
            rows.append(row)
            print(f"{row['task']}: kernel {row['kernel_seconds'] * 1e3:.4g} ms, library "
                  f"{row['library_seconds'] * 1e3:.4g} ms, kernel / library {row['ratio_kernel_over_library']:.2f} "
                  f"({row['ratio_range'][0]:.2f}-{row['ratio_range'][1]:.2f}), parallel extents "
                  f"{row['parallel_extents']}", flush=True)
    results = {"machine": f"{platform.processor() or platform.machine()}, {target.device}, cpu {target.cpu}",
               "date": time.strftime("%Y-%m-%d"), "trials": args.trials, "rounds": args.rounds, "cases": rows}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))
    geomean = float(np.exp(np.mean([np.log(r["ratio_kernel_over_library"]) for r in rows])))
    print(f"geometric mean kernel / library: {geomean:.2f} over {len(rows)} case(s) ({results['machine']})")


if __name__ == "__main__":
    main()
