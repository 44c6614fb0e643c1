"""Each schedule of points files built twice, scheduled by the host CPU's own LLVM model and as shipped
(codegen.cpu_backend.scheduling_cpu), then timed side by side with PyTorch on the same buffers.

Run:  .venv/bin/python experiments/scheduling_model.py experiments/points/{gmm,c3,c9,c11}_zen5_run_bests.json \
          experiments/points/c7_zen_spilled_tile.json --out experiments/results/scheduling_model_zen5_avx512.json
      .venv/bin/python experiments/scheduling_model.py --bests experiments/results/cpu_benchmark_q200_zen5_avx512.json \
          --out experiments/results/scheduling_model_bests_zen5_avx512.json

On a CPU whose code the shipped rule schedules by its own model the two builds are the same code
(experiments/build_variants.py says so and times nothing).
"""

from __future__ import annotations

import contextlib
import functools
from unittest import mock

from codegen import cpu_backend

from build_variants import main

# Every CPU scheduled by its own LLVM model.
own_model = functools.partial(mock.patch.object, cpu_backend, "scheduling_cpu", lambda cpu, features: cpu)

if __name__ == "__main__":
    main(__doc__.split("\n")[0], (("own model", own_model), ("shipped", contextlib.nullcontext)))
