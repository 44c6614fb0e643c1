"""Exploration with a fake evaluator: the start picker, the three methods, stopping rules,
records and resume, warm-up failures, and the tune/best command line (no compilation)."""

import io
import json
import math
import statistics
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from analysis import analyze
from explore.evaluator import Evaluation, ExplorationError, evaluator_for
from explore.history import History
from explore.optimize import TRANSFERRED_PER_START, build_best, optimize, resumed_history
from explore.records import CorruptRecordWarning, best_records, load_records
from fake_evaluator import FakeEvaluator, ScriptedEvaluator, fake_seconds
from flexsched.cli import main
from flexsched.registry import get_task
from flexsched.target import get_target
from space import Config, generate

GMM = get_task("GMM", 64, 64, 64)
CONV = get_task("C2D", 1, 4, 8, 8, 4, 3, 1, 1)  # its padding node's knobs are dead when inlined


def tune(task=GMM, trials=40, method="q", seed=0, evaluator=None, **options):
    evaluator = evaluator if evaluator is not None else FakeEvaluator()
    result = optimize(task, "llvm", trials=trials, method=method, seed=seed, evaluator=evaluator,
                      build_kernel=False, **options)
    return result, evaluator


def space_of(task):
    return generate(analyze(task), "llvm")


# ---------------------------------------------------------------- history and start picker

def history_with(gflops_values, flops=1e9):
    history = History(flops)
    for index, gflops in enumerate(gflops_values):
        evaluation = Evaluation("ok", flops / (gflops * 1e9)) if gflops else Evaluation("crash", error="boom")
        history.add((index,), f"schedule {index}", evaluation, elapsed=float(index))
    return history


def test_start_weights_follow_the_annealing_formula():
    history = history_with([10.0, 5.0, 0.0, 1.0])
    entries, weights = history.start_weights(gamma=2.0)
    assert [e.gflops for e in entries] == pytest.approx([10.0, 5.0, 1.0])  # the failed point is no start
    assert weights == pytest.approx([1.0, math.exp(-2.0 * 0.5), math.exp(-2.0 * 0.9)])
    assert history.best.gflops == pytest.approx(10.0)


def test_starts_are_drawn_in_proportion_to_their_weights():
    history = history_with([10.0, 5.0, 0.0, 1.0])
    rng = np.random.default_rng(0)
    draws = 6000
    counts = {}
    for _ in range(draws):
        (start,) = history.pick_starts(rng, 1, gamma=2.0)
        counts[start.point] = counts.get(start.point, 0) + 1
    _, weights = history.start_weights(2.0)
    expected = weights / weights.sum()
    observed = np.array([counts.get((i,), 0) for i in (0, 1, 3)]) / draws
    assert observed == pytest.approx(expected, abs=0.02)
    assert (2,) not in counts


def test_several_starts_are_distinct():
    history = history_with([10.0, 9.0, 8.0, 7.0, 0.0])
    starts = history.pick_starts(np.random.default_rng(1), 3, gamma=1.0)
    assert len({s.point for s in starts}) == 3
    assert len(history.pick_starts(np.random.default_rng(1), 10, gamma=1.0)) == 4  # only ok points


def test_starts_go_round_the_kinds_of_kernel_each_weighed_against_its_own_best():
    # Points 0-5 one kind near 10 GFLOPS, points 6-7 another far behind (2 and 1).
    history = history_with([10.0, 9.8, 9.6, 9.5, 9.4, 9.2, 2.0, 1.0])
    kind = lambda point: "behind" if point[0] >= 6 else "ahead"   # noqa: E731
    rng = np.random.default_rng(0)
    plain = [start.point for _ in range(200) for start in history.pick_starts(rng, 4, gamma=20.0)]
    assert sum(point[0] >= 6 for point in plain) == 0       # exp(-16) and less: never drawn
    for _ in range(50):
        starts = history.pick_starts(rng, 4, gamma=20.0, family=kind)
        assert [kind(start.point) for start in starts] == ["ahead", "behind", "ahead", "behind"]
        assert len({start.point for start in starts}) == 4
    # Within its kind, the lagging kind's best is drawn as the best of all would be: 2 beats 1.
    behind = [start.point for _ in range(400) for start in history.pick_starts(rng, 2, 20.0, kind)[1:]]
    assert behind.count((6,)) > 0.95 * len(behind)
    # More kinds than draws: the best kind every time, and each of the others in turn.
    five = lambda point: min(point[0], 4)   # noqa: E731
    draws = [[five(start.point) for start in history.pick_starts(rng, 2, 20.0, five)] for _ in range(200)]
    assert all(kinds[0] == 0 and len(kinds) == 2 for kinds in draws)
    assert {kinds[1] for kinds in draws} == {1, 2, 3, 4}
    # One kind only: the draws are the plain ones, seed for seed.
    one = lambda point: ()   # noqa: E731
    assert [s.point for s in history.pick_starts(np.random.default_rng(3), 4, 20.0, one)] == \
        [s.point for s in history.pick_starts(np.random.default_rng(3), 4, 20.0)]


