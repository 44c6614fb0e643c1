"""How much of a parallel kernel's call is the thread pool's: each searched best of a benchmark
results file, run by the native pool (codegen.runtime) and by a pool of Python threads that hand
out chunks under the GIL, side by side.

Run:  .venv/bin/python experiments/parallel_dispatch.py \
          experiments/results/cpu_benchmark_q200_zen5_generic_schedule_run2_avx512.json \
          --out experiments/results/parallel_dispatch_zen5_avx512.json     (--cases C3 C11 ...: only those)

The Python pool is the one the native pool replaced: a ThreadPoolExecutor whose helpers sleep
between calls and take chunk numbers from an itertools.count, calling each chunk through ctypes.
Every kernel is checked against the reference evaluator first; the figures are time per call and
the ratio of the Python pool's time to the native one's (above 1: the native pool is faster).
"""

from __future__ import annotations

import argparse
import itertools
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from codegen import runtime
from codegen.kernel import build
from codegen.measure import compare_outputs
from explore.side_by_side import Timed, time_side_by_side
from flexsched.schedule import Schedule

from cpu_benchmark import cases, cpu_description


class PythonThreadPool:
    """Helpers woken per call through a ThreadPoolExecutor, chunks taken under the GIL."""

    def __init__(self, threads):
        self.threads = threads
        self._executor = ThreadPoolExecutor(max_workers=max(1, threads - 1))

    def run(self, kernel, extent, buffers_address):
        chunks = runtime.split_range(extent, self.threads * runtime.CHUNKS_PER_THREAD)
        taken = itertools.count()

        def work():
            for index in iter(lambda: next(taken), None):
                if index >= len(chunks):
                    return
                kernel(*chunks[index], buffers_address)

        futures = [self._executor.submit(work) for _ in range(min(self.threads, len(chunks)) - 1)]
        work()
        for future in futures:
            if not future.cancel():
                future.result()


def on_pool(pool, kernel, arrays):
    """A call of kernel with its parallel segments run by pool."""
    def call():
        runtime._pool = pool
        kernel(*arrays)
    return call


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", help="a results file of experiments/cpu_benchmark.py")
    parser.add_argument("--cases", nargs="*", default=None)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out", help="write the figures to this JSON file")
    args = parser.parse_args()
    native = runtime.default_pool()
    python = PythonThreadPool(native.threads)
    rows = []
    print(f"{cpu_description()}, {args.rounds} alternating rounds")
    for row in json.loads(Path(args.results).read_text()):
        if args.cases and row["case"] not in args.cases:
            continue
        task = cases()[row["case"]]
        kernel = build(task, Schedule.from_json(json.dumps(row["best_schedule"])))
        inputs = task.random_inputs(seed=1)
        runtime._pool = native
        mismatch = compare_outputs([kernel.backend.to_host(out) for out in kernel.run(*inputs)],
                                   task.evaluate(*inputs), [t.name for t in task.outputs])
        if mismatch:   # a fast wrong kernel is no result
            raise RuntimeError(f"{row['case']}: {mismatch}")
        arrays = kernel.arguments(inputs)
        side = time_side_by_side([Timed("native pool", on_pool(native, kernel, arrays)),
                                  Timed("Python pool", on_pool(python, kernel, arrays))], args.rounds)
        median, low, high = side.ratio("native pool", "Python pool")
        result = {"case": row["case"], "native_us": side.seconds("native pool") * 1e6,
                  "python_us": side.seconds("Python pool") * 1e6, "python_over_native": median,
                  "ratio_min": low, "ratio_max": high}
        rows.append(result)
        print(f"  {row['case']:4} native {result['native_us']:8.0f} us, Python pool {result['python_us']:8.0f} us: "
              f"{median:.3f} ({low:.3f}-{high:.3f})", flush=True)
    runtime._pool = native
    if args.out:
        Path(args.out).write_text(json.dumps({"cpu": cpu_description(), "results": args.results,
                                              "rounds": args.rounds, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
