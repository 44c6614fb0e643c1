"""A numpy interpreter of the loop IR that also emulates GPU kernels on the CPU.

CPU-style kernels have the semantics of running sequentially (parallel, vectorized and unrolled
loops as serial loops). A GPU launch runs all its threads at once, vectorised over lanes
(lanes.py): entering a blockIdx or threadIdx loop replicates every lane, each statement runs
once for all active lanes with numpy, and loops inside a thread (serial, unrolled, vthread) run
as Python loops. A condition that differs between lanes runs each side on the lanes that take
it. With check=True, what lock-step emulation would hide is reported (races.py): data races on
shared memory between barriers and on global memory within a launch, and barriers reached by
only part of a block.

Every fault is an InterpretError with one line naming the buffer, loop or index at fault.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir import LOOP_KINDS, Allocate, Barrier, For, IfThenElse, PrimFunc, Seq, Store, walk_stmts
from .lane_exprs import compile_expr
from .lanes import (BLOCK_LOOPS, THREAD_LOOPS, InterpretError, Lanes, Launch, Machine, Storage, allocate,
                    element_keys, splitter, storage_lookup, touch)
from .races import PhaseLog

__all__ = ["InterpretError", "LaunchReport", "RunReport", "run"]

# Most lanes a sequential loop run as lanes may create (beyond it, its iterations run one by one).
_MAX_LANES = 1 << 14


@dataclass(frozen=True)
class LaunchReport:
    """One emulated GPU launch: its grid, its block size, the barriers it executed."""

    blocks: int
    threads: int      # threads per block
    barriers: int     # barrier statements executed (each by every block that reached it)


@dataclass(frozen=True)
class RunReport:
    """What a run did: its GPU launches in order (none for a CPU-style kernel)."""

    launches: tuple


def run(func: PrimFunc, arrays, check=True) -> RunReport:
    """Execute func over numpy arrays, one per func.params in order (inputs, outputs,
    workspaces), writing outputs in place like a compiled kernel.

    check=True also reports data races and divergent barriers of GPU launches.
    """
    arrays = list(arrays)
    bound = _bind(func, arrays)
    body = _compile_stmt(func.body)
    machine = Machine(check)
    machine.mem.update({id(buffer): storage for buffer, storage in zip(func.params, bound)})
    with np.errstate(all="ignore"):  # IEEE results (inf, NaN) are values here, as in a kernel
        body(Lanes.root(machine))
    for array, storage in zip(arrays, bound):
        if not array.flags.c_contiguous and array.flags.writeable:
            array[...] = storage.data.reshape(array.shape)  # it ran on a contiguous copy
    return RunReport(tuple(machine.launches))


def _bind(func, arrays):
    """One global storage per parameter, viewing the caller's array where it can."""
    if len(arrays) != len(func.params):
        names = ", ".join(buffer.name for buffer in func.params)
        raise InterpretError(f"kernel '{func.name}' takes {len(func.params)} arrays ({names}), got {len(arrays)}")
    bound = []
    for buffer, array in zip(func.params, arrays):
        if not isinstance(array, np.ndarray):
            raise InterpretError(f"parameter '{buffer.name}': expected a numpy array, got {type(array).__name__}")
        if array.shape != tuple(buffer.shape):
            raise InterpretError(f"parameter '{buffer.name}': array of shape {array.shape}, "
                                 f"expected {tuple(buffer.shape)}")
        if array.dtype != np.dtype(buffer.dtype):
            raise InterpretError(f"parameter '{buffer.name}': array of dtype {array.dtype}, expected {buffer.dtype}")
        flat = array.reshape(-1) if array.flags.c_contiguous else np.ascontiguousarray(array).reshape(-1)
        bound.append(Storage(buffer, flat, None))
    return bound


# ---------------------------------------------------------------- statements

def _compile_stmt(stmt):
    """stmt as a function of the active lanes that executes it."""
    if isinstance(stmt, Seq):
        parts = [_compile_stmt(part) for part in stmt.stmts]

        def sequence(lanes):
            for part in parts:
                part(lanes)
        return sequence
    if isinstance(stmt, For):
        return _compile_for(stmt)
    if isinstance(stmt, Store):
        return _compile_store(stmt)
    if isinstance(stmt, IfThenElse):
        return _compile_if(stmt)
    if isinstance(stmt, Allocate):
        return _compile_allocate(stmt)
    if isinstance(stmt, Barrier):
        return _barrier
    raise InterpretError(f"cannot interpret statement {type(stmt).__name__}: {stmt!r}")


def _is_gpu(kind):
    return kind in BLOCK_LOOPS or kind in THREAD_LOOPS


def _compile_for(loop):
    if loop.kind not in LOOP_KINDS:
        raise InterpretError(f"loop '{loop.var.name}' has unknown kind '{loop.kind}'")
    body = _compile_stmt(loop.body)
    key, var, extent, kind = id(loop.var), loop.var, loop.extent, loop.kind
    written = {id(s.buffer) for s in walk_stmts(loop.body) if isinstance(s, Store)}
    if _is_gpu(kind):
        def parallel(lanes):
            inner = lanes.expand(var, extent, kind)
            started = inner.launch is None  # the outermost GPU loop launches a kernel
            if started:
                inner.launch = Launch(written)
            inner.launch.blocks = max(inner.launch.blocks, inner.block_stride)
            inner.launch.threads = max(inner.launch.threads, inner.thread_stride)
            body(inner)
            if started:
                launch = inner.launch
                lanes.machine.launches.append(LaunchReport(launch.blocks, launch.threads, launch.barriers))
        return parallel
    values = [np.int64(i) for i in range(extent)]

    def sequential(lanes):
        env = lanes.vars
        try:
            for value in values:
                env[key] = value
                body(lanes)
        finally:
            env.pop(key, None)  # the variable is out of scope after its loop
    if extent < 2 or not written or any(isinstance(s, For) and _is_gpu(s.kind) for s in walk_stmts(loop.body)):
        return sequential
    return _speculative(var, extent, kind, body, written, sequential)