def test_starts_go_round_the_broad_kinds_and_share_each_broad_kinds_turns_among_its_kinds():
    # Broad kind "a" holds kinds a1 (points 0-3, the best) and a2 (points 4-5, far behind); "b" holds
    # b1 (6) and b2 (7); "c" holds c1 (8).
    history = history_with([10.0, 9.8, 9.6, 9.5, 3.0, 2.9, 2.0, 1.0, 1.5])
    names = ["a1"] * 4 + ["a2"] * 2 + ["b1", "b2", "c1"]
    kind = lambda point: names[point[0]]   # noqa: E731
    broad = lambda point: names[point[0]][0]   # noqa: E731
    rng = np.random.default_rng(0)
    rounds = [[kind(start.point) for start in history.pick_starts(rng, 4, 20.0, kind, broad)] for _ in range(400)]
    # Each round goes round the broad kinds, best first; its first start is the best kind's.
    assert all([name[0] for name in picked] == ["a", "b", "c", "a"] for picked in rounds)
    assert all(picked[0] == "a1" for picked in rounds)
    # A broad kind's later turns take each of its kinds about as often, however far behind one is.
    later = Counter(picked[3] for picked in rounds)
    assert set(later) == {"a1", "a2"} and 0.4 < later["a2"] / 400 < 0.6
    seconds = Counter(picked[1] for picked in rounds)
    assert 0.4 < seconds["b2"] / 400 < 0.6
    # Without a broad family, each kind is a turn of its own: b1 and b2 come every round.
    assert Counter(kind(start.point) for start in history.pick_starts(rng, 5, 20.0, kind)) == \
        Counter(["a1", "a2", "b1", "b2", "c1"])


def test_a_method_goes_round_the_kinds_only_in_its_first_family_trials():
    from explore.methods import PMethod

    class TwoKinds:
        family = broad_family = staticmethod(lambda point: point[0] >= 3)

    history = history_with([10.0, 9.8, 9.6, 2.0])
    method = PMethod(TwoKinds(), history, np.random.default_rng(0), starts=2, family_trials=10)
    assert (3,) in {start.point for start in method.pick_starts()}
    method.family_trials = len(history)   # past the phase: by weight alone, and 2.0 weighs exp(-16)
    assert all(start.point != (3,) for _ in range(50) for start in method.pick_starts())


def test_a_point_or_schedule_is_added_once():
    history = history_with([1.0])
    with pytest.raises(ValueError):
        history.add((0,), "other", Evaluation("ok", 1.0), 0.0)
    with pytest.raises(ValueError):
        history.add((9,), "schedule 0", Evaluation("ok", 1.0), 0.0)


# ---------------------------------------------------------------- the methods

@pytest.mark.parametrize("method", ["q", "p", "random"])
def test_no_point_or_schedule_is_evaluated_twice(method):
    result, evaluator = tune(CONV, trials=60, method=method)
    assert len(evaluator.calls) == 60 == result.trials
    assert len(set(evaluator.calls)) == len(evaluator.calls)
    space = space_of(CONV)
    keys = [space.schedule(point).to_json() for point in evaluator.calls]
    assert len(set(keys)) == len(keys)  # different points with one schedule are measured once


def test_q_method_is_deterministic_per_seed():
    first, first_eval = tune(trials=40, seed=3)
    again, again_eval = tune(trials=40, seed=3)
    other, other_eval = tune(trials=40, seed=4)
    assert first_eval.calls == again_eval.calls
    assert first.config == again.config
    assert first_eval.calls != other_eval.calls


def test_q_method_moves_one_step_from_a_start_in_h():
    result, _ = tune(trials=40)
    space = space_of(GMM)
    moved = [e for e in result.history if e.origin is not None]
    assert len(moved) >= 30
    for entry in moved:
        start, direction = entry.origin
        assert space.move(start, direction) == entry.point
        start_entry = result.history.entry_of(start)
        assert start_entry is not None and start_entry.ok and start_entry.trial < entry.trial


def test_q_method_trains_every_five_moves():
    from explore.methods import QMethod

    space = space_of(GMM)
    history = History(space.info.flops)
    method = QMethod(space, history, np.random.default_rng(0), starts=2)
    before = [p.detach().clone() for p in method.learner.network.parameters()]
    trained_at = []   # how many moves the learner had seen at each training round
    train = method.learner.train
    method.learner.train = lambda: (trained_at.append(len(method.learner.transitions)), train())[1]
    evaluator = FakeEvaluator()
    history.add(space.random_point(0), space.schedule(space.random_point(0)).to_json(),
                evaluator.evaluate(GMM, space, [space.random_point(0)])[0], 0.0)
    while method.learner.training_rounds == 0:
        proposals = method.propose(2)
        entries = [history.add(p.point, p.schedule_key, e, 0.0, p.origin)
                   for p, e in zip(proposals, evaluator.evaluate(GMM, space, [p.point for p in proposals]))]
        method.observe(proposals, entries)
    assert trained_at == [5]  # the first round of training came at the fifth move
    after = list(method.learner.network.parameters())
    assert any(not np.allclose(b.numpy(), a.detach().numpy()) for b, a in zip(before, after))
    target = dict(method.learner.target.state_dict())
    for name, value in method.learner.network.state_dict().items():  # Y is a copy of X after training
        assert np.array_equal(value.numpy(), target[name].numpy())


