"""Each schedule of points files built twice, scheduled by the host CPU's own LLVM model and as shipped
(codegen.cpu_backend.scheduling_cpu), then timed side by side with PyTorch on the same buffers;
`--models NAME ...` adds builds scheduled by other CPUs' models (same instructions, the host's features).

Run:  .venv/bin/python experiments/scheduling_model.py experiments/points/{gmm,c3,c9,c11}_zen5_run_bests.json \
          experiments/points/c7_zen_spilled_tile.json --out experiments/results/scheduling_model_zen5_avx512.json
      .venv/bin/python experiments/scheduling_model.py --bests experiments/results/cpu_benchmark_q200_zen5_avx512.json \
          --out experiments/results/scheduling_model_bests_zen5_avx512.json
      .venv/bin/python experiments/scheduling_model.py --bests experiments/results/cpu_benchmark_q200_intel_49fb347_avx512.json \
          --rounds 5 --models sapphirerapids x86-64-v4 --out experiments/results/scheduling_model_bests_intel_avx512.json

On a CPU whose code the shipped rule schedules by its own model the two builds are the same code
(experiments/build_variants.py says so and times nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from unittest import mock

from codegen import cpu_backend

from build_variants import main


def scheduled_by(model):
    """A context in which every CPU's code is scheduled by `model` (None: each CPU's own)."""
    return mock.patch.object(cpu_backend, "scheduling_cpu", lambda cpu, features: model or cpu)


if __name__ == "__main__":
    models = argparse.ArgumentParser(add_help=False)
    models.add_argument("--models", nargs="*", default=[])
    known, rest = models.parse_known_args()
    sys.argv[1:] = rest
    main(__doc__.split("\n")[0], (("own model", functools.partial(scheduled_by, None)),
                                  ("shipped", contextlib.nullcontext),
                                  *((name, functools.partial(scheduled_by, name)) for name in known.models)))
