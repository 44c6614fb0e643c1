"""Evaluators: turn points of a space into Evaluations (measured or estimated seconds per run).

The search never knows how a point was judged: CPU measurement, the FPGA model and, later, the
GPU back end are all Evaluators. A failure (a build error, a wrong answer, a timeout, a design
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

    @abstractmethod
    def evaluate(self, task, space, points) -> list[Evaluation]:
        """One Evaluation per point, in order."""

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


class CpuEvaluator(Evaluator):
    """Builds, checks and times each point's kernel in codegen.measure's isolated worker."""

    name = "cpu"

    def __init__(self, timeout_s=60.0, warmup=1, repeats=3, min_run_seconds=0.01, seed=0,
                 memory_limit_bytes=16 * 2**30, runner=None, slow_run_seconds=math.inf):
        from codegen.measure import DEFAULT_RUNNER, Measurer

        # The worker starts on the first candidate, so creating an evaluator costs nothing.
        self._measurer = Measurer(timeout_s=timeout_s, warmup=warmup, repeats=repeats,
                                  min_run_seconds=min_run_seconds, seed=seed,
                                  memory_limit_bytes=memory_limit_bytes, runner=runner or DEFAULT_RUNNER,
                                  slow_run_seconds=slow_run_seconds)

    def evaluate(self, task, space, points):
        from codegen.measure import MeasureInput

        inputs = [MeasureInput.of(task, space.schedule(point)) for point in points]
        return [Evaluation(result.status, result.seconds, result.error, result.to_dict())
                for result in self._measurer.measure(inputs)]

    def close(self):
        self._measurer.close()


def evaluator_for(target, **options):
    """The evaluator for a target's kind: measurement on the CPU, the FPGA model for FPGAs."""
    target = get_target(target)
    if target.kind == "cpu":
        return CpuEvaluator(**options)
    if target.kind == "fpga":
        try:
            from fpga_model.evaluator import FpgaEvaluator
        except ImportError as err:
            raise ExplorationError(f"no FPGA evaluator available (fpga_model.evaluator: {err})") from None
        return FpgaEvaluator(target, **options)
    raise ExplorationError(f"no evaluator for target '{target.name}' (kind '{target.kind}') yet; "
                           "evaluators exist for kinds: cpu, fpga")