def test_p_method_tries_every_direction_of_its_start():
    result, evaluator = tune(trials=120, method="p", starts=1, evaluator=FakeEvaluator())
    space = space_of(GMM)
    moved = [e for e in result.history if e.origin is not None]
    start = moved[0].origin[0]
    neighbours = space.neighbours(start)
    from_start = {e.origin[1] for e in moved if e.origin[0] == start}
    # A neighbour whose schedule is already known (a dead knob's move) is not measured again.
    fresh = {direction for direction, point in neighbours
             if space.schedule(point).to_json() != space.schedule(start).to_json()}
    assert len(from_start) >= len(fresh) // 2 and from_start <= {direction for direction, _ in neighbours}
    # Every neighbour's schedule was measured: the neighbour itself, or another point with its schedule.
    assert all(result.history.is_visited(point) or result.history.entry_for_key(space.schedule(point).to_json())
               for _, point in neighbours)


def test_random_search_proposes_no_moves():
    result, _ = tune(trials=30, method="random")
    assert all(entry.origin is None for entry in result.history)


def test_q_method_climbs_the_fake_landscape_better_than_its_warm_up():
    gains = []
    for seed in range(5):   # one walk's gain depends on its seed (1.0 to 1.9 over eight seeds)
        result, _ = tune(trials=120, seed=seed)
        gains.append(result.gflops / max(e.gflops for e in result.history.entries[:4]))
    assert statistics.median(gains) > 1.2


def test_an_unknown_method_names_the_known_ones():
    with pytest.raises(ExplorationError, match="unknown search method 'greedy'; choose one of q, p, random"):
        tune(trials=5, method="greedy")


# ---------------------------------------------------------------- stopping rules and warm-up

def test_early_stopping_when_nothing_improves():
    evaluator = ScriptedEvaluator(analyze(GMM).flops, lambda call: 5.0)
    result, _ = tune(trials=100, method="random", evaluator=evaluator, early_stopping=10)
    assert result.stop_reason == "early_stopping"
    assert result.trials == 11


def test_early_stopping_counts_relative_not_absolute_improvement():
    flops = analyze(GMM).flops
    creeping = lambda call: 1.0 + 0.001 * call  # noqa: E731 - a 0.1% gain per trial
    slow, _ = tune(trials=100, evaluator=ScriptedEvaluator(flops, creeping), early_stopping=5,
                   min_improvement=0.01, method="random")
    assert slow.stop_reason == "early_stopping" and slow.trials < 20
    patient, _ = tune(trials=100, evaluator=ScriptedEvaluator(flops, creeping), early_stopping=5,
                      min_improvement=0.0, method="random")
    assert patient.stop_reason == "trials" and patient.trials == 100


def test_warm_up_keeps_drawing_until_a_point_succeeds():
    result, evaluator = tune(trials=6, evaluator=FakeEvaluator(fail_first=9))
    assert result.history.num_ok >= 1
    assert len(evaluator.calls) >= 10  # past the trial budget: a warm-up never comes back all-failed
    assert math.isfinite(result.seconds)


def test_an_evaluator_that_fails_everything_says_why():
    with pytest.raises(ExplorationError) as raised:
        tune(trials=10, evaluator=FakeEvaluator(always_fail=True), max_warmup=12)
    message = str(raised.value)
    assert "all 12 evaluated points of GMM(64, 64, 64) failed" in message
    assert "(build_error): fake build failure #1" in message
    assert "\n" not in message


class PricingScreen(FakeEvaluator):
    """A start screen that predicts the fake landscape's seconds and remembers what it priced."""

    name = "fake-model"
    judged_by = "modelled"

    def __init__(self, price_nothing=False):
        super().__init__(always_fail=price_nothing)
        self.priced = []

    def evaluate(self, task, space, points):
        evaluations = super().evaluate(task, space, points)
        self.priced.append(list(zip(points, evaluations)))
        return evaluations


def search_with_screen(screen, trials=10, start_pool=32):
    from explore.search import Search

    evaluator = FakeEvaluator()
    search = Search(GMM, space_of(GMM), evaluator, "q", seed=0, starts=4, start_screen=screen, start_pool=start_pool)
    return search.run(trials), evaluator


