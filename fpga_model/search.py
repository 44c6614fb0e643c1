"""A small design search on the model until explore/ lands: random starts, then greedy descent."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from analysis import analyze
from flexsched.target import get_target
from space import generate

from .evaluator import FpgaEvaluator


@dataclass(frozen=True)
class Design:
    """The best design found: its point, config, schedule and the model's verdict."""

    task: str
    target: str
    point: tuple
    config: object        # space.Config
    evaluation: object    # Evaluation
    trials: int           # points evaluated

    def to_dict(self):
        return {"task": self.task, "target": self.target, "config": self.config.to_dict(),
                "trials": self.trials, **self.evaluation.details}


def search_design(task, target="fpga", trials=2000, seed=0, space=None):
    """The best of `trials` model evaluations: a quarter random samples, the rest greedy
    neighbour descent from the best points so far (restarting from a fresh sample when stuck)."""
    target = get_target(target)
    space = space or generate(analyze(task), target)
    evaluator = FpgaEvaluator(target)
    rng = np.random.default_rng(seed)
    seen = {}

    def score(points):
        fresh = [p for p in dict.fromkeys(points) if p not in seen]
        for point, result in zip(fresh, evaluator.evaluate(task, space, fresh[:trials - len(seen)])):
            seen[point] = result
        return [seen[p] for p in points if p in seen]

    score([space.random_point(rng) for _ in range(max(1, trials // 4))])
    current = min(seen, key=lambda p: seen[p].seconds)
    while len(seen) < trials:
        before = len(seen)
        score([neighbour for _, neighbour in space.neighbours(current)])
        best = min(seen, key=lambda p: seen[p].seconds)
        if best != current:
            current = best
        else:  # a local optimum: descend again from a random point
            restart = space.random_point(rng)
            score([restart])
            current = restart
        if len(seen) == before and len(seen) >= space.size:
            break
    best = min(seen, key=lambda p: seen[p].seconds)
    if not math.isfinite(seen[best].seconds):
        raise ValueError(f"no design of {task} fits the {target.device}: {seen[best].error}")
    return Design(str(space.info.task), target.name, best, space.config(best), seen[best], len(seen))
