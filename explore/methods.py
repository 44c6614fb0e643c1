"""Search methods: each proposes points to evaluate and observes how they did.

All three share the history H, the start picker, the evaluator and the stopping rules (in
explore/search.py), so they differ only in which points they propose:

- q:      from each start, one step along the untried direction with the highest Q-value
          (a random untried one with probability epsilon, which decays over the first trials);
- p:      from each start, one step along every untried direction;
- random: random unvisited points (AutoTVM's random tuner).

A proposal is never a visited point, nor a point whose schedule was already evaluated (that
point is noted as an alias and the method looks further). Where every neighbour of every start
is used up, q and p fall back to random unvisited points so the budget is still spent.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from .evaluator import ExplorationError

RANDOM_DRAWS_PER_POINT = 50  # random draws before concluding the unvisited part of the space is tiny
REWARD_CLIP = (-1.0, 10.0)   # a jump from a near-zero start would swamp every other reward
# The start picker's gamma: a point at 90% of the best gets weight exp(-2) = 0.14. On the test
# landscape gamma 2 left q stuck on plateaus (150 trials, 3 seeds: 3.7 against 6.7-11 at 20).
DEFAULT_GAMMA = 20.0
# Trials in which start points go round the kinds of kernel a space has (Space.family), so each
# kind is climbed before the best one takes over. Without it, searches of YOLO C1-C6 spent 188-199
# of 200 trials in the kind their best start had, and found channel-vectorised register tiles on
# C6 in half the runs, never on C1, C2, C4; with it, two seeds of C1, C2, C4, C6 (AVX-512) ended
# 0.87 and 0.97 of oneDNN (geometric mean), against 0.82 and 0.84.
FAMILY_TRIALS = 80


@dataclass(frozen=True)
class Proposal:
    point: tuple
    schedule_key: str
    origin: tuple | None = None  # (start point, direction)


class SearchMethod(ABC):
    """Propose/observe: propose(count) gives at most count fresh points; observe(...) sees results."""

    name = "method"

    def __init__(self, space, history, rng, starts=4, gamma=DEFAULT_GAMMA, family_trials=FAMILY_TRIALS):
        self.space = space
        self.history = history
        self.rng = rng
        self.starts = starts
        self.gamma = gamma
        self.family_trials = family_trials
        self._keys = {}

    def pick_starts(self):
        """The round's start points: in the first family_trials trials, drawn in turn from each broad
        kind of kernel measured (Space.broad_family, then Space.family within it), then by weight alone."""
        if len(self.history) >= self.family_trials:
            return self.history.pick_starts(self.rng, self.starts, self.gamma)
        return self.history.pick_starts(self.rng, self.starts, self.gamma, self.space.family, self.space.broad_family)

    def schedule_key(self, point):
        key = self._keys.get(point)
        if key is None:
            key = self._keys[point] = self.space.schedule(point).to_json()
        return key

    def fresh_key(self, point, pending):
        """The schedule key of a point nobody evaluated or proposed yet; None otherwise."""
        if self.history.is_visited(point):
            return None
        key = self.schedule_key(point)
        if key in pending:
            return None
        if self.history.entry_for_key(key) is not None:
            self.history.alias(point, key)  # same schedule as an evaluated point: never measured again
            return None
        return key

    def random_fresh(self, count, pending):
        proposals = []
        for _ in range(count * RANDOM_DRAWS_PER_POINT):
            if len(proposals) == count:
                break
            point = self.space.random_point(self.rng)
            key = self.fresh_key(point, pending)
            if key is not None:
                pending.add(key)
                proposals.append(Proposal(point, key))
        return proposals

    @abstractmethod
    def propose(self, count) -> list[Proposal]:
        """At most count proposals (fewer when the space runs out; none ends the search)."""

    def propose_pool(self, count, ratio):
        """What propose would give with ratio times the starts and the count: a pool for a cost model to screen."""
        starts = self.starts
        self.starts = starts * ratio
        try:
            return self.propose(count * ratio)
        finally:
            self.starts = starts

    def observe(self, proposals, entries):
        """The history entries the proposals became, in order."""

    def replay(self, entries):
        """Entries loaded from a record file on resume (learn from them as if observed)."""


class RandomSearch(SearchMethod):
    name = "random"

    def propose(self, count):
        return self.random_fresh(min(count, self.starts), set())


class PMethod(SearchMethod):
    name = "p"

    def propose(self, count):
        pending, proposals = set(), []
        for start in self.pick_starts():
            for direction, neighbour in self.space.neighbours(start.point):
                key = self.fresh_key(neighbour, pending)
                if key is not None:
                    pending.add(key)
                    proposals.append(Proposal(neighbour, key, (start.point, direction)))
        if not proposals:
            proposals = self.random_fresh(min(count, self.starts), pending)
        return proposals[:count]


class QMethod(SearchMethod):
    name = "q"

    def __init__(self, space, history, rng, starts=4, gamma=DEFAULT_GAMMA, seed=0, train_every=5, alpha=0.5,
                 epsilon_start=0.5, epsilon_end=0.05, epsilon_trials=100, hidden=64, epochs=4,
                 family_trials=FAMILY_TRIALS):
        super().__init__(space, history, rng, starts, gamma, family_trials)
        from .qnet import QLearner  # torch is imported only when the Q-method is used

        self.learner = QLearner(space.encoding_length, space.num_directions, seed=seed, hidden=hidden,
                                alpha=alpha, epochs=epochs)
        self.train_every = train_every
        self.epsilon_start = epsilon_start
        self.epsilon_end = epsilon_end
        self.epsilon_trials = epsilon_trials
        self._since_training = 0

    @property
    def epsilon(self):
        progress = min(1.0, len(self.history) / max(1, self.epsilon_trials))
        return self.epsilon_start + (self.epsilon_end - self.epsilon_start) * progress

    def _step(self, start, pending):
        """One fresh neighbour of start: the best untried direction by Q, or a random one."""
        options = self.space.neighbours(start.point)
        if not options:
            return None
        if self.rng.random() < self.epsilon:
            order = self.rng.permutation(len(options))
        else:
            q_values = self.learner.q_values(self.space.encode(start.point))
            # Stable sort on -Q: ties go to the lower direction index, so a seed fixes the walk.
            order = np.argsort(-q_values[[direction for direction, _ in options]], kind="stable")
        for index in order:
            direction, neighbour = options[index]
            key = self.fresh_key(neighbour, pending)
            if key is not None:
                return Proposal(neighbour, key, (start.point, direction))
        return None

    def propose(self, count):
        pending, proposals = set(), []
        for start in self.pick_starts():
            proposal = self._step(start, pending)
            if proposal is not None:
                pending.add(proposal.schedule_key)
                proposals.append(proposal)
        if len(proposals) < min(count, self.starts):  # starts used up: keep the budget moving
            proposals += self.random_fresh(min(count, self.starts) - len(proposals), pending)
        return proposals[:count]

    def _learn(self, entry):
        if entry.origin is None:
            return
        start_point, direction = entry.origin
        start = self.history.entry_of(start_point)
        if start is None or not start.ok or start.gflops <= 0:
            return
        reward = float(np.clip((entry.gflops - start.gflops) / start.gflops, *REWARD_CLIP))
        self.learner.remember(self.space.encode(start_point), direction, self.space.encode(entry.point),
                              reward, terminal=not entry.ok)
        self._since_training += 1
        if self._since_training >= self.train_every:
            self.learner.train()
            self._since_training = 0

    def observe(self, proposals, entries):
        for entry in entries:
            self._learn(entry)

    def replay(self, entries):
        for entry in entries:
            self._learn(entry)


METHODS = {"q": QMethod, "p": PMethod, "random": RandomSearch}


def make_method(name, space, history, rng, seed=0, **options):
    """The search method called name (q, p or random)."""
    if name not in METHODS:
        raise ExplorationError(f"unknown search method '{name}'; choose one of {', '.join(METHODS)}")
    cls = METHODS[name]
    if cls is QMethod:
        options["seed"] = seed
    return cls(space, history, rng, **options)