def test_first_starts_are_the_screens_best_of_each_kind_of_kernel_in_its_pool():
    screen = PricingScreen()
    outcome, evaluator = search_with_screen(screen)
    assert len(screen.priced) == 1 and outcome.priced == len(screen.priced[0]) == 32
    priced = sorted((evaluation.seconds, index, point) for index, (point, evaluation) in enumerate(screen.priced[0])
                    if evaluation.ok)
    space = space_of(GMM)
    kinds = {point: space.family(point) for *_, point in priced}
    # GMM's kinds on a CPU: accumulating in memory, or in a register tile vectorised along j or i,
    # one or two vectors wide.
    assert {kind for kind in kinds.values()} <= {(("O", "memory", None),)} | {
        (("O", "registers", axis, vectors),) for axis in "ij" for vectors in (1, 2)}
    best_of_each = [point for n, (*_, point) in enumerate(priced)
                    if kinds[point] not in {kinds[earlier] for *_, earlier in priced[:n]}]
    rest = [point for *_, point in priced if point not in best_of_each]
    starts = [entry.point for entry in outcome.history.entries[:4]]
    assert starts == (best_of_each + rest)[:4] and len(set(kinds[point] for point in starts)) >= 2
    assert len(outcome.history) == 10 and len(evaluator.calls) == 10  # priced points are not trials


def test_a_price_that_left_loops_out_ranks_after_every_full_one():
    class GuessingScreen(PricingScreen):
        """Prices the pool's first point fastest of all, with loops it did not know left out."""

        def evaluate(self, task, space, points):
            evaluations = [Evaluation("ok", 1e-9, details={"unresolved_loops": 2}) if n == 0 else evaluation
                           for n, evaluation in enumerate(FakeEvaluator.evaluate(self, task, space, points))]
            self.priced.append(list(zip(points, evaluations)))
            return evaluations

    screen = GuessingScreen()
    outcome, _ = search_with_screen(screen)
    guessed = screen.priced[0][0][0]
    assert guessed not in [entry.point for entry in outcome.history.entries[:4]]

    # Priced in full, the same point would be the first start.
    class FullScreen(GuessingScreen):
        def evaluate(self, task, space, points):
            evaluations = super().evaluate(task, space, points)
            return [Evaluation("ok", e.seconds) for e in evaluations]

    outcome, _ = search_with_screen(FullScreen())
    assert outcome.history.entries[0].point == guessed


def test_the_screened_pool_holds_an_even_share_of_each_kind_of_kernel():
    screen = PricingScreen()
    search_with_screen(screen, start_pool=30)
    space = space_of(GMM)
    counts = Counter(space.family(point) for point, _ in screen.priced[0])
    # 30 random draws: 20 accumulate in memory; 5 kinds (memory, and a tile along i or j, one or two vectors wide)
    assert len(counts) == 5 and set(counts.values()) == {6}


def test_a_space_of_one_kind_screens_the_same_random_pool_as_before():
    from explore.methods import make_method
    from explore.search import _pool_by_family

    space = space_of(GMM)

    def pool(family_of):
        method = make_method("q", space, History(1.0), np.random.default_rng(5))
        return [proposal.point for proposal in _pool_by_family(method, 16, set(), family_of)]

    method = make_method("q", space, History(1.0), np.random.default_rng(5))
    plain = [proposal.point for proposal in method.random_fresh(16, set())]
    assert pool(lambda point: ()) == plain
    assert pool(space.family) != plain


def test_a_kind_the_screen_ranks_last_still_gets_a_start():
    from explore.methods import Proposal
    from explore.search import _best_of_each_family

    ranked = [Proposal((n,), str(n)) for n in range(8)]
    family = lambda point: "rare" if point == (7,) else "common"   # noqa: E731
    assert [p.point for p in _best_of_each_family(ranked, 3, family)] == [(0,), (7,), (1,)]
    assert [p.point for p in _best_of_each_family(ranked, 3, lambda point: ())] == [(0,), (1,), (2,)]


def test_a_search_with_carried_over_starts_prices_a_share_of_the_pool():
    from explore.search import Search

    space = space_of(GMM)
    carried = space.random_point(np.random.default_rng(3))
    for start_points, priced in (((), 64), ((carried,), 16)):
        screen = PricingScreen()
        search = Search(GMM, space, FakeEvaluator(), "q", seed=0, starts=4, start_screen=screen, start_pool=64,
                        start_points=start_points)
        outcome = search.run(10)
        assert outcome.priced == len(screen.priced[0]) == priced
        assert outcome.transferred == len(start_points)
        assert [entry.point for entry in outcome.history.entries[:len(start_points)]] == list(start_points)


def test_a_screen_that_prices_nothing_leaves_random_starts():
    outcome, evaluator = search_with_screen(PricingScreen(price_nothing=True))
    assert outcome.priced == 32 and outcome.history.num_ok > 0
    assert len(evaluator.calls) == 10


def test_resumed_points_are_not_screened_again(tmp_path):
    log = tmp_path / "records.jsonl"
    tune(trials=6, log=str(log))
    screen = PricingScreen()
    from explore.search import Search

    history = resumed_history(str(log), GMM, get_target("llvm"), space_of(GMM))
    outcome = Search(GMM, space_of(GMM), FakeEvaluator(), "q", start_screen=screen, start_pool=32).run(10, history)
    assert screen.priced == [] and outcome.priced == 0


