"""Small statistics the experiments and reports share: rank correlation of predictions with measurements."""

from __future__ import annotations

import math

import numpy as np

from .errors import FlexschedError


class StatsError(FlexschedError, ValueError):
    """Input a statistic cannot be computed from (one line naming the argument at fault)."""


def kendall_tau(a, b):
    """Kendall's tau-b of two equally long sequences of numbers: +1 when they rank every pair
    alike, -1 when they rank every pair oppositely; ties count as scipy.stats.kendalltau counts
    them. NaN when fewer than two pairs can be ranked (too short, or one sequence constant)."""
    x = _vector(a, "a")
    y = _vector(b, "b")
    if len(x) != len(y):
        raise StatsError(f"b: {len(y)} values, but a has {len(x)}")
    if len(x) < 2:
        return math.nan
    # Every pair once, a row at a time: O(n) memory, so thousands of values stay cheap.
    score = untied_x = untied_y = 0
    for row in range(len(x) - 1):
        dx = np.sign(x[row + 1:] - x[row])
        dy = np.sign(y[row + 1:] - y[row])
        score += int(np.sum(dx * dy))
        untied_x += int(np.count_nonzero(dx))
        untied_y += int(np.count_nonzero(dy))
    if untied_x == 0 or untied_y == 0:
        return math.nan
    return score / math.sqrt(untied_x * untied_y)


def _vector(values, name):
    try:
        vector = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise StatsError(f"{name}: expected a sequence of numbers") from None
    if vector.ndim != 1:
        raise StatsError(f"{name}: expected a flat sequence, got {vector.ndim} dimensions")
    if not np.all(np.isfinite(vector)):
        raise StatsError(f"{name}: holds a value that is not finite")
    return vector
