"""The GPU passes on a GMM schedule: launch shape, shared tiles at block scope filled by all
threads between barriers, virtual threads folded into each thread's register tile; and the
emulator failing the kernel when a barrier is taken out. Needs nothing but the CPU."""

import numpy as np
import pytest

from analysis import analyze
from codegen.gpu_lower import launches, lower_gpu
from codegen.interpret import InterpretError, run
from codegen.ir import Allocate, Barrier, For, PrimFunc, Seq, Store, map_stmts, walk_stmts
from codegen.kernel import build
from codegen.legalize import legalize
from codegen.lower import lower
from flexsched.expr import as_expr, iter_vars_of
from flexsched.registry import get_task
from space import generate
from space.config import Config

TASK = get_task("GMM", 64, 48, 32)


def schedule(**changes):
    space = generate(analyze(TASK), "cuda")
    config = space.config(space.random_point(0)).to_dict()
    config.update({"O.split.i": (2, 2, 8, 2), "O.split.j": (2, 2, 4, 2), "O.split.rk": (6, 2, 4), "O.order": 0,
                   "O.cache": 1, "O.unroll": 0, **changes})
    return space.schedule(space.point(Config.from_dict(config)))


def gpu_func(**changes):
    return legalize(lower_gpu(lower(TASK, schedule(**changes).apply(analyze(TASK))).func))


def loops(func, kind):
    return [node for node in walk_stmts(func.body) if isinstance(node, For) and node.kind == kind]


def test_block_and_thread_loops_make_the_launch():
    func = gpu_func()
    (launch,) = launches(func)
    assert launch.grid == (4, 1, 1) and launch.block == (32, 1, 1)
    # A's tile: 2 x 8 x 2 rows of 8 reduction steps; B's: 8 steps of 2 x 4 x 2 columns
    assert [b.name for b, _ in launch.shared] == ["B_shared", "A_shared"]
    assert launch.shared_bytes == (8 * 16 + 32 * 8) * 4
    block, = loops(func, "blockIdx.x")
    assert isinstance(block.body, Allocate) and block.body.buffer.scope == "shared"   # block scope


def test_virtual_threads_become_each_threads_register_tile():
    func = gpu_func()
    assert not loops(func, "vthread")
    (tile,) = [n.buffer for n in walk_stmts(func.body) if isinstance(n, Allocate) and n.buffer.scope == "local"]
    assert tile.shape == (2, 2, 2, 2)   # vthreads (i, j) x inner (i, j)
    updates = [n for n in walk_stmts(func.body) if isinstance(n, Store) and n.buffer is tile]
    # every loop indexing the tile is unrolled, so nvcc keeps it in registers
    unrolled = {id(loop.var) for loop in loops(func, "unrolled")}
    serial_vars = {id(loop.var) for loop in loops(func, "serial")}
    tile_vars = {id(v) for store in updates for index in store.indices for v in iter_vars_of(as_expr(index, "int64"))}
    assert tile_vars and tile_vars <= unrolled and not tile_vars & serial_vars


def test_each_refill_is_fenced_by_barriers_and_spread_over_the_threads():
    func = gpu_func()
    (reduction,) = [loop for loop in loops(func, "serial") if loop.extent == 6]   # rk.0: one refill each
    parts = reduction.body.stmts if isinstance(reduction.body, Seq) else (reduction.body,)
    kinds = [type(part).__name__ for part in parts]
    assert kinds[0] == "Barrier" and kinds.count("Barrier") == 2   # before (WAR) and after (RAW) the copies
    copies = parts[1:kinds.index("Barrier", 1)]
    assert copies and all(any(isinstance(n, Store) and n.buffer.scope == "shared" for n in walk_stmts(c))
                          for c in copies)


def emulate(func):
    inputs = TASK.random_inputs(0)
    out = np.empty(TASK.outputs[0].shape, dtype="float32")
    run(func, [*inputs, out])
    return out, TASK.evaluate(*inputs)[0]


def test_the_emulator_reports_a_refill_without_its_barriers():
    func = gpu_func()
    out, ref = emulate(func)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    for dropped in (0, 1):   # the barrier before the copies, then the one after them
        seen = []

        def drop(stmt):
            if isinstance(stmt, Seq) and any(isinstance(part, Barrier) for part in stmt.stmts):
                barriers = [i for i, part in enumerate(stmt.stmts) if isinstance(part, Barrier)]
                if not seen:
                    seen.append(True)
                    kept = [part for i, part in enumerate(stmt.stmts) if i != barriers[dropped]]
                    return Seq(tuple(kept))
            return None

        broken = PrimFunc(func.name, func.params, map_stmts(func.body, drop))
        with pytest.raises(InterpretError, match="race on shared buffer '(A|B)_shared'"):
            emulate(broken)


def test_guards_of_a_ragged_split_stay_off_the_copies():
    ragged = get_task("GMM", 61, 48, 30)   # 61 rows over tiles of 32: the last block is partly empty
    space = generate(analyze(ragged), "cuda")
    config = space.config(space.random_point(0)).to_dict()
    config.update({"O.split.i": (2, 2, 8, 2), "O.split.j": (2, 2, 4, 2), "O.split.rk": (6, 2, 4), "O.cache": 1})
    func = legalize(lower_gpu(lower(ragged, space.schedule(space.point(Config.from_dict(config)))
                                    .apply(analyze(ragged))).func))
    inputs = ragged.random_inputs(0)
    out = np.empty(ragged.outputs[0].shape, dtype="float32")
    run(func, [*inputs, out])   # a barrier under a thread's guard would be reported as divergent
    np.testing.assert_allclose(out, ragged.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)


def test_a_gpu_kernel_can_be_emulated_from_its_kernel_object():
    kernel = build(TASK, schedule(), "cuda")
    inputs = TASK.random_inputs(1)
    (out,) = kernel.emulate(*inputs)
    np.testing.assert_allclose(out, TASK.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)