def test_start_pool_needs_a_measuring_evaluator():
    modelled = FakeEvaluator()
    modelled.judged_by = "modelled"
    with pytest.raises(ExplorationError, match="evaluator is a model already"):
        tune(trials=5, evaluator=modelled, start_pool=16)
    with pytest.raises(ExplorationError, match="start_pool must be 0 or more, got -1"):
        tune(trials=5, start_pool=-1)


# ---------------------------------------------------------------- starts carried over from other tasks

OTHER_GMM = get_task("GMM", 32, 64, 128)


def test_each_other_tasks_best_config_moves_to_this_space(tmp_path):
    from explore.transfer import transferred_points

    log = tmp_path / "network.jsonl"
    other, _ = tune(OTHER_GMM, trials=20, log=str(log))
    tune(GMM, trials=10, log=str(log))     # this task's own records are not carried over
    tune(CONV, trials=10, log=str(log))    # nor a space with other knobs
    records, space = load_records(log), space_of(GMM)
    points = transferred_points(space, records, GMM, get_target("llvm"), count=4)
    assert points[0] == space.nearest_point(other.config)
    # Then the other task's best of each other kind of kernel, so each kind starts from it too.
    best_of_kind = {}
    for record in sorted((r for r in records if r.ok and r.same_task(OTHER_GMM)), key=lambda r: -r.gflops):
        point = space.nearest_point(record.config)
        best_of_kind.setdefault(space.family(point), point)
    assert len(best_of_kind) >= 2 and sorted(points) == sorted(best_of_kind.values())
    assert transferred_points(space, records, GMM, get_target("llvm"), count=1) == points[:1]
    other_cpu = get_target("llvm -mcpu=skylake" if get_target("llvm").cpu != "skylake" else "llvm -mcpu=znver4")
    assert transferred_points(space_of(GMM), records, GMM, other_cpu, count=4) == []


def test_a_config_carries_over_across_knobs_only_some_shapes_have(tmp_path):
    from explore.transfer import transferred_points

    lanes = get_target("llvm").vector_lanes
    # Output rows a multiple of the vector width offer a vectorised-axis knob and a blocking knob;
    # one row more offers neither. A 1x1 convolution has no kernel loops to split.
    rows_blockable = get_task("C2D", 1, 4, 2 * lanes, 2 * lanes, 4, 3, 1, 1)
    rows_odd = get_task("C2D", 1, 4, 2 * lanes + 1, 2 * lanes + 1, 4, 3, 1, 1)
    pointwise = get_task("C2D", 1, 4, 2 * lanes + 1, 2 * lanes + 1, 4, 1, 1, 0)
    blockable_space, odd_space, pointwise_space = space_of(rows_blockable), space_of(rows_odd), space_of(pointwise)
    extra = {knob.name for knob in blockable_space.knobs} - {knob.name for knob in odd_space.knobs}
    assert "O.vector" in extra and any(name.startswith("O.block.") for name in extra)
    log = tmp_path / "network.jsonl"
    blockable, _ = tune(rows_blockable, trials=10, log=str(log))
    odd, _ = tune(rows_odd, trials=10, log=str(log))
    tune(pointwise, trials=10, log=str(log))
    records, target = load_records(log), get_target("llvm")

    (into_odd,) = transferred_points(odd_space, records, rows_odd, target, count=1)
    shared = {name: value for name, value in blockable.config.to_dict().items() if name not in extra}
    assert into_odd == odd_space.nearest_point(Config.from_dict(shared))  # the knobs it lacks dropped
    (into_blockable,) = transferred_points(blockable_space, records, rows_blockable, target, count=1)
    config = blockable_space.config(into_blockable)
    first_values = {knob.name: knob.values[0] for knob in blockable_space.knobs if knob.name in extra}
    assert all(config[name] == value for name, value in first_values.items())
    filled = Config.from_dict({**odd.config.to_dict(), **first_values})
    assert config["O.split.k"] == blockable_space.config(blockable_space.nearest_point(filled))["O.split.k"]
    # The 1x1 layer merges rows and columns into one axis, which the 3x3 layers' configs do not
    # split: nothing carries over between them, either way.
    assert transferred_points(pointwise_space, records, pointwise, target, count=4) == []
    without_pointwise = [record for record in records if not record.same_task(pointwise)]
    assert transferred_points(odd_space, records, rows_odd, target, count=4) == \
        transferred_points(odd_space, without_pointwise, rows_odd, target, count=4)


