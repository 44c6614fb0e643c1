"""Page faults per call of a CPU benchmark's best kernels: whether their heap scratch is mapped
afresh between calls.

Run:  .venv/bin/python experiments/scratch_faults.py experiments/results/cpu_benchmark_q200_emr_cands_avx512.json \
          --cases C3 C6 C9 C11
      GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072 .venv/bin/python experiments/scratch_faults.py ...

A kernel's scratch buffers over 16 KiB come from the heap. Allocated and freed on every call of
each parallel chunk, as they once were, they were mapped afresh on every call when glibc's mmap
threshold was held at its default (the second command; glibc normally raises it after the first
large free), every page faulting in again. Kept from call to call by their allocation site, as now,
later calls fault in nothing in either state. Each case's best schedule is rebuilt (isolated build),
checked against the reference, warmed up, then called `--calls` times back to back: the figures
are the seconds and the minor page faults (getrusage) per call. Nothing is compared with PyTorch.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

from explore.finalists import checked_kernel
from flexsched.target import get_target

from cpu_benchmark import cases, cpu_description

WARM_UP_CALLS = 20


def faults_per_call(kernel, arrays, calls):
    """(seconds per call, minor page faults per call) over `calls` calls after a warm-up."""
    for _ in range(WARM_UP_CALLS):
        kernel(*arrays)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    started = time.perf_counter()
    for _ in range(calls):
        kernel(*arrays)
    seconds = (time.perf_counter() - started) / calls
    return seconds, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", help="a results file of experiments/cpu_benchmark.py")
    parser.add_argument("--cases", nargs="*", default=None, help="its cases (default: all)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", help="write the figures to this JSON file")
    args = parser.parse_args()
    rows = {row["case"]: row for row in json.loads(Path(args.results).read_text())}
    names = args.cases or list(rows)
    unknown = [name for name in names if name not in rows]
    if unknown:
        parser.error(f"{args.results} has no case {', '.join(unknown)}")
    tasks, target = cases(), get_target("llvm")
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    print(f"{cpu_description()}; GLIBC_TUNABLES={tunables!r}")
    out = []
    for name in names:
        task = tasks[name]
        inputs = task.random_inputs(seed=1)
        kernel, arrays = checked_kernel(task, json.dumps(rows[name]["best_schedule"]), target, inputs,
                                        task.evaluate(*inputs))   # a wrong kernel raises
        seconds, faults = faults_per_call(kernel, arrays, args.calls)
        out.append({"case": name, "ms_per_call": seconds * 1e3, "faults_per_call": faults})
        print(f"{name:4} {seconds * 1e3:9.3f} ms a call, {faults:9.1f} page faults a call", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"results": args.results, "cpu": cpu_description(),
                                              "glibc_tunables": tunables, "cases": out}, indent=1))


if __name__ == "__main__":
    main()
