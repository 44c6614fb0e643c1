"""Model-guided search: a method proposes `ratio` times more candidates than are measured, a cost
model ranks them from their features, and only the top ones are measured; the model is refitted
on the search's measurements as they arrive (TVM's scheme, with any method of explore.methods).

Until the model has learned something (a saved model, or `min_samples` of this search's own
measurements), proposals are measured as the method makes them, so a guided search starts like an
unguided one. A small share of each round (`explore`) is drawn at random from the rest of the pool,
so a wrong model cannot hide a region for good.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from .cost_model import Sample, features_for, model_from

logger = logging.getLogger("flexsched.explore.guided")

DEFAULT_RATIO = 8      # candidates ranked per candidate measured
MIN_SAMPLES = 8        # own measurements before an untrained model starts to screen
REFIT_EVERY = 8        # new measurements between refits


class ModelScreen:
    """Keeps the best-ranked share of a method's proposals and learns from what gets measured."""

    def __init__(self, model, task, space, target, ratio=DEFAULT_RATIO, min_samples=MIN_SAMPLES,
                 refit_every=REFIT_EVERY, explore=0.1, seed=0):
        self.model = model_from(model)
        self.task = task
        self.space = space
        self.target = target
        self.ratio = max(1, int(ratio))
        self.min_samples = min_samples
        self.refit_every = refit_every
        self.explore = explore
        self.rng = np.random.default_rng([seed, 7])
        self.group = f"{task} on {target.name}"
        self._samples = []
        self._since_fit = 0
        self._features = {}   # schedule key -> CandidateFeatures (None where lowering failed)
        self.ranked = 0       # proposals the model ranked
        self.screened_out = 0

    @property
    def active(self):
        """Whether the model screens yet: it came trained, or has been fitted on min_samples measurements."""
        return self.model.trained

    def features(self, proposals):
        missing = [p for p in proposals if p.schedule_key not in self._features]
        found = features_for(self.task, self.target, [self.space.schedule(p.point) for p in missing], self.space.info)
        self._features.update((p.schedule_key, f) for p, f in zip(missing, found))
        return [self._features[p.schedule_key] for p in proposals]

    def select(self, proposals, count):
        """At most count of the proposals: the model's best-ranked, a few drawn at random."""
        if not self.active or len(proposals) <= count:
            return proposals[:count]
        features = self.features(proposals)
        usable = [i for i, f in enumerate(features) if f is not None]
        scores = np.full(len(proposals), -math.inf)
        if usable:
            scores[usable] = self.model.scores([features[i] for i in usable])
        order = list(np.argsort(-scores, kind="stable"))
        randoms = sum(self.rng.random() < self.explore for _ in range(count))
        chosen = order[:count - randoms]
        rest = order[count - randoms:]
        if randoms and rest:
            chosen += list(self.rng.choice(rest, size=min(randoms, len(rest)), replace=False))
        self.ranked += len(proposals)
        self.screened_out += len(proposals) - len(chosen)
        return [proposals[i] for i in sorted(chosen)]

    def observe(self, entries):
        """Learn from judged entries; refit once enough new ones came."""
        if not entries:
            return
        keys = [e.schedule_key for e in entries]
        features = self.features([_Keyed(e.point, k) for e, k in zip(entries, keys)])
        for entry, feature in zip(entries, features):
            if feature is not None:
                self._samples.append(Sample(feature, entry.seconds if entry.ok else math.inf, self.group))
                self._since_fit += 1
        if self._since_fit >= self.refit_every and len(self._samples) >= self.min_samples:
            self.model.fit(self._samples)
            self._since_fit = 0
            logger.debug("cost model %s refitted on %d measurements", self.model.name, len(self._samples))


class _Keyed:
    """A point with its schedule key, shaped like a Proposal."""

    __slots__ = ("point", "schedule_key")

    def __init__(self, point, schedule_key):
        self.point = point
        self.schedule_key = schedule_key