def test_a_vectorised_axis_this_shape_does_not_offer_falls_back_to_the_first(tmp_path):
    from explore.records import Record
    from explore.transfer import transferred_points

    lanes = get_target("llvm").vector_lanes
    # Rows a multiple of the vector width may be vectorised; one row more may not (columns and
    # output channels still may).
    rows_vectorisable = get_task("C2D", 1, 4, 2 * lanes, 2 * lanes, lanes, 3, 1, 1)
    rows_odd = get_task("C2D", 1, 4, 2 * lanes + 1, 2 * lanes + 1, lanes, 3, 1, 1)
    vector_knob = {knob.name: knob for knob in space_of(rows_odd).knobs}["O.vector"]
    assert "h" in {knob.name: knob for knob in space_of(rows_vectorisable).knobs}["O.vector"].values
    assert "h" not in vector_knob.values
    log = tmp_path / "network.jsonl"
    tune(rows_vectorisable, trials=10, log=str(log))
    (best,) = best_records(load_records(log), 1)
    along_rows = Record({**best.data, "config": {**best.data["config"], "O.vector": "h"}}, best.line)

    odd_space = space_of(rows_odd)
    (point,) = transferred_points(odd_space, [along_rows], rows_odd, get_target("llvm"), count=1)
    moved = odd_space.config(point)
    assert moved["O.vector"] == vector_knob.values[0]
    assert moved["O.split.k"] == odd_space.config(odd_space.nearest_point(
        Config.from_dict({**best.data["config"], "O.vector": vector_knob.values[0]})))["O.split.k"]


def test_a_gmm_config_carries_over_to_a_1x1_convolution_by_role(tmp_path):
    from explore.transfer import transferred_points

    lanes = get_target("llvm").vector_lanes
    gmm = get_task("GMM", 4 * lanes, 8 * lanes, 64)
    pointwise = get_task("C2D", 1, 64, 2, 4 * lanes, 4 * lanes, 1, 1, 0)   # O[b, k, hw] = sum_rc pad W
    windowed = get_task("C2D", 1, 64, 2, 4 * lanes, 4 * lanes, 3, 1, 1)
    log = tmp_path / "network.jsonl"
    best, _ = tune(gmm, trials=20, log=str(log))
    records, target = load_records(log), get_target("llvm")

    space = space_of(pointwise)
    (point,) = transferred_points(space, records, pointwise, target, count=1)
    moved = dict(space.config(point).values)
    renames = {"i": "k", "j": "hw", "rk": "rc", "A": "W", "B": "pad"}
    knobs = {knob.name: knob for knob in space.knobs}
    for name, value in best.config.values:
        parts = name.split(".")
        name = ".".join(renames.get(part, part) for part in parts)
        if name.startswith("O.split."):
            assert moved[name] == knobs[name].values[knobs[name].nearest_index(value)]
        elif name in moved:
            assert moved[name] == renames.get(value, value)
    pad_knobs = [knob for knob in space.knobs if knob.name.startswith("pad.")]   # no counterpart in GMM
    assert pad_knobs and all(moved[knob.name] == knob.values[0] for knob in pad_knobs)
    # A 3x3 convolution's rows, columns and kernel loops play no part of GMM's.
    assert transferred_points(space_of(windowed), records, windowed, target, count=4) == []


def test_carried_over_starts_are_measured_first_beside_random_ones(tmp_path):
    from explore.transfer import transferred_points

    log = tmp_path / "network.jsonl"
    other, _ = tune(OTHER_GMM, trials=20, log=str(log))
    carried = transferred_points(space_of(GMM), load_records(log), GMM, get_target("llvm"), count=4,
                                 more=(TRANSFERRED_PER_START - 1) * 4)
    result, evaluator = tune(GMM, trials=12, log=str(log), transfer_from=str(log))
    assert carried[0] == space_of(GMM).nearest_point(other.config)
    assert result.transferred_starts == len(carried) and evaluator.calls[:len(carried)] == carried
    assert len(evaluator.calls) == 12 and len(set(evaluator.calls[:len(carried) + 4])) == len(carried) + 4  # and 4 usual starts
    alone, _ = tune(GMM, trials=12, transfer_from=str(tmp_path / "missing.jsonl"))
    assert alone.transferred_starts == 0


def network_of_three_gmms(tmp_path):
    """A record file holding three other GMM shapes' searches."""
    log = tmp_path / "network.jsonl"
    for shape in ((32, 64, 128), (128, 32, 64), (64, 128, 32)):
        tune(get_task("GMM", *shape), trials=24, log=str(log))
    return log


def test_a_search_carries_over_more_points_than_it_has_starts(tmp_path):
    from explore.transfer import transferred_points

    log = network_of_three_gmms(tmp_path)
    carried = transferred_points(space_of(GMM), load_records(log), GMM, get_target("llvm"), count=4,
                                 more=(TRANSFERRED_PER_START - 1) * 4)
    result, evaluator = tune(GMM, trials=16, starts=4, log=str(log), transfer_from=str(log))
    assert result.transferred_starts == len(carried) > 4 and evaluator.calls[:len(carried)] == carried


def test_the_further_points_carried_over_are_of_the_broad_kinds_the_first_cover(tmp_path):
    from explore.transfer import transferred_points

    records, space, target = load_records(network_of_three_gmms(tmp_path)), space_of(GMM), get_target("llvm")
    everything = transferred_points(space, records, GMM, target, count=100)
    first, *more = transferred_points(space, records, GMM, target, count=1, more=3)
    assert first == everything[0] and more
    assert all(space.broad_family(point) == space.broad_family(first) for point in more)
    # Points of other broad kinds were there to take, some of them faster.
    others = [point for point in everything if space.broad_family(point) != space.broad_family(first)]
    assert others and everything.index(others[0]) < everything.index(more[-1])


