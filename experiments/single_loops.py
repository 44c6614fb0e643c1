"""Each schedule of points files built with its one-iteration serial loops emitted as loops (for LLVM to
fold away) and as their bodies with the counter at 0 (codegen.llvm_backend.emitted_once), then timed side
by side with PyTorch on the same buffers.

Run:  .venv/bin/python experiments/single_loops.py --bests experiments/results/cpu_benchmark_q200_zen5_ir_text_fixed_avx512.json \
          --out experiments/results/single_loops_zen5_avx512.json

experiments/build_cost.py measures what the change saves in building; this measures what the kernels it
makes run like. A schedule with no such loop, or whose two builds make the same code, is timed once.
"""

from __future__ import annotations

import contextlib
import functools
from unittest import mock

from codegen import llvm_backend

from build_variants import main

# The back end as if every serial loop were emitted as a loop.
kept_as_loops = functools.partial(mock.patch.object, llvm_backend, "emitted_once", lambda begin, end: False)

if __name__ == "__main__":
    main(__doc__.split("\n")[0], (("loops", kept_as_loops), ("bodies", contextlib.nullcontext)))
