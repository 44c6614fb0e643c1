"""The search loop shared by every method: warm-up, propose, evaluate, record, stop.

Stopping rules (the same for q, p and random): the trial budget (evaluated points, warm-up
included, resumed points included); early stopping when the best E has not improved by at
least `min_improvement` (relative: 0.01 = 1%) within the last `early_stopping` trials; and an
exhausted space (no unvisited point can be found).

Warm-up: while no point has succeeded, random unvisited points are evaluated in batches of
`starts`, up to `max_warmup` points even if that exceeds the trial budget, so a search never
hands back an all-failed history; if every one fails, ExplorationError quotes the first failure.

Model-screened starts: with `start_screen` (an evaluator that predicts, such as the target's static
model) and `start_pool`, the first warm-up batch is the `starts` best of `start_pool` random
points as the model ranks them, not `starts` random ones: on the 1x1 YOLO layers the model's pick
of 64 ran 3-10x faster than a random point, so the climb starts where a random search would need
tens of measurements to get. Priced points are not measured and do not count as trials. A search
with transferred starts (below) prices only a quarter of the pool (CARRIED_POOL_SHARE). The pool
holds as many points of each kind of kernel (`Space.family`: on a CPU, where a reduction
accumulates and which axis its register tile vectorises) as further random draws allow, and the
picks take the best of each kind before any second of a kind, since the model's ranking across
kinds is rough (within a kind it is good) and a climb seldom crosses from one to another.

Transferred starts: `start_points` (points carried over from other tasks' records, see
explore.transfer) are measured in the first warm-up batch beside the `starts` screened or random
ones, so a search of one layer starts from what its neighbours found; they count as trials. A
resumed search measures those it has not evaluated before first: a network tuned in passes (each
layer's budget spread over several, every layer resumed in turn) starts each pass of a layer from
what the others found in the passes before, not only from the layers tuned before its first.

Shared record files: with `shared` (explore.claims.SharedRecords), each batch of proposals is first
claimed: a point another run already recorded joins the history with that run's result (reused,
not evaluated), a point another run is evaluating is waited for after this run's own points are
evaluated and recorded, and the rest are evaluated here and recorded through `shared`.

Model guidance: with `screen` (explore.guided.ModelScreen), each round the method proposes `ratio`
times as many points as it would measure, the screen's cost model ranks them and only the best
ranked are evaluated; the screen learns from every evaluated point.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass

import numpy as np

from .evaluator import Evaluation, ExplorationError
from .history import History, each_kind_first
from .methods import DEFAULT_GAMMA, Proposal, make_method

logger = logging.getLogger("flexsched.explore.search")

# Rounds of `start_pool` further random draws to fill each kind's share of a model-screened pool.
POOL_DRAW_ROUNDS = 8
# A search with starts carried over prices this share of `start_pool`: those starts already give
# their kinds a point the layers before climbed, while a search nothing carries over to has only the
# pool. (YOLO C1, the first 3 x 3 layer, ended in its fast kind, a channel-vectorised tile, in 6 of
# 8 runs with a pool of 128, in 0 of 4 with 32 and seed 0; the 96 more points cost it about 25 s.)
CARRIED_POOL_SHARE = 4
# A shared record file's verdicts on a proposal, besides a recorded Evaluation to reuse.
EVALUATE = "evaluate"  # claimed by this run: evaluate it here
WAIT = "wait"          # another run is evaluating it


class EarlyStopping:
    """Stop when the best has not grown by a relative min_improvement within `patience` trials."""

    def __init__(self, patience=None, min_improvement=0.01):
        self.patience = patience
        self.min_improvement = min_improvement
        self._reference = 0.0
        self._last_improved = 0

    def update(self, entry):
        if entry.gflops > self._reference * (1.0 + self.min_improvement):
            self._reference = entry.gflops
            self._last_improved = entry.trial

    def should_stop(self, trials_done):
        return self.patience is not None and trials_done - 1 - self._last_improved >= self.patience


@dataclass(frozen=True)
class SearchOutcome:
    history: History
    stop_reason: str  # "trials", "early_stopping" or "exhausted"
    resumed: int      # entries that came from a record file, not evaluated in this run
    reused: int = 0   # entries another run sharing the record file evaluated during this one
    priced: int = 0   # random points the start screen priced to pick the first starts (not trials)
    transferred: int = 0  # points carried over from other tasks' records, measured as first starts


class Search:
    """One tuning job: a task's space searched by a method with an evaluator."""

    def __init__(self, task, space, evaluator, method="q", seed=0, starts=4, gamma=DEFAULT_GAMMA, early_stopping=None,
                 min_improvement=0.01, max_warmup=64, on_entry=None, shared=None, screen=None, start_screen=None,
                 start_pool=0, start_points=(), **method_options):
        self.task = task
        self.space = space
        self.evaluator = evaluator
        self.method_name = method
        self.seed = seed
        self.starts = starts
        self.gamma = gamma
        self.max_warmup = max_warmup
        self.early_stopping = early_stopping
        self.min_improvement = min_improvement
        self.on_entry = on_entry or (lambda entry: None)
        self.shared = shared
        self.screen = screen
        self.start_screen = start_screen
        self.start_pool = start_pool
        self._priced = 0
        self.start_points = tuple(start_points)
        self._transferred = 0
        self.method_options = method_options

    def run(self, trials, history=None):
        """Search until a stopping rule holds; `history` carries resumed entries (not re-evaluated)."""
        history = history if history is not None else History(self.space.info.flops, self.space.info.compulsory_bytes)
        resumed = len(history)
        # Seeded by the seed and the resumed count: a resumed run continues deterministically.
        rng = np.random.default_rng([self.seed, resumed])
        method = make_method(self.method_name, self.space, history, rng, seed=self.seed, starts=self.starts,
                             gamma=self.gamma, **self.method_options)
        method.replay(list(history))
        stopper = EarlyStopping(self.early_stopping, self.min_improvement)
        for entry in history:
            stopper.update(entry)
        clock_zero = time.perf_counter() - (history.entries[-1].elapsed if history.entries else 0.0)
        batch = max(1, int(getattr(self.evaluator, "batch_size", 1)))

        reused = []

        def add(proposal, evaluation, elapsed, own):
            entry = history.add(proposal.point, proposal.schedule_key, evaluation, elapsed, proposal.origin)
            logger.debug("trial %d%s: %s", entry.trial + 1, "" if own else " (another run's)", _outcome(evaluation))
            stopper.update(entry)
            if own and self.shared is not None:
                self.shared.record(entry)
            elif not own:
                reused.append(entry)
            self.on_entry(entry)
            return entry

        def measure(chunk):
            evaluations = self.evaluator.evaluate(self.task, self.space, [p.point for p in chunk]) if chunk else []
            if len(evaluations) != len(chunk):
                raise ExplorationError(f"evaluator '{self.evaluator.name}' returned {len(evaluations)} "
                                       f"results for {len(chunk)} points")
            elapsed = time.perf_counter() - clock_zero
            return [add(proposal, evaluation, elapsed, True) for proposal, evaluation in zip(chunk, evaluations)]

        def settle(chunk, verdicts):
            """Reuse what another run recorded, evaluate what this run claimed."""
            elapsed = time.perf_counter() - clock_zero
            entries = [add(proposal, verdict, elapsed, False) for proposal, verdict in zip(chunk, verdicts)
                       if isinstance(verdict, Evaluation)]
            return entries + measure([proposal for proposal, verdict in zip(chunk, verdicts) if verdict is EVALUATE])

        def evaluate(proposals):
            entries, begin = [], 0
            while begin < len(proposals):
                # A batch never runs past the trial budget (a warm-up without a success may: one at a time).
                chunk = proposals[begin:begin + max(1, min(batch, trials - len(history)))]
                begin += len(chunk)
                if self.shared is None:
                    entries += measure(chunk)
                else:
                    verdicts = self.shared.claim(chunk)
                    entries += settle(chunk, verdicts)
                    # Only now, with this run's own points recorded, wait: two runs never wait on each other.
                    waiting = [p for p, verdict in zip(chunk, verdicts) if verdict is WAIT]
                    if waiting:
                        entries += settle(waiting, self.shared.wait(waiting))
                if len(history) >= trials and history.num_ok or stopper.should_stop(len(history)):
                    break
            return entries

        screen = self.screen
        if screen is not None:
            screen.observe(list(history))
        if resumed and len(history) < trials:
            entries = evaluate(self._transferred_starts(method, set()))
            if screen is not None:
                screen.observe(entries)
        self._warm_up(history, method, evaluate, trials, screen)
        stop_reason = "trials"
        while len(history) < trials:
            if stopper.should_stop(len(history)):
                stop_reason = "early_stopping"
                break
            wanted = trials - len(history)
            if screen is not None:  # a guided round measures at most `starts` points, screened once the model can
                pool = method.propose_pool(wanted, screen.ratio) if screen.active else method.propose(wanted)
                proposals = screen.select(pool, min(wanted, self.starts))
            else:
                proposals = method.propose(wanted)
            if not proposals:
                stop_reason = "exhausted"
                break
            entries = evaluate(proposals)
            if screen is not None:
                screen.observe(entries)
            method.observe(proposals, entries)
        return SearchOutcome(history, stop_reason, resumed, len(reused), self._priced, self._transferred)

    def _warm_up(self, history, method, evaluate, trials, screen=None):
        tried = 0
        while history.num_ok == 0:
            if tried >= self.max_warmup:
                first = next(entry for entry in history if not entry.ok)
                raise ExplorationError(
                    f"all {len(history)} evaluated points of {self.task} failed; the first failure "
                    f"({first.evaluation.status}): {first.evaluation.error}")
            count = min(self.starts, self.max_warmup - tried)
            pending, proposals = set(), []
            if not history.entries:
                proposals = self._transferred_starts(method, pending)
                proposals += self._screened_starts(method, count, pending, carried=bool(proposals))
            else:
                proposals = method.random_fresh(count, pending)
            if not proposals:
                if not history.entries:
                    raise ExplorationError(f"the space of {self.task} has no point to evaluate")
                first = next(entry for entry in history if not entry.ok)
                raise ExplorationError(
                    f"every point of the space of {self.task} failed; the first failure "
                    f"({first.evaluation.status}): {first.evaluation.error}")
            entries = evaluate(proposals)
            if screen is not None:
                screen.observe(entries)
            tried += len(proposals)

    def _transferred_starts(self, method, pending):
        """Proposals of the start points nobody has evaluated yet."""
        proposals = []
        for point in self.start_points:
            key = method.fresh_key(point, pending)
            if key is not None:
                pending.add(key)
                proposals.append(Proposal(point, key))
        self._transferred = len(proposals)
        return proposals

    def _screened_starts(self, method, count, pending, carried):
        """The count best of start_pool random points (a CARRIED_POOL_SHARE of them where starts were
        `carried` over) by the start screen's prediction; count random points without a screen or
        where it prices none."""
        size = self.start_pool // CARRIED_POOL_SHARE if carried else self.start_pool
        if self.start_screen is None or size <= count:
            return method.random_fresh(count, pending)
        pool = _pool_by_family(method, size, pending, self.space.family)
        started = time.perf_counter()
        predicted = self.start_screen.evaluate(self.task, self.space, [proposal.point for proposal in pool])
        self._priced = len(pool)
        ranked = sorted((_guessed_from_below(evaluation), evaluation.seconds, index)
                        for index, evaluation in enumerate(predicted) if evaluation.ok)
        logger.debug("priced %d random points in %.1f s to pick %d starts (%d priced)", len(pool),
                     time.perf_counter() - started, min(count, len(ranked)), len(ranked))
        picked = _best_of_each_family([pool[index] for *_, index in ranked], count, self.space.family)
        return picked or method.random_fresh(count, pending)  # a screen that prices nothing: random starts