def test_a_resumed_search_first_measures_what_other_tasks_found_since(tmp_path):
    from explore.transfer import transferred_points

    log = tmp_path / "network.jsonl"
    tune(GMM, trials=8, log=str(log), transfer_from=str(log))   # the first pass: nothing to carry over yet
    other, _ = tune(OTHER_GMM, trials=20, log=str(log))
    carried = transferred_points(space_of(GMM), load_records(log), GMM, get_target("llvm"), count=4,
                                 more=(TRANSFERRED_PER_START - 1) * 4)
    assert carried[0] == space_of(GMM).nearest_point(other.config)
    result, evaluator = tune(GMM, trials=16, log=str(log), resume=True, transfer_from=str(log))
    assert result.transferred_starts == len(carried) and evaluator.calls[:len(carried)] == carried
    assert len(result.history) == 16 and len(evaluator.calls) == 8
    # A later pass does not measure them again.
    result, evaluator = tune(GMM, trials=20, log=str(log), resume=True, transfer_from=str(log))
    assert result.transferred_starts == 0 and not set(carried) & set(evaluator.calls) and len(evaluator.calls) == 4


# ---------------------------------------------------------------- records

RECORD_KEYS = {"task", "target", "config", "result", "error", "time", "version", "method", "seed", "point",
               "origin", "seconds", "gflops", "elapsed", "trial"}


def test_every_evaluated_point_is_one_record_line(tmp_path):
    log = tmp_path / "run.jsonl"
    result, evaluator = tune(trials=12, log=str(log))
    lines = [line for line in log.read_text().splitlines() if '"claim"' not in line]  # claims: see test_records
    assert len(lines) == 12
    target = get_target("llvm").identity()
    space = space_of(GMM)
    for line, point in zip(lines, evaluator.calls):
        data = json.loads(line)
        assert RECORD_KEYS <= set(data)
        assert data["task"]["name"] == "GMM" and data["task"]["args"] == [64, 64, 64]
        assert data["target"] == target and data["target"]["cores"] >= 1  # capabilities included
        assert data["target"]["cpu"] and len(data["target"]["features_digest"]) == 16  # which CPU, in short
        assert space.point(space.config(point).from_dict(data["config"])) == point
        assert data["result"]["status"] in ("ok", "wrong_answer")
        assert (data["error"] == "") == (data["result"]["status"] == "ok")


def test_a_corrupt_line_is_reported_with_file_and_line_and_skipped(tmp_path):
    log = tmp_path / "run.jsonl"
    tune(trials=6, log=str(log))
    lines = log.read_text().splitlines()
    lines.insert(2, '{"task": {"name": "GMM", "args": [64, 64')       # torn JSON
    lines.insert(4, '{"config": {}}')                                   # fields missing
    log.write_text("\n".join(lines) + "\n")
    with pytest.warns(CorruptRecordWarning) as caught:
        records = load_records(log)
    assert len(records) == 6
    reports = [str(w.message) for w in caught]
    assert any(f"{log}:3: skipped a corrupt record" in text for text in reports)
    assert any(f"{log}:5: skipped a corrupt record (missing task, target, result)" in text for text in reports)


def test_resume_continues_without_re_evaluating(tmp_path):
    log = tmp_path / "run.jsonl"
    first, first_eval = tune(trials=15, log=str(log), seed=2)
    torn_line = len(log.read_text().splitlines()) + 1
    with open(log, "a") as torn:  # the killed run's last, half-written line
        torn.write('{"task": {"name": "GMM"')
    second_eval = FakeEvaluator()
    with pytest.warns(CorruptRecordWarning, match=f":{torn_line}: skipped"):
        second, _ = tune(trials=30, log=str(log), resume=True, seed=2, evaluator=second_eval)
    assert second.trials == 30 and second.evaluated == 15
    assert len(second_eval.calls) == 15
    assert not set(second_eval.calls) & set(first_eval.calls)
    assert second.gflops >= first.gflops
    with pytest.warns(CorruptRecordWarning):
        records = load_records(log)  # the torn line is still reported; the appended ones are whole
    assert len(records) == 30


def test_resume_is_deterministic_for_a_seed_and_record_file(tmp_path):
    runs = []
    for name in ("a", "b"):
        log = tmp_path / f"{name}.jsonl"
        tune(trials=10, log=str(log), seed=5)
        evaluator = FakeEvaluator()
        tune(trials=25, log=str(log), resume=True, seed=5, evaluator=evaluator)
        runs.append(evaluator.calls)
    assert runs[0] == runs[1]


def test_resume_ignores_records_of_another_task(tmp_path):
    log = tmp_path / "run.jsonl"
    tune(get_task("GMM", 32, 32, 32), trials=5, log=str(log))
    history = resumed_history(log, GMM, get_target("llvm"), space_of(GMM))
    assert len(history) == 0


