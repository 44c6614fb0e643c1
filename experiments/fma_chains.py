"""How fast one core runs independent FMA chains, by their count, against the static CPU model.

Run:  .venv/bin/python experiments/fma_chains.py --out experiments/results/fma_chains_avx512.json
      FLEXSCHED_LLVM_TARGET="llvm -mattr=-avx512f" .venv/bin/python experiments/fma_chains.py

Each count runs codegen.roof's JIT loop (every chain an accumulator that one FMA a pass updates)
on one core, best of several rounds; its rate is given as a share of the fastest count's. The
model's share is what codegen.cpu_model charges such a loop: chains / FMA_PIPES cycles of pipe
work and the target's FMA latency (Core.fma_latency) of carried chain a pass, combined by its
chained_cycles, against what the larger of the two alone would say.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import time
from pathlib import Path

from codegen import roof
from codegen.cpu_model import FMA_PIPES, Core, chained_cycles
from flexsched.target import get_target

from cpu_benchmark import cpu_description

COUNTS = (2, 4, 6, 8, 10, 12, 16)
ROUNDS = 7


def gflops_one_core(lanes, chains):
    """Best of ROUNDS of the FMA loop of `chains` chains on the calling thread."""
    loop = roof._fma_loop(lanes, chains)
    sink = (ctypes.c_float * lanes)()
    best = 0.0
    for _ in range(ROUNDS):
        started = time.perf_counter()
        loop(roof.FMA_ITERATIONS, sink)
        best = max(best, 2.0 * lanes * chains * roof.FMA_ITERATIONS / (time.perf_counter() - started) / 1e9)
    return best


def model_share(chains, latency):
    """(the model's share of the pipes' rate, the larger bound's share) for a pass of `chains` FMAs
    whose chains take `latency` cycles a step."""
    pipes = chains / FMA_PIPES
    return pipes / chained_cycles(pipes, latency), pipes / max(pipes, latency)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None, help="write the figures here as JSON")
    args = parser.parse_args()
    target = get_target("llvm")
    lanes, latency = target.vector_lanes, Core.of(target).fma_latency
    measured = {chains: gflops_one_core(lanes, chains) for chains in COUNTS}
    fastest = max(measured.values())
    rows = []
    print(f"{cpu_description()}; {lanes} float32 lanes; the model's FMA latency {latency} cycles")
    for chains, gflops in measured.items():
        model, larger = model_share(chains, latency)
        rows.append({"chains": chains, "gflops": gflops, "share": gflops / fastest, "model_share": model,
                     "larger_bound_share": larger})
        print(f"{chains:3} chains {gflops:7.1f} GFLOPS  {gflops / fastest:.2f} of the fastest; model {model:.2f}, "
              f"larger bound alone {larger:.2f}", flush=True)
    if args.out:
        figures = {"cpu": cpu_description(), "lanes": lanes, "fma_latency": latency, "rows": rows}
        Path(args.out).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
