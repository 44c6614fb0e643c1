"""codegen's evaluators: candidates measured on the CPU or a GPU, or priced by the static GPU model.

codegen.targets registers them for the cpu and gpu target kinds (flexsched.plugins); explore/ gets
them from there and never imports this module.
"""

from __future__ import annotations

import math

from flexsched.evaluation import Evaluation, Evaluator, ExplorationError
from flexsched.target import get_target


class MeasureEvaluator(Evaluator):
    """Builds, checks and times each point's kernel on the target's device, in codegen.measure's
    isolated worker (the CPU here, or a GPU through cupy). A task whose reference outputs cannot
    be computed in the worker's time or memory is an ExplorationError at its first evaluation."""

    name = "measure"

    def __init__(self, target="llvm", timeout_s=60.0, warmup=1, repeats=3, min_run_seconds=0.01, seed=0,
                 memory_limit_bytes=None, runner=None, slow_run_seconds=math.inf, reference_timeout_s=None):
        from .measure import DEFAULT_REFERENCE_TIMEOUT_S, DEFAULT_RUNNER, Measurer

        self.target = get_target(target)
        # The worker starts on the first candidate, so creating an evaluator costs nothing.
        self._measurer = Measurer(timeout_s=timeout_s, warmup=warmup, repeats=repeats,
                                  min_run_seconds=min_run_seconds, seed=seed,
                                  memory_limit_bytes=memory_limit_bytes, runner=runner or DEFAULT_RUNNER,
                                  slow_run_seconds=slow_run_seconds, kinds=(self.target.kind,),
                                  reference_timeout_s=reference_timeout_s or DEFAULT_REFERENCE_TIMEOUT_S)

    def evaluate(self, task, space, points):
        from .measure import MeasureInput, ReferenceFailure

        inputs = [MeasureInput.of(task, space.schedule(point), self.target) for point in points]
        try:
            results = self._measurer.measure(inputs)
        except ReferenceFailure as err:  # no candidate of this task could be checked: stop the search
            raise ExplorationError(f"{err}, so no candidate can be checked") from None
        return [Evaluation(result.status, result.seconds, result.error, result.to_dict()) for result in results]

    def close(self):
        self._measurer.close()


class CpuEvaluator(MeasureEvaluator):
    """Measurement on this CPU (the host, or `llvm` with fewer features than the host has)."""

    name = "cpu"

    def __init__(self, target="llvm", **options):
        super().__init__(target, **options)


class GpuModelEvaluator(Evaluator):
    """Predicts each point's time on a GPU with the static model (codegen.gpu_model): CUDA C
    compiled by nvcc to PTX, no GPU needed. Points come in batches, compiled side by side."""

    name = "gpu-model"
    judged_by = "modelled"
    batch_size = 8

    def __init__(self, target="cuda", workers=2):
        from flexsched.target import gpu_device

        self.target = get_target(target)
        self.device = gpu_device(self.target)
        self.workers = workers

    def evaluate(self, task, space, points):
        from .cuda_backend import modules_for
        from .gpu_model import ModelError, estimate

        modules = modules_for(task, [space.schedule(point) for point in points], self.target, self.workers)
        results = []
        for module in modules:
            if isinstance(module, Exception):
                results.append(Evaluation("build_error", math.inf, _one_line(module)))
                continue
            try:
                predicted = estimate(module, self.device)
            except ModelError as err:
                results.append(Evaluation("rejected", math.inf, _one_line(err)))
                continue
            results.append(Evaluation("ok", predicted.seconds, "", predicted.to_dict()))
        return results


def _one_line(err):
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text if len(text) <= 400 else text[:397] + "..."