def test_resume_keeps_only_moves_this_space_has(tmp_path):
    log = tmp_path / "run.jsonl"
    tune(trials=12, log=str(log), seed=3)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    records = [line for line in lines if "result" in line]   # the file also holds claim lines
    moved = [n for n, record in enumerate(records) if record["origin"]]
    renamed, out_of_range = moved[:2]
    records[renamed]["origin"]["direction_name"] = "O.split.i(9, 9)"   # a move of another revision
    records[out_of_range]["origin"]["direction"] = 10_000
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    history = resumed_history(log, GMM, get_target("llvm"), space_of(GMM))
    origins = [entry.origin for entry in history]
    assert len(history) == 12 and origins[renamed] is None and origins[out_of_range] is None
    assert all(origins[n] is not None for n in moved[2:]) and len(moved) > 2


def test_resume_needs_a_log():
    with pytest.raises(ExplorationError, match="resume needs a record file"):
        tune(trials=5, resume=True)


def test_the_best_record_replays_the_best_config(tmp_path):
    log = tmp_path / "run.jsonl"
    result, _ = tune(trials=20, log=str(log))
    (best,) = best_records(load_records(log), 1, GMM, get_target("llvm"))
    assert best.config == result.config
    assert best.seconds == pytest.approx(fake_seconds(result.config))
    space = space_of(GMM)
    assert space.schedule(best.config).to_json() == result.schedule.to_json()


def test_build_best_without_records_says_so(tmp_path):
    log = tmp_path / "run.jsonl"
    log.write_text("")
    with pytest.raises(ExplorationError, match="no successful record"):
        build_best(log, GMM)


# ---------------------------------------------------------------- evaluators

def test_evaluation_round_trips_through_json():
    failed = Evaluation("timeout", error="worker killed after 60.0 s")
    assert Evaluation.from_dict(json.loads(json.dumps(failed.to_dict()))) == failed
    assert failed.seconds == math.inf and not failed.ok


def test_evaluator_for_names_what_is_missing():
    assert evaluator_for("llvm").name == "cpu"
    assert evaluator_for("cuda", "model").name == "gpu-model"
    with pytest.raises(ExplorationError, match="^unknown evaluator 'guess' for cpu targets; choose one of measure, model$"):
        evaluator_for("llvm", "guess")
    assert evaluator_for("llvm", "model").name == "cpu-model"
    with pytest.raises(ExplorationError, match="unknown evaluator 'measure' for fpga targets; choose one of model"):
        evaluator_for("fpga", "measure")
    assert evaluator_for("fpga").name == "fpga-model"


def test_measuring_on_a_gpu_says_in_one_line_that_none_is_here(monkeypatch):
    import codegen.cuda_runtime as runtime

    monkeypatch.setattr(runtime, "unavailable_reason", lambda: "no GPU available: cupy is not installed")
    with pytest.raises(ExplorationError, match="no GPU available: cupy is not installed; tune with the static GPU "
                                               "model instead") as raised:
        evaluator_for("cuda")
    assert "\n" not in str(raised.value)


# ---------------------------------------------------------------- public API and command line

def test_importing_flexsched_does_not_import_torch():
    code = ("import sys, flexsched\n"
            "assert all(callable(getattr(flexsched, name)) for name in ('optimize', 'build', 'build_best', "
            "'register_task', 'get_task', 'list_tasks', 'get_target'))\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'llvmlite', 'explore', 'codegen', "
            "'analysis', 'space', 'networkx'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def run_cli(*argv):
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_best_prints_the_fastest_records_first(tmp_path):
    log = tmp_path / "run.jsonl"
    tune(trials=15, log=str(log))
    status, text = run_cli("best", str(log), "--top", "3")
    assert status == 0
    lines = text.splitlines()
    assert lines[0].startswith(f"GMM(64, 64, 64) on {get_target('llvm').name}: 15 records,")
    gflops = [float(line.split()[1]) for line in lines[1:]]
    assert len(gflops) == 3 and gflops == sorted(gflops, reverse=True)
    status, text = run_cli("best", str(log), "--top", "2", "--json")
    best_seconds = [json.loads(line)["seconds"] for line in text.splitlines()]
    assert len(best_seconds) == 2 and best_seconds[0] <= best_seconds[1]


def test_best_of_a_missing_file_is_a_one_line_error(tmp_path, capsys):
    status, _ = run_cli("best", str(tmp_path / "nothing.jsonl"))
    assert status == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_tune_resume_without_log_is_a_one_line_error(capsys):
    status, _ = run_cli("tune", "GMM", "16", "16", "16", "--trials", "2", "--resume")
    assert status == 2
    assert "resume needs a record file" in capsys.readouterr().err


def test_tune_passes_the_fpga_device_through(capsys, monkeypatch):
    seen = {}

    def fake_optimize(task, target, **options):
        seen["target"] = target
        raise ExplorationError("stop here")

    monkeypatch.setattr("explore.optimize.optimize", fake_optimize)
    status, _ = run_cli("tune", "GMM", "16", "16", "16", "--target", "fpga", "--device", "vu9p")
    assert status == 2 and seen["target"] == "fpga:vu9p"
