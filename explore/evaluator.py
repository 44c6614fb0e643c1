"""Evaluators: turn points of a space into Evaluations (measured or estimated seconds per run).

The search never knows how a point was judged: measurement on the CPU or a GPU, the FPGA model
and the static GPU model are all Evaluators. A failure (a build error, a wrong answer, a timeout, a design
the model rejects) is an Evaluation with an error, never an exception.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Mapping

from flexsched.errors import FlexschedError
from flexsched.target import get_target


class ExplorationError(FlexschedError, RuntimeError):
    """A search that cannot go on: no evaluator for a target, every warm-up point failed, ..."""


@dataclass(frozen=True)
class Evaluation:
    """How one point did: status "ok" or a failure kind, seconds per run (inf unless ok)."""

    status: str
    seconds: float = math.inf
    error: str = ""
    details: Mapping = field(default_factory=dict)  # JSON-ready extras (a MeasureResult.to_dict(), ...)

    @property
    def ok(self):
        return self.status == "ok"

    def to_dict(self):
        return {"status": self.status, "seconds": self.seconds if math.isfinite(self.seconds) else None,
                "error": self.error, "details": dict(self.details)}

    @classmethod
    def from_dict(cls, data):
        seconds = data.get("seconds")
        return cls(data["status"], math.inf if seconds is None else float(seconds), data.get("error", ""),
                   dict(data.get("details") or {}))


class Evaluator(ABC):
    """Turns points of a space into Evaluations; batched so measurement can reuse a worker."""

    name: str = "evaluator"
    judged_by: str = "measured"   # or "modelled": records say which, so the two never mix

    @abstractmethod
    def evaluate(self, task, space, points) -> list[Evaluation]:
        """One Evaluation per point, in order."""

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


class MeasureEvaluator(Evaluator):
    """Builds, checks and times each point's kernel on the target's device, in codegen.measure's
    isolated worker (the CPU here, or a GPU through cupy). A task whose reference outputs cannot
    be computed in the worker's time or memory is an ExplorationError at its first evaluation."""

    name = "measure"

    def __init__(self, target="llvm", timeout_s=60.0, warmup=1, repeats=3, min_run_seconds=0.01, seed=0,
                 memory_limit_bytes=None, runner=None, slow_run_seconds=math.inf, reference_timeout_s=None):
        from codegen.measure import DEFAULT_REFERENCE_TIMEOUT_S, DEFAULT_RUNNER, Measurer

        self.target = get_target(target)
        # The worker starts on the first candidate, so creating an evaluator costs nothing.
        self._measurer = Measurer(timeout_s=timeout_s, warmup=warmup, repeats=repeats,
                                  min_run_seconds=min_run_seconds, seed=seed,
                                  memory_limit_bytes=memory_limit_bytes, runner=runner or DEFAULT_RUNNER,
                                  slow_run_seconds=slow_run_seconds, kinds=(self.target.kind,),
                                  reference_timeout_s=reference_timeout_s or DEFAULT_REFERENCE_TIMEOUT_S)

    def evaluate(self, task, space, points):
        from codegen.measure import MeasureInput, ReferenceFailure

        inputs = [MeasureInput.of(task, space.schedule(point), self.target) for point in points]
        try:
            results = self._measurer.measure(inputs)
        except ReferenceFailure as err:  # no candidate of this task could be checked: stop the search
            raise ExplorationError(f"{err}, so no candidate can be checked") from None
        return [Evaluation(result.status, result.seconds, result.error, result.to_dict()) for result in results]

    def close(self):
        self._measurer.close()


class CpuEvaluator(MeasureEvaluator):
    """Measurement on this CPU."""

    name = "cpu"

    def __init__(self, **options):
        super().__init__("llvm", **options)


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
        from codegen.cuda_backend import modules_for
        from codegen.gpu_model import ModelError, estimate

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


EVALUATORS = ("measure", "model")


def evaluator_for(target, evaluator=None, **options):
    """The evaluator for a target: "measure" (the CPU, or a GPU where one is present) or "model"
    (the FPGA model; the static GPU model). None picks measurement, except on FPGAs."""
    target = get_target(target)
    if evaluator not in (None, *EVALUATORS):
        raise ExplorationError(f"unknown evaluator '{evaluator}'; choose one of {', '.join(EVALUATORS)}")
    if target.kind == "cpu":
        if evaluator == "model":
            raise ExplorationError("no model evaluator for CPU targets; use measure")
        return CpuEvaluator(**options)
    if target.kind == "fpga":
        if evaluator == "measure":
            raise ExplorationError("FPGA designs are estimated by the model, not measured; use model")
        try:
            from fpga_model.evaluator import FpgaEvaluator
        except ImportError as err:
            raise ExplorationError(f"no FPGA evaluator available (fpga_model.evaluator: {err})") from None
        return FpgaEvaluator(target, **options)
    if target.kind == "gpu":
        if evaluator == "model":
            return GpuModelEvaluator(target, **options)
        from codegen.cuda_runtime import unavailable_reason

        reason = unavailable_reason()
        if reason:
            raise ExplorationError(f"{reason}; tune with the static GPU model instead (evaluator 'model', "
                                   "flexsched tune ... --evaluator model)")
        return MeasureEvaluator(target, **options)
    raise ExplorationError(f"no evaluator for target '{target.name}' (kind '{target.kind}'); "
                           "evaluators exist for kinds: cpu, gpu, fpga")
