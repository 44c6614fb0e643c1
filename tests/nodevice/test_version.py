"""Register tiles in two versions, unguarded where the whole tile is in bounds (codegen.version)."""

import json

import numpy as np

from analysis import analyze
from codegen.interpret import run
from codegen.ir import Allocate, For, IfThenElse, walk_stmts
from codegen.legalize import legalize
from codegen.lower import lower
from codegen.version import version_tiles
from flexsched.registry import get_task
from flexsched.schedule import Schedule

DEPTH, COLUMNS, TILE = 16, 8, 6


def register_tiled_gmm(rows, tile=TILE, unrolled_steps=False, outer=None, packed_per_step=False):
    """A GMM accumulating row tiles of `tile` in a local buffer, the outermost tile loop in parallel
    (which peeling leaves alone); the row split's outer factors are `outer` (default: just enough
    tiles), its reduction in unrolled steps of 4 if asked, and B copied at each reduction step
    inside the tile if packed_per_step."""
    task = get_task("GMM", rows, DEPTH, COLUMNS)
    factors = [*(outer or [-(-rows // tile)]), tile]
    steps = [{"kind": "cache_write", "node": "O", "scope": "local"},
             {"kind": "split", "node": "O", "loop": "i", "factors": factors},
             {"kind": "parallel", "node": "O", "loop": "i.0"},
             {"kind": "unroll", "node": "O", "loop": f"i.{len(factors) - 1}"},
             {"kind": "vectorize", "node": "O", "loop": "j"},
             {"kind": "compute_at", "node": "O.local", "consumer": "O", "loop": f"i.{len(factors) - 2}"},
             {"kind": "reorder", "node": "O.local", "order": ["rk", "i", "j"]},
             {"kind": "unroll", "node": "O.local", "loop": "i"},
             {"kind": "vectorize", "node": "O.local", "loop": "j"}]
    if unrolled_steps:
        steps[-3:-1] = [{"kind": "split", "node": "O.local", "loop": "rk", "factors": [DEPTH // 4, 4]},
                        {"kind": "reorder", "node": "O.local", "order": ["rk.0", "rk.1", "i", "j"]},
                        {"kind": "unroll", "node": "O.local", "loop": "rk.1"},
                        {"kind": "unroll", "node": "O.local", "loop": "i"}]
    if packed_per_step:
        steps += [{"kind": "cache_read", "tensor": "B", "scope": "local", "readers": ["O.local"]},
                  {"kind": "compute_at", "node": "B.local", "consumer": "O.local", "loop": "rk"}]
    schedule = Schedule.from_json(json.dumps(steps))
    return task, lower(task, schedule.apply(analyze(task))).func


def versions(func):
    """The tile-wide choice of a versioned func: if whole, the unguarded tile, else the guarded one."""
    return next(s for s in walk_stmts(version_tiles(func).body) if isinstance(s, IfThenElse)
                and isinstance(s.then_body, Allocate))


def loops(stmt):
    return {s.var.name: s.kind for s in walk_stmts(stmt) if isinstance(s, For)}


def guards(stmt):
    return [s for s in walk_stmts(stmt) if isinstance(s, IfThenElse)]


def tiles(stmt):
    return [s for s in walk_stmts(stmt) if isinstance(s, Allocate)]


def matches_reference(task, func):
    inputs = task.random_inputs(seed=5)
    out = np.empty(func.params[-1].shape, np.float32)
    run(legalize(func), [*inputs, out])
    np.testing.assert_allclose(out, task.evaluate(*inputs)[0], rtol=1e-5, atol=1e-5)


def test_a_tile_past_the_rows_runs_unguarded_wherever_it_is_whole():
    task, func = register_tiled_gmm(50)   # 9 tiles of 6 rows: the last has 2
    assert guards(func.body), "the remainder tile should be guarded"
    versioned = version_tiles(func)
    choice = next(s for s in walk_stmts(versioned.body) if isinstance(s, IfThenElse) and isinstance(s.then_body, Allocate))
    assert not guards(choice.then_body), "a whole tile runs without bounds tests"
    assert guards(choice.else_body), "the last tile keeps them"
    assert len(tiles(versioned.body)) == 2
    matches_reference(task, versioned)


def test_the_tile_wide_test_takes_the_rows_worst_value():
    task, func = register_tiled_gmm(50)
    choice = next(s for s in walk_stmts(version_tiles(func).body) if isinstance(s, IfThenElse)
                  and isinstance(s.then_body, Allocate))
    # Row i.0 * 6 + 5 is the tile's last: it must lie below 50, so tiles 0..7 are whole.
    assert str(choice.cond) == "O.i.0 * 6 < 45"


def test_a_tile_that_always_fits_is_left_alone():
    task, func = register_tiled_gmm(54)   # nine whole tiles of 6
    assert not guards(func.body)
    assert str(version_tiles(func)) == str(func)


def test_a_tile_never_whole_keeps_one_guarded_version():
    task, func = register_tiled_gmm(4)    # one tile of 6 over 4 rows: no tile is ever whole
    versioned = version_tiles(func)
    assert len(tiles(versioned.body)) == 1 and guards(versioned.body)
    matches_reference(task, versioned)


def test_a_partial_tile_keeps_its_rows_unrolled_and_rolls_its_reduction_steps():
    task, func = register_tiled_gmm(50, unrolled_steps=True)
    choice = versions(func)
    assert loops(choice.then_body)["O_local.rk.1"] == "unrolled"
    partial = loops(choice.else_body)
    assert partial["O_local.rk.1"] == "serial" and partial["O_local.i"] == "unrolled"
    matches_reference(task, version_tiles(func))


def test_a_tile_wholly_past_the_rows_is_skipped():
    """Pairs of 6-row tiles over 50 rows: the fifth pair's second tile, rows 54-59, holds no row."""
    task, func = register_tiled_gmm(50, outer=[5, 2])
    partial = versions(func).else_body
    assert isinstance(partial, IfThenElse) and partial.else_body is None
    assert str(partial.cond) == "(O.i.0 * 2 + O.i.1) * 6 < 50"
    matches_reference(task, version_tiles(func))


def test_a_tile_holding_a_copy_packed_per_reduction_step_is_tested_once_around_its_reduction():
    """The tile's accumulator, not the copy inside its reduction loop, is what gets two versions:
    tested at every step, the choice was a branch per step, and both copies' steps were one loop."""
    task, func = register_tiled_gmm(50, packed_per_step=True)
    choice = versions(func)
    assert choice.then_body.buffer.name == "O_local"
    assert not guards(choice.then_body)
    reduction = next(s for s in walk_stmts(version_tiles(func).body) if isinstance(s, For) and s.var.name == "O_local.rk")
    assert not any(isinstance(s, IfThenElse) and isinstance(s.then_body, Allocate) for s in walk_stmts(reduction))
    matches_reference(task, version_tiles(func))
