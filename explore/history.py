"""The set H of evaluated points, their performance E, the best E*, and the start picker.

E is GFLOPS (the analysed FLOPs over the seconds per run; 0 for a failed point), so a bigger E
is better and every formula below is scale-free. Points are keyed twice: by their index tuple
and by their schedule's JSON, because different points can give the same schedule (the knobs
of an inlined producer are dead); a point whose schedule was already evaluated is never
evaluated again.

Start picker (the paper's simulated-annealing heuristic, sec. 5.1): a point p of H is a start
with probability proportional to exp(-gamma * (E* - E_p) / E*). The best point has weight 1;
a point at half the best has exp(-gamma / 2). Several starts are drawn without replacement.
Only successful points can be starts (a failed point has no E_p to measure a reward against).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .evaluator import Evaluation


@dataclass(frozen=True)
class Entry:
    """One evaluated point of H."""

    trial: int            # 0-based order of evaluation (resumed entries keep their logged order)
    point: tuple
    schedule_key: str     # the schedule's JSON: two points with one key are one candidate
    evaluation: Evaluation
    gflops: float         # E: 0.0 unless ok
    elapsed: float        # seconds since the search started when this point's result came back
    origin: tuple | None = None  # (start point, direction) the point was reached by, if any

    @property
    def ok(self):
        return self.evaluation.ok

    @property
    def seconds(self):
        return self.evaluation.seconds


class History:
    """H: evaluated points in order, looked up by point or schedule; E* and the start picker."""

    def __init__(self, flops, bytes_moved=0):
        self.flops = float(flops)
        self.bytes_moved = float(bytes_moved)   # the task's compulsory traffic, for GB/s
        self.entries: list[Entry] = []
        self._by_key: dict[str, Entry] = {}
        self._visited: dict[tuple, Entry] = {}  # every point known to map to an evaluated schedule
        self._best: Entry | None = None

    def __len__(self):
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)

    def gflops_of(self, evaluation):
        return self.flops / evaluation.seconds / 1e9 if evaluation.ok and evaluation.seconds > 0 else 0.0

    def add(self, point, schedule_key, evaluation, elapsed, origin=None):
        """Record a newly evaluated point; adding a point or schedule twice is a bug in the caller."""
        point = tuple(point)
        if point in self._visited or schedule_key in self._by_key:
            raise ValueError(f"point {point} (or its schedule) was already evaluated")
        entry = Entry(len(self.entries), point, schedule_key, evaluation, self.gflops_of(evaluation),
                      float(elapsed), origin)
        self.entries.append(entry)
        self._by_key[schedule_key] = entry
        self._visited[point] = entry
        if entry.ok and (self._best is None or entry.gflops > self._best.gflops):
            self._best = entry
        return entry

    def alias(self, point, schedule_key):
        """Note that `point` gives an already evaluated schedule; returns that entry."""
        entry = self._by_key[schedule_key]
        self._visited[tuple(point)] = entry
        return entry

    def is_visited(self, point):
        return tuple(point) in self._visited

    def entry_for_key(self, schedule_key):
        return self._by_key.get(schedule_key)

    def entry_of(self, point):
        return self._visited.get(tuple(point))

    @property
    def best(self):
        """The best successful entry, or None while nothing has succeeded."""
        return self._best

    @property
    def best_gflops(self):
        return self._best.gflops if self._best else 0.0

    @property
    def best_gbps(self):
        """Compulsory bytes per second of the best entry, in GB/s (0 while nothing has succeeded)."""
        return self.bytes_moved / self._best.seconds / 1e9 if self._best and self._best.seconds > 0 else 0.0

    @property
    def num_ok(self):
        return sum(entry.ok for entry in self.entries)

    def start_weights(self, gamma):
        """(successful entries, their weights exp(-gamma (E* - E_p) / E*)), best weight 1."""
        candidates = [entry for entry in self.entries if entry.ok]
        best = self.best_gflops
        if not candidates or best <= 0:
            return [], np.zeros(0)
        return candidates, _annealing_weights(candidates, best, gamma)

    def pick_starts(self, rng, count, gamma, family=None, broad_family=None):
        """Up to `count` distinct successful entries drawn with probability proportional to their weight.
        With `family` (point -> kind of kernel), the draws go round the kinds measured so far, best
        kind first, each weighed against its own kind's best: every kind gets climbed, however far
        behind its first points are. With `broad_family` (point -> a kind grouping several), the draws
        go round the broad kinds instead, and each turn after the first (the best kind's) takes one of
        the kinds in its broad kind at random. Where there are more (broad) kinds than draws, the best
        and a random choice of the others take them."""
        candidates, weights = self.start_weights(gamma)
        if not candidates:
            return []
        broad_family = broad_family or family
        kinds = {}
        for entry in candidates if family is not None else ():
            kinds.setdefault(broad_family(entry.point), {}).setdefault(family(entry.point), []).append(entry)
        if sum(len(group) for group in kinds.values()) < 2:
            count = min(count, len(candidates))
            chosen = rng.choice(len(candidates), size=count, replace=False, p=weights / weights.sum())
            return [candidates[i] for i in chosen]
        # Each broad kind's kinds best first, and the broad kinds by their best kind.
        groups = [sorted(group.values(), key=lambda kind: -_best_gflops(kind)) for group in kinds.values()]
        groups.sort(key=lambda group: -_best_gflops(group[0]))
        if len(groups) > count > 0:
            others = sorted(rng.choice(len(groups) - 1, size=count - 1, replace=False) + 1)
            groups = [groups[0]] + [groups[index] for index in others]
        picked, taken = [], set()
        for turn in range(count):
            kinds_left = [[entry for entry in kind if id(entry) not in taken] for kind in groups[turn % len(groups)]]
            kinds_left = [kind for kind in kinds_left if kind]
            if not kinds_left:
                continue
            # The first turn goes to the best kind of all; any other, to one kind of its broad kind at random.
            group = kinds_left[0] if turn == 0 or len(kinds_left) == 1 else kinds_left[rng.integers(len(kinds_left))]
            weights = _annealing_weights(group, _best_gflops(group), gamma)
            entry = group[rng.choice(len(group), p=weights / weights.sum())]
            picked.append(entry)
            taken.add(id(entry))
        return picked

    def best_curve(self):
        """[(trial, elapsed, best GFLOPS so far)] after each entry, for plots."""
        curve, best = [], 0.0
        for entry in self.entries:
            best = max(best, entry.gflops)
            curve.append((entry.trial + 1, entry.elapsed, best))
        return curve


def _best_gflops(entries):
    return max(entry.gflops for entry in entries)


def _annealing_weights(entries, best, gamma):
    """exp(-gamma (E* - E_p) / E*) of each entry against the best E*: 1 for the best itself."""
    return np.array([math.exp(-gamma * (best - entry.gflops) / best) for entry in entries])


def each_kind_first(ranked, kind):
    """The ranked items, the first of each kind (kind(item)) before any second of a kind: a kind
    ranked low still comes early."""
    firsts, seconds, seen = [], [], set()
    for item in ranked:
        item_kind = kind(item)
        (seconds if item_kind in seen else firsts).append(item)
        seen.add(item_kind)
    return firsts + seconds
