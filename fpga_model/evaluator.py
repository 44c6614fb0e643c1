"""The FPGA model as an evaluator: points of a space in, estimated latencies out.

Evaluation is a local stand-in for explore.evaluator.Evaluation (written in parallel): the same
fields, so that on merge this module imports that one instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .devices import device_of_target
from .model import FpgaModel, ModelParams


@dataclass(frozen=True)
class Evaluation:
    """One point's result: a failure is a value with an infinite time, never an exception."""

    status: str              # "ok", "rejected" (does not fit the device) or "error"
    seconds: float           # estimated latency; math.inf unless ok
    error: str = ""          # one line; "" when ok
    details: dict = field(default_factory=dict)  # JSON-ready: gflops, latency_s, cycles, dsp, bram, bound, ...

    @property
    def ok(self):
        return self.status == "ok"


class FpgaEvaluator:
    """Estimates designs with the analytical model; thousands of points a second, no hardware."""

    name = "fpga-model"

    def __init__(self, target, params=ModelParams()):
        self.target = target
        self.device = device_of_target(target)
        self.params = params
        self._models = {}  # per task: the analysis and access tables are built once

    def model(self, task, info=None):
        key = repr(task.ref())
        if key not in self._models:
            self._models[key] = FpgaModel(task, self.device, self.params, info=info)
        return self._models[key]

    def evaluate(self, task, space, points):
        """One Evaluation per point of space (a Space of this task on an fpga target)."""
        model = self.model(task, space.info)
        return [self.evaluate_config(model, space.config(point)) for point in points]

    @staticmethod
    def evaluate_config(model, config):
        try:
            estimate = model.estimate(config)
        except (KeyError, ValueError, TypeError, ZeroDivisionError) as err:  # a malformed config
            return Evaluation("error", math.inf, f"fpga model: {type(err).__name__}: {err}")
        details = estimate.details()
        if not estimate.feasible:
            return Evaluation("rejected", math.inf, estimate.reason, details)
        return Evaluation("ok", estimate.seconds, "", details)

    def close(self):
        pass
