"""The evaluator interface: points of a space in, Evaluations (measured or estimated seconds per run) out."""

# Measurement on a CPU or GPU and the static GPU model (codegen) and the FPGA model (fpga_model) are
# Evaluators, registered per target kind in flexsched.plugins; the search never knows which judged a
# point. A failure (a build error, a wrong answer, a timeout, a design the model rejects) is an
# Evaluation with an error, never an exception. The interface sits in the bottom layer so that the
# packages implementing it and explore/, which uses it, all import it from below.

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Mapping

from .errors import FlexschedError


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

    def check(self, task):
        """Raise ExplorationError if no point of task can be judged here (called before a search)."""

    @abstractmethod
    def evaluate(self, task, space, points) -> list[Evaluation]:
        """One Evaluation per point, in order."""

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
