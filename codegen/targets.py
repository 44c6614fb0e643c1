"""What codegen plugs in for the cpu and gpu target kinds (flexsched.plugins): evaluators and back ends."""

# Importing this registers names only: llvmlite, cupy and the measurement machinery load when an
# evaluator is made or a back end is first asked for.

from __future__ import annotations

from flexsched import plugins
from flexsched.evaluation import ExplorationError


def _cpu_measure(target, **options):
    from .evaluators import CpuEvaluator

    return CpuEvaluator(target, **options)


def _gpu_measure(target, **options):
    from . import cuda_runtime
    from .evaluators import MeasureEvaluator

    reason = cuda_runtime.unavailable_reason()
    if reason:
        raise ExplorationError(f"{reason}; tune with the static GPU model instead (evaluator 'model', "
                               "flexsched tune ... --evaluator model)")
    return MeasureEvaluator(target, **options)


def _cpu_model(target, **options):
    from .evaluators import CpuModelEvaluator

    return CpuModelEvaluator(target, **options)


def _gpu_model(target, **options):
    from .evaluators import GpuModelEvaluator

    return GpuModelEvaluator(target, **options)


def _features(task, schedule, target, info=None):
    from .features import features_of

    return features_of(task, schedule, target, info)


plugins.register_evaluator("cpu", "measure", _cpu_measure, default=True)
plugins.register_evaluator("cpu", "model", _cpu_model)
plugins.register_evaluator("gpu", "measure", _gpu_measure, default=True)
plugins.register_evaluator("gpu", "model", _gpu_model)
plugins.register_backend("cpu", "codegen.cpu_backend")
plugins.register_backend("gpu", "codegen.cuda_backend")
plugins.register_featurizer("cpu", _features)
plugins.register_featurizer("gpu", _features)