def _speculative(var, extent, kind, body, written, sequential):
    """A sequential loop outside GPU launches, run with its iterations as lanes while that
    cannot be told from running them in order, and in order from the first time it could.

    Lock-step lanes compute what the loop computes exactly when no iteration touches an element
    another iteration writes; the speculation's phase logs check that on every access. A loop
    caught once (a reduction loop, typically) runs in order from then on, after its memory is
    restored; an error inside is replayed in order, so it is reported as the loop would raise it.
    """
    as_lanes = [True]

    def speculative(lanes):
        if not as_lanes[0] or lanes.launch is not None or lanes.n * extent > _MAX_LANES:
            return sequential(lanes)
        mem = lanes.machine.mem
        saved = [(mem[key], mem[key].data.copy()) for key in written if key in mem]
        speculation = _Speculation(len(lanes.levels), written)
        inner = lanes.expand(var, extent, kind)
        inner.speculations = lanes.speculations + (speculation,)
        try:
            body(inner)
            return None
        except _Misspeculation as missed:
            if missed.speculation is not speculation:
                raise  # an outer one failed: it restores everything
        except InterpretError:
            if lanes.speculations:
                raise  # the outermost speculation replays it
        for storage, data in saved:
            storage.data[...] = data
        as_lanes[0] = False
        return sequential(lanes)
    return speculative


class _Speculation:
    """Who touched what, per iteration of a sequential loop run as lanes."""

    __slots__ = ("level", "written", "logs")

    def __init__(self, level, written):
        self.level = level       # the lane level of its iterations
        self.written = written   # ids of the buffers its body stores to: only they can conflict
        self.logs = {}           # id(Storage) -> PhaseLog

    def check(self, storage, lanes, keys, writes):
        """Record an access; raise _Misspeculation where iterations would see each other."""
        if id(storage.buffer) not in self.written or (storage.level is not None and storage.level >= self.level):
            return  # read-only in the loop, or private to each iteration
        log = self.logs.get(id(storage))
        if log is None:
            log = self.logs[id(storage)] = PhaseLog(storage.data.size)
        who, keys = lanes.per_lane(lanes.levels[self.level]), lanes.per_lane(keys)
        if (log.write if writes else log.read)(keys, who) is not None:
            raise _Misspeculation(self)


class _Misspeculation(Exception):
    """Iterations of a speculation touched one element: the loop must run in order."""

    def __init__(self, speculation):
        super().__init__()
        self.speculation = speculation


def _compile_if(stmt):
    cond = compile_expr(stmt.cond)
    then_body = _compile_stmt(stmt.then_body)
    else_body = _compile_stmt(stmt.else_body) if stmt.else_body is not None else None
    split = splitter()

    def branch(lanes):
        taken = cond(lanes)
        if np.ndim(taken) == 0:
            if taken:
                then_body(lanes)
            elif else_body is not None:
                else_body(lanes)
            return
        then_lanes, else_lanes = split(taken)
        if len(then_lanes):
            then_body(lanes if len(then_lanes) == lanes.n else lanes.subset(then_lanes))
        if else_body is not None and len(else_lanes):
            else_body(lanes if len(else_lanes) == lanes.n else lanes.subset(else_lanes))
    return branch


def _compile_allocate(stmt):
    buffer, body, key = stmt.buffer, _compile_stmt(stmt.body), id(stmt.buffer)

    def scope(lanes):
        mem = lanes.machine.mem
        outer = mem.get(key)
        mem[key] = allocate(buffer, lanes)
        try:
            body(lanes)
        finally:
            if outer is None:
                del mem[key]
            else:
                mem[key] = outer
    return scope


def _barrier(lanes):
    launch = lanes.launch
    if launch is None:
        return  # sequential code has nothing to synchronise
    launch.barriers += 1
    rows = lanes.per_lane(lanes.levels[lanes.block_level])
    arrived = np.bincount(rows, minlength=lanes.sizes[lanes.block_level])  # threads here, per block
    if lanes.machine.check:
        partial = (arrived > 0) & (arrived != lanes.thread_stride)
        if partial.any():
            row = int(np.argmax(partial))
            block = int(lanes.per_lane(lanes.block)[int(np.argmax(rows == row))])
            raise InterpretError(f"barrier reached by {arrived[row]} of {lanes.thread_stride} threads of block "
                                 f"{block}: it sits under a condition that depends on the thread")
    synchronised = np.flatnonzero(arrived)
    for storage in lanes.machine.mem.values():
        if storage.log is not None:  # shared memory: the blocks that synchronised start a new phase
            storage.log.reset(synchronised, storage.buffer.size)


def _compile_store(stmt):
    indices = [compile_expr(index) for index in stmt.indices]
    value_of = compile_expr(stmt.value)
    lookup = storage_lookup(stmt.buffer)

    def store(lanes):
        storage = lookup(lanes)
        keys = element_keys(storage, lanes, [index(lanes) for index in indices], "store to")
        value = value_of(lanes)
        touch(storage, lanes, keys, writes=True)
        if np.ndim(value) and not np.ndim(keys):
            keys = lanes.per_lane(keys)   # lanes writing one element: the last one wins
        storage.data[keys] = value        # numpy casts to the buffer's dtype, as a C store does
    return store