def _guessed_from_below(evaluation):
    """Whether a model's time left loops out (trip counts it did not know, taken as 1): such a
    point ranks after every fully priced one. (On YOLO C1, 3 of 80 measured points were, priced at
    1,580-1,870 GFLOPS where they ran at 42-53, and the model's pick of their kind was one of them.)"""
    return bool((evaluation.details or {}).get("unresolved_loops"))


def _pool_by_family(method, size, pending, family):
    """size random fresh proposals (fewer where the space runs out), as many of each kind of kernel as
    further draws allow: a rare kind (a channel-vectorised register tile is one random point in six on
    a YOLO 3 x 3 layer) gets its share of the pool, not its share of random draws. (On YOLO C4 and C6,
    the model's pick of 8 random channel tiles measured 122 GFLOPS on average; of 16, 137-144; of 32,
    165-169.) A space with one kind draws exactly `size` points, as a plain random pool."""
    pool = method.random_fresh(size, pending)
    by_kind = {}
    for proposal in pool:
        by_kind.setdefault(family(proposal.point), []).append(proposal)
    for _ in range(POOL_DRAW_ROUNDS):
        share = -(-size // max(1, len(by_kind)))
        if len(by_kind) < 2 or all(len(proposals) >= share for proposals in by_kind.values()):
            break
        for proposal in method.random_fresh(size, pending):
            by_kind.setdefault(family(proposal.point), []).append(proposal)
    if len(by_kind) < 2:
        return pool
    # Round by round, one of each kind that has any left: exactly `size` where the draws allow.
    rounds = itertools.zip_longest(*by_kind.values())
    return [proposal for round_ in rounds for proposal in round_ if proposal is not None][:size]


def _best_of_each_family(ranked, count, family):
    """The first count of ranked proposals (best first), the best of each kind of kernel before any
    second of a kind: a kind the model underrates still gets a start."""
    return each_kind_first(ranked, lambda proposal: family(proposal.point))[:count]


def _outcome(evaluation):
    """A candidate's result in a few words: its time, or its failure and why."""
    if evaluation.ok:
        return f"ok, {evaluation.seconds * 1e3:.4g} ms"
    return f"{evaluation.status}: {evaluation.error}" if evaluation.error else evaluation.status
