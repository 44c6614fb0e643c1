"""A cheap, deterministic stand-in for measurement: seconds are an analytic function of the config.

Split knobs score best with every factor 4 (a smooth landscape the local moves can climb);
points packing A (or pad) at level S2 fail as wrong answers, so about a quarter of points fail.
Every call is kept, so tests can check what was evaluated and how often.
"""

import math
import time

from explore.evaluator import Evaluation, Evaluator

FAILING = ("O.pack.A", "S2")


def fake_seconds(config):
    """1 ms times one plus each split factor's log2-distance from 4."""
    values = config.to_dict()
    distance = sum(abs(math.log2(factor) - 2) for name, value in values.items() if ".split." in name
                   for factor in value)
    return 1e-3 * (1.0 + distance)


class FakeEvaluator(Evaluator):
    name = "fake"

    def __init__(self, fail_first=0, always_fail=False, delay=0.0):
        self.calls = []          # every point evaluated, in order
        self.batches = 0
        self.fail_first = fail_first
        self.always_fail = always_fail
        self.delay = delay       # seconds per point, so concurrent runs overlap as real ones do

    def evaluate(self, task, space, points):
        self.batches += 1
        time.sleep(self.delay * len(points))
        results = []
        for point in points:
            self.calls.append(tuple(point))
            config = space.config(point)
            if self.always_fail or len(self.calls) <= self.fail_first:
                results.append(Evaluation("build_error", error=f"fake build failure #{len(self.calls)}"))
            elif config.get(FAILING[0]) == FAILING[1]:
                results.append(Evaluation("wrong_answer", error="output O differs at [0, 0]"))
            else:
                results.append(Evaluation("ok", fake_seconds(config), details={"fake": True}))
        return results


class ScriptedEvaluator(Evaluator):
    """GFLOPS set by a function of the call count: for stopping rules."""

    name = "scripted"

    def __init__(self, flops, gflops_of_call):
        self.flops = flops
        self.gflops_of_call = gflops_of_call
        self.calls = 0

    def evaluate(self, task, space, points):
        results = []
        for _ in points:
            gflops = self.gflops_of_call(self.calls)
            self.calls += 1
            results.append(Evaluation("ok", self.flops / (gflops * 1e9)))
        return results
