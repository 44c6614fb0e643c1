"""Gradient-boosted trees over a candidate's feature vector, ranked pairwise within each task (as TVM does)."""

# xgboost is an optional extra (pip install 'flexsched[cost-models]'); it is imported on first use.

from __future__ import annotations

import itertools
import json

import numpy as np

from .cost_model import CostModel, CostModelError, relative_speed

DEFAULT_PARAMETERS = {
    "objective": "rank:pairwise",   # the order within a task is what a search needs, not the time itself
    "max_depth": 6,
    "eta": 0.2,
    "min_child_weight": 1,
    "subsample": 1.0,
    "lambda": 1.0,
    "nthread": 1,                   # the trees are small; a second thread would only compete with measurement
    "verbosity": 0,
}
ROUNDS = 80


def _xgboost():
    try:
        import xgboost
    except ImportError:
        raise CostModelError("the 'xgb' cost model needs xgboost: pip install 'flexsched[cost-models]'") from None
    return xgboost


class XgbModel(CostModel):
    """xgboost trees on CandidateFeatures.vector with a pairwise rank objective (or squared error)."""

    name = "xgb"

    def __init__(self, objective="rank:pairwise", rounds=ROUNDS, seed=0):
        self.parameters = {**DEFAULT_PARAMETERS, "objective": objective, "seed": seed}
        self.rounds = rounds
        self._booster = None
        self._base = None     # a saved model's trees: refits add trees on top of them
        self._width = None

    @property
    def trained(self):
        return self._booster is not None

    def _matrix(self, features):
        matrix = np.stack([f.vector for f in features]).astype(np.float32)
        if self._width is not None and matrix.shape[1] != self._width:
            raise CostModelError(f"the model was trained on {self._width} features per candidate, these have "
                                 f"{matrix.shape[1]}: train it again with this flexsched")
        return matrix

    def fit(self, samples):
        if not samples:
            return
        xgboost = _xgboost()
        order = sorted(range(len(samples)), key=lambda i: samples[i].group)  # xgboost wants groups contiguous
        ordered = [samples[i] for i in order]
        matrix = self._matrix([s.features for s in ordered])
        data = xgboost.DMatrix(matrix, label=relative_speed(ordered))
        groups = [len(list(members)) for _, members in itertools.groupby(s.group for s in ordered)]
        data.set_group(groups)
        self._width = matrix.shape[1]
        # A refit starts from the saved model's trees (never from the last fit's, which saw these samples already).
        self._booster = xgboost.train(self.parameters, data, num_boost_round=self.rounds, xgb_model=self._base)

    def scores(self, features):
        if not self.trained:
            return np.zeros(len(features), dtype=np.float32)
        xgboost = _xgboost()
        return self._booster.predict(xgboost.DMatrix(self._matrix(features)))

    def state(self):
        raw = None if self._booster is None else json.loads(bytes(self._booster.save_raw("json")))
        return {"parameters": self.parameters, "rounds": self.rounds, "width": self._width, "booster": raw}

    def restore(self, state):
        xgboost = _xgboost()
        self.parameters = dict(state["parameters"])
        self.rounds = int(state["rounds"])
        self._width = state.get("width")
        self._booster = self._base = None
        if state.get("booster") is not None:
            self._booster = xgboost.Booster()
            self._booster.load_model(bytearray(json.dumps(state["booster"]).encode()))
            self._base = self._booster


MODEL = XgbModel
