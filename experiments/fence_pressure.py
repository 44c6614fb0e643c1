"""Each schedule of points files built with and without fences between unrolled reduction steps whose
shared loads would outgrow the registers beside the tile (codegen.register_pressure), then timed side by
side with PyTorch on the same buffers.

Run:  .venv/bin/python experiments/fence_pressure.py experiments/points/c1_tiles.json \
          --out experiments/results/fence_pressure_c1_zen5_avx512.json
      .venv/bin/python experiments/fence_pressure.py --bests experiments/results/cpu_benchmark_q200_zen5_native_pool_avx512.json

"Without" is the back end with the shared loads left uncounted: a tile is then fenced only where its
accumulators take more than half the vector registers. A schedule the rule leaves alone is the same code
both ways (experiments/build_variants.py says so and times nothing).
"""

from __future__ import annotations

import contextlib
import functools
from unittest import mock

from codegen import llvm_backend

from build_variants import main

# The back end as if no unrolled steps shared a load.
uncounted = functools.partial(mock.patch.object, llvm_backend, "shared_load_registers",
                              lambda loop, register_lanes, skip=(): 0)

if __name__ == "__main__":
    main(__doc__.split("\n")[0], (("without", uncounted), ("with", contextlib.nullcontext)))
