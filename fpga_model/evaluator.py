"""The FPGA model as an evaluator: points of a space in, estimated latencies out."""

from __future__ import annotations

import math

from flexsched.evaluation import Evaluation, Evaluator

from .devices import device_of_target
from .model import FpgaModel, ModelParams


class FpgaEvaluator(Evaluator):
    """Estimates designs with the analytical model; thousands of points a second, no hardware."""

    name = "fpga-model"
    judged_by = "modelled"

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
