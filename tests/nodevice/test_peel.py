"""Peeling a guarded last tile off a loop (codegen.peel), and the splits that need it."""

import json

import numpy as np
import pytest

from analysis import analyze
from cases import SHAPES
from codegen.interpret import run
from codegen.ir import For, IfThenElse, walk_stmts
from codegen.legalize import legalize
from codegen.lower import lower
from codegen import peel as peel_module
from codegen.peel import peel_tails
from flexsched.registry import get_task
from flexsched.schedule import Schedule
from space import generate
from space.knobs import GUARD_MULTIPLES, GUARD_SLACK_PERCENT, SplitKnob

ROWS, DEPTH, COLUMNS, TILE = 50, 16, 8, 6   # 50 rows in 9 tiles of 6: the last has 2 rows


def tiled_gmm():
    """A GMM whose row loop is split by a factor that leaves a remainder tile (a guard)."""
    task = get_task("GMM", ROWS, DEPTH, COLUMNS)
    steps = [{"kind": "split", "node": "O", "loop": "i", "factors": [-(-ROWS // TILE), TILE]},
             {"kind": "unroll", "node": "O", "loop": "i.1"}]
    schedule = Schedule.from_json(json.dumps(steps))
    return task, lower(task, schedule.apply(analyze(task))).func


def guards(stmt):
    return [s for s in walk_stmts(stmt) if isinstance(s, IfThenElse)]


def loops(stmt):
    return [s for s in walk_stmts(stmt) if isinstance(s, For)]


def test_the_last_tile_is_peeled_off_and_only_it_keeps_the_guard():
    task, func = tiled_gmm()
    assert guards(func.body), "the remainder tile should be guarded before peeling"
    peeled = peel_tails(func)
    tile_loop = next(loop for loop in loops(peeled.body) if loop.var.name == "O.i.0")
    assert tile_loop.extent == -(-ROWS // TILE) - 1
    assert not guards(tile_loop.body)
    assert guards(peeled.body), "the peeled last tile still needs its guard"

    inputs = task.random_inputs(seed=3)
    out = np.empty(peeled.params[-1].shape, np.float32)
    run(legalize(peeled), [*inputs, out])
    np.testing.assert_allclose(out, task.evaluate(*inputs)[0], rtol=1e-5, atol=1e-5)


def test_a_loop_without_a_remainder_is_left_alone():
    task = get_task("GMM", 54, DEPTH, COLUMNS)   # 54 rows: nine whole tiles of 6
    schedule = Schedule.from_json(json.dumps([{"kind": "split", "node": "O", "loop": "i", "factors": [9, 6]}]))
    func = lower(task, schedule.apply(analyze(task))).func
    peeled = peel_tails(func)
    assert [(loop.var.name, loop.extent) for loop in loops(peeled.body)] == \
        [(loop.var.name, loop.extent) for loop in loops(func.body)]


def test_a_short_loop_keeps_its_guarded_last_iteration():
    """Four tiles: the last is a quarter of the work, too large a share for a second copy of the code."""
    task = get_task("GMM", 20, DEPTH, COLUMNS)
    steps = [{"kind": "split", "node": "O", "loop": "i", "factors": [4, TILE]}, {"kind": "unroll", "node": "O", "loop": "i.1"}]
    func = lower(task, Schedule.from_json(json.dumps(steps)).apply(analyze(task))).func
    assert 4 < peel_module.MIN_PEELED_EXTENT and guards(func.body)
    assert [(loop.var.name, loop.extent) for loop in loops(peel_tails(func).body)] == \
        [(loop.var.name, loop.extent) for loop in loops(func.body)]


def test_padded_inner_splits_run_their_tiles_at_one_level_or_under_an_exact_splits_middle_factors():
    knob = SplitKnob("O.split.i", 1024, 4, caps=(None, None, None, 8), padded_inner=True)
    plain = SplitKnob("O.split.i", 1024, 4, caps=(None, None, None, 8))
    added = set(knob.values) - set(plain.values)
    middles = {value[1:-1] for value in plain.values}
    assert {(1, 1, 171, 6), (1, 1, 147, 7), (2, 1, 86, 6), (4, 43, 1, 6), (22, 4, 2, 6)} <= added
    for value in added:
        inner, tiles = value[-1], -(-1024 // value[-1])
        outermost, *middle = value[:-1]
        assert 1024 % inner, value
        if sorted(value[:-1])[:-1] == [1, 1]:   # the tiles at one level
            assert np.prod(value[:-1]) == tiles, value
        elif tuple(middle) in middles:          # or under an exact split's middle factors, padded a little
            assert outermost == -(-1024 // (np.prod(middle) * inner)), value
            assert np.prod(value) * 100 <= GUARD_SLACK_PERCENT * 1024, value
        else:                                   # or at one level under an outermost factor that rounds them up
            assert outermost in GUARD_MULTIPLES and sorted(middle)[0] == 1, value
            assert max(middle) == -(-tiles // outermost) and outermost == -(-1024 // (max(middle) * inner)), value


def test_a_move_gives_a_split_a_padded_innermost_factor_and_keeps_its_middle_ones():
    """4 x 2 x 2 rows over 256 to 3 rows: the move that enlarges the innermost factor at the expense
    of the outermost one finds 11 x 4 x 2 x 3 (264 rows, 8 guarded off)."""
    knob = SplitKnob("O.split.k", 256, 4, caps=(None, None, None, 4), padded_inner=True)
    enlarge_innermost = knob.directions.index((3, 0))
    moved = knob.move(knob.index_of((16, 4, 2, 2)), enlarge_innermost)
    assert knob.values[moved] == (11, 4, 2, 3)


@pytest.mark.parametrize("extent", [14, 28, 56, 112, 196, 256, 784, 1024, 3136])
def test_every_padded_inner_split_is_one_a_schedule_accepts(extent):
    """Each outer factor but the first must leave the first as the ceil-divided rest of the extent."""
    task = get_task("GMM", extent, DEPTH, COLUMNS)
    knob = SplitKnob("O.split.i", extent, 4, caps=(None, None, None, 8), padded_inner=True)
    for value in knob.values:
        assert value[0] == -(-extent // np.prod(value[1:])), value
    for value in knob.values[::7]:
        Schedule.from_json(json.dumps([{"kind": "split", "node": "O", "loop": "i", "factors": list(value)}])).apply(analyze(task))


def test_a_tile_count_rounded_up_to_the_outermost_factor_lowers_to_the_reference():
    """10 rows in 2 x 2 tiles of 4 cover 16: the third tile is partly past the end, the fourth wholly."""
    task = get_task("GMM", 10, DEPTH, COLUMNS)
    steps = [{"kind": "split", "node": "O", "loop": "i", "factors": [2, 2, 4]}, {"kind": "unroll", "node": "O", "loop": "i.2"}]
    func = peel_tails(lower(task, Schedule.from_json(json.dumps(steps)).apply(analyze(task))).func)
    inputs = task.random_inputs(seed=3)
    out = np.empty(func.params[-1].shape, np.float32)
    run(legalize(func), [*inputs, out])
    np.testing.assert_allclose(out, task.evaluate(*inputs)[0], rtol=1e-5, atol=1e-5)


def test_register_tiles_may_take_rows_that_leave_a_remainder():
    space = generate(analyze(get_task("GMM", 64, 64, 64)), "llvm")
    knobs = {knob.name: knob for knob in space.knobs}
    assert any(64 % value[-1] for value in knobs["O.split.i"].values)
    # The vectorised (last) loop's remainder is masked by its lanes: it keeps the plain splits.
    vectorised = knobs["O.split.j"]
    assert vectorised.values == SplitKnob(vectorised.name, 64, 4, caps=vectorised.caps, floors=vectorised.floors).values


def test_peeled_random_cpu_points_match_the_reference(monkeypatch):
    """Of 40 random CPU points per operator, up to two whose kernel peeling changes are interpreted;
    the test shapes are small, so short loops and nested peels are allowed here."""
    monkeypatch.setattr(peel_module, "MIN_PEELED_EXTENT", 2)
    monkeypatch.setattr(peel_module, "MAX_PEELS", 3)
    checked = 0
    for name in sorted(SHAPES):
        task = get_task(name, *SHAPES[name])
        info = analyze(task)
        space = generate(info, "llvm")
        rng = np.random.default_rng(11)
        inputs = task.random_inputs(seed=5)
        with np.errstate(divide="ignore"):  # numpy's x // 0 == 0 is the semantics pinned
            expected = task.evaluate(*inputs)
        peeled_here = 0
        for _ in range(40):
            if peeled_here == 2:
                break
            schedule = space.schedule(space.random_point(rng))
            func = lower(task, schedule.apply(info)).func
            peeled = peel_tails(func)
            if len(loops(peeled.body)) == len(loops(func.body)):
                continue
            outputs = [np.empty(b.shape, b.dtype) for b in peeled.params[len(inputs):]]
            run(legalize(peeled), [*inputs, *outputs])
            for out, ref in zip(outputs, expected):
                scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
                np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * scale,
                                           err_msg=f"{task} under {schedule.to_json()}")
            peeled_here += 1
        checked += peeled_here
    assert checked >= 8, f"only {checked} random points were peeled: the test no longer exercises peeling"
