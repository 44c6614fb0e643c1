"""A numpy interpreter of the loop IR that also emulates GPU kernels on the CPU.

CPU-style kernels run sequentially (parallel, vectorized and unrolled loops as serial loops).
A GPU launch runs all its threads at once, vectorised over lanes: entering a blockIdx or
threadIdx loop replicates every current lane `extent` times and binds the loop variable to an
int64 array over the lanes; each statement then runs once for all active lanes with numpy, and
loops inside a thread (serial, unrolled, vthread) run as Python loops. A condition that differs
between lanes runs each side on the lanes that take it, so a select's or a guard's untaken side
is never evaluated (as in C). With check=True, what lock-step emulation would hide is reported:
data races on shared memory between barriers and on global memory within a launch (races.py),
and barriers reached by only part of a block.

Every fault is an InterpretError with one line naming the buffer, loop or index at fault.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flexsched import dtypes
from flexsched.errors import FlexschedError
from flexsched.expr import Binary, Call, Cast, Compare, Const, Intrinsic, IterVar, Load, Logical, Select, format_expr
# The DSL's operator tables, so the interpreter and the reference evaluator agree by construction.
from flexsched.numpy_expr import _ARITH, _COMPARE, _INTRINSICS, _MATH, _as_float

from .ir import LOOP_KINDS, Allocate, Barrier, For, IfThenElse, PrimFunc, Seq, Store, walk_stmts
from .races import PhaseLog

BLOCK_LOOPS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_LOOPS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
# Global-memory identities are block * _THREAD_SPAN + thread: blocks never exceed 2**39 here.
_THREAD_SPAN = 1 << 24
# Most lanes a sequential loop run as lanes may create (beyond it, its iterations run one by one).
_MAX_LANES = 1 << 14


class InterpretError(FlexschedError, RuntimeError):
    """A kernel that does something a compiled kernel would get wrong: bad arguments, an access
    out of bounds or out of scope, a data race, a barrier only part of a block reaches."""


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
    """Execute func over numpy arrays, one per func.params in order, writing outputs in place.

    check=True also reports data races and divergent barriers of GPU launches.
    """
    arrays = list(arrays)
    bound = _bind(func, arrays)
    body = _compile_stmt(func.body)
    machine = _Machine(check)
    machine.mem.update({id(buffer): storage for buffer, storage in zip(func.params, bound)})
    with np.errstate(all="ignore"):  # IEEE results (inf, NaN) are values here, as in a kernel
        body(_Lanes.root(machine))
    for array, storage in zip(arrays, bound):
        if not array.flags.c_contiguous and array.flags.writeable:
            array[...] = storage.data.reshape(array.shape)  # it ran on a contiguous copy
    return RunReport(tuple(machine.launches))


# ---------------------------------------------------------------- arguments and memory

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
        bound.append(_Storage(buffer, flat, None))
    return bound


class _Storage:
    """The memory of one buffer: `rows` instances of buffer.size elements, flat. Global buffers
    have one instance, shared buffers one per block, local buffers one per lane."""

    __slots__ = ("buffer", "data", "level", "log", "strides")

    def __init__(self, buffer, data, level, log=None):
        self.buffer = buffer
        self.data = data
        self.level = level     # the lane level whose lanes own the instances; None for global
        self.log = log         # shared memory's PhaseLog (global ones live in the launch)
        strides, stride = [], 1
        for extent in reversed(buffer.shape):
            strides.append(stride)
            stride *= extent
        self.strides = tuple(reversed(strides))


def _poison(dtype):
    """What fresh scratch memory holds: a read nobody wrote that reaches an output is wrong."""
    return np.nan if dtypes.is_float(dtype) else np.iinfo(dtype).min


class _Machine:
    """State of one run: the buffers in scope and the launches done."""

    def __init__(self, check):
        self.check = check
        self.mem = {}          # id(Buffer) -> _Storage, for buffers in scope
        self.launches = []


class _Launch:
    """Bookkeeping of one GPU launch."""

    def __init__(self, written):
        self.written = written   # ids of the buffers the launch stores to: only they can race
        self.logs = {}           # id(Buffer) -> PhaseLog of a global buffer
        self.blocks = 1
        self.threads = 1
        self.barriers = 0

    def report(self):
        return LaunchReport(self.blocks, self.threads, self.barriers)


# ---------------------------------------------------------------- lanes

class _Lanes:
    """The active lanes: the loop variables' values (a scalar where every lane agrees, an int64
    array of one value per lane otherwise) and, per lane, its block, its thread and the lane it
    descends from at each lane level (which selects its instance of local and shared buffers)."""

    __slots__ = ("machine", "n", "vars", "block", "thread", "levels", "sizes", "block_level",
                 "block_stride", "thread_stride", "launch", "speculations")

    @classmethod
    def root(cls, machine):
        lanes = cls()
        lanes.machine, lanes.n, lanes.vars = machine, 1, {}
        lanes.block = lanes.thread = np.int64(0)
        lanes.levels, lanes.sizes, lanes.block_level = (np.int64(0),), (1,), 0
        lanes.block_stride = lanes.thread_stride = 1   # blocks in the grid, threads in a block
        lanes.launch = None
        lanes.speculations = ()      # sequential loops running as lanes, outermost first
        return lanes

    def _copy(self):
        new = _Lanes()
        for name in _Lanes.__slots__:
            setattr(new, name, getattr(self, name))
        return new

    def subset(self, picked):
        """The lanes at positions `picked` (an index array)."""
        new = self._copy()
        new.n = len(picked)
        new.vars = {key: _gather(value, picked) for key, value in self.vars.items()}
        new.block, new.thread = _gather(self.block, picked), _gather(self.thread, picked)
        new.levels = tuple(_gather(level, picked) for level in self.levels)
        return new

    def expand(self, var, extent, kind):
        """Each lane replicated `extent` times, var bound to the replica's number."""
        count = self.n * extent
        parent = np.repeat(np.arange(self.n), extent)
        offset = np.tile(np.arange(extent, dtype=np.int64), self.n)
        new = self._copy()
        new.n = count
        new.vars = {key: _gather(value, parent) for key, value in self.vars.items()}
        new.vars[id(var)] = offset
        new.levels = tuple(_gather(level, parent) for level in self.levels) + (np.arange(count, dtype=np.int64),)
        new.sizes = self.sizes + (count,)
        new.block, new.thread = _gather(self.block, parent), _gather(self.thread, parent)
        # Linear ids as CUDA numbers them: x fastest. Sequential loops run as lanes add a level only.
        if kind in BLOCK_LOOPS:
            new.block = new.block + self.block_stride * offset
            new.block_stride = self.block_stride * extent
            new.block_level = len(new.levels) - 1
        elif kind in THREAD_LOOPS:
            new.thread = new.thread + self.thread_stride * offset
            new.thread_stride = self.thread_stride * extent
        return new

    def lane_array(self, value):
        """value as one entry per lane."""
        return np.broadcast_to(value, (self.n,))

    def where(self, lane):
        """Where a lane runs, for messages: '' outside GPU launches."""
        if self.launch is None:
            return ""
        return f" in block {int(self.lane_array(self.block)[lane])}, thread {int(self.lane_array(self.thread)[lane])}"


def _gather(value, picked):
    return value[picked] if isinstance(value, np.ndarray) else value


def _split(mask):
    """Positions where a per-lane condition holds and where it does not."""
    return np.flatnonzero(mask), np.flatnonzero(~mask)


# ---------------------------------------------------------------- statements

def _compile_stmt(stmt):
    """stmt as a function of the active lanes that executes it."""
    if isinstance(stmt, Seq):
        parts = [_compile_stmt(part) for part in stmt.stmts]

        def seq(lanes):
            for part in parts:
                part(lanes)
        return seq
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


def _compile_for(loop):
    if loop.kind not in LOOP_KINDS:
        raise InterpretError(f"loop '{loop.var.name}' has unknown kind '{loop.kind}'")
    body = _compile_stmt(loop.body)
    key, var, extent, kind = id(loop.var), loop.var, loop.extent, loop.kind
    if kind in BLOCK_LOOPS or kind in THREAD_LOOPS:
        written = {id(s.buffer) for s in walk_stmts(loop.body) if isinstance(s, Store)}

        def parallel(lanes):
            inner = lanes.expand(var, extent, kind)
            started = inner.launch is None  # the outermost GPU loop launches a kernel
            if started:
                inner.launch = _Launch(written)
            inner.launch.blocks = max(inner.launch.blocks, inner.block_stride)
            inner.launch.threads = max(inner.launch.threads, inner.thread_stride)
            body(inner)
            if started:
                lanes.machine.launches.append(inner.launch.report())
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
    written = {id(s.buffer) for s in walk_stmts(loop.body) if isinstance(s, Store)}
    gpu = any(isinstance(s, For) and (s.kind in BLOCK_LOOPS or s.kind in THREAD_LOOPS) for s in walk_stmts(loop.body))
    if extent < 2 or not written or gpu:
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
        self.logs = {}           # id(_Storage) -> PhaseLog

    def check(self, storage, lanes, keys, writes):
        """Record an access; raise _Misspeculation where iterations would see each other."""
        if id(storage.buffer) not in self.written or (storage.level is not None and storage.level >= self.level):
            return  # read-only in the loop, or private to each iteration
        log = self.logs.get(id(storage))
        if log is None:
            log = self.logs[id(storage)] = PhaseLog(storage.data.size)
        who, keys = lanes.lane_array(lanes.levels[self.level]), lanes.lane_array(keys)
        if (log.write if writes else log.read)(keys, who) is not None:
            raise _Misspeculation(self)


class _Misspeculation(Exception):
    """Iterations of a speculation touched one element: the loop must run in order."""

    def __init__(self, speculation):
        super().__init__()
        self.speculation = speculation


def _compile_if(stmt):
    cond = _compile_expr(stmt.cond)
    then_body = _compile_stmt(stmt.then_body)
    else_body = _compile_stmt(stmt.else_body) if stmt.else_body is not None else None

    def branch(lanes):
        taken = cond(lanes)
        if np.ndim(taken) == 0:
            if taken:
                then_body(lanes)
            elif else_body is not None:
                else_body(lanes)
            return
        then_lanes, else_lanes = _split(taken)
        if len(then_lanes):
            then_body(lanes if len(then_lanes) == lanes.n else lanes.subset(then_lanes))
        if else_body is not None and len(else_lanes):
            else_body(lanes if len(else_lanes) == lanes.n else lanes.subset(else_lanes))
    return branch


def _compile_allocate(stmt):
    buffer, body, key = stmt.buffer, _compile_stmt(stmt.body), id(stmt.buffer)
    shared, poison = buffer.scope == "shared", _poison(buffer.dtype)

    def allocate(lanes):
        # Shared memory has one instance per block, local memory one per lane (thread).
        level = lanes.block_level if shared else len(lanes.levels) - 1
        rows = lanes.sizes[level]
        data = np.full(rows * buffer.size, poison, dtype=buffer.dtype)
        log = PhaseLog(rows * buffer.size) if shared and lanes.launch is not None and lanes.machine.check else None
        mem = lanes.machine.mem
        outer = mem.get(key)
        mem[key] = _Storage(buffer, data, level, log)
        try:
            body(lanes)
        finally:
            if outer is None:
                del mem[key]
            else:
                mem[key] = outer
    return allocate


def _barrier(lanes):
    launch = lanes.launch
    if launch is None:
        return  # sequential code has nothing to synchronise
    launch.barriers += 1
    rows = lanes.lane_array(lanes.levels[lanes.block_level])
    blocks = np.bincount(rows, minlength=lanes.sizes[lanes.block_level])  # threads here, per block
    if lanes.machine.check:
        partial = (blocks > 0) & (blocks != lanes.thread_stride)
        if partial.any():
            row = int(np.argmax(partial))
            block = int(lanes.lane_array(lanes.block)[int(np.argmax(rows == row))])
            raise InterpretError(f"barrier reached by {blocks[row]} of {lanes.thread_stride} threads of block "
                                 f"{block}: it sits under a condition that depends on the thread")
    reached = np.flatnonzero(blocks)
    for storage in lanes.machine.mem.values():
        if storage.log is not None:  # a shared buffer: its blocks that synchronised start a new phase
            storage.log.reset(reached, storage.buffer.size)


def _compile_store(stmt):
    buffer = stmt.buffer
    indices = [_compile_expr(index) for index in stmt.indices]
    value_of = _compile_expr(stmt.value)
    lookup = _storage_lookup(buffer)

    def store(lanes):
        storage = lookup(lanes)
        keys = _keys(storage, lanes, [index(lanes) for index in indices], "store to")
        value = value_of(lanes)
        for speculation in lanes.speculations:
            speculation.check(storage, lanes, keys, True)
        log = _log(storage, lanes)
        if log is not None:
            keys = lanes.lane_array(keys)
            conflict = log.write(keys, _identity(storage, lanes))
            if conflict is not None:
                raise InterpretError(_race_message(storage, lanes, keys, conflict))
        if np.ndim(value) and not np.ndim(keys):
            keys = lanes.lane_array(keys)   # lanes writing one element: the last one wins
        storage.data[keys] = value          # numpy casts to the buffer's dtype, as a C store does
    return store


# ---------------------------------------------------------------- memory access

def _storage_lookup(buffer):
    key = id(buffer)

    def lookup(lanes):
        storage = lanes.machine.mem.get(key)
        if storage is None:
            raise InterpretError(_unknown_buffer(buffer, lanes.machine.mem))
        return storage
    return lookup


def _unknown_buffer(buffer, mem):
    same_name = any(storage.buffer.name == buffer.name for storage in mem.values())
    hint = " (a different Buffer object of that name is in scope)" if same_name else ""
    return f"buffer '{buffer.name}' is used where it is neither a parameter nor allocated{hint}"


def _keys(storage, lanes, indices, action):
    """Flat positions in storage.data of the indexed element, per lane; raises when out of bounds."""
    buffer = storage.buffer
    if len(indices) != len(buffer.shape):
        raise InterpretError(f"{action} buffer '{buffer.name}' with {len(indices)} indices, "
                             f"it has {len(buffer.shape)} dimensions")
    flat = 0
    for index, extent, stride in zip(indices, buffer.shape, storage.strides):
        if np.ndim(index):
            if (index < 0).any() or (index >= extent).any():
                raise InterpretError(_out_of_bounds(buffer, lanes, indices, action))
        elif not 0 <= index < extent:
            raise InterpretError(_out_of_bounds(buffer, lanes, indices, action))
        flat = flat + index * stride
    if storage.level is not None:
        flat = flat + lanes.levels[storage.level] * buffer.size
    return flat


def _out_of_bounds(buffer, lanes, indices, action):
    bad = np.zeros(lanes.n, dtype=bool)
    for index, extent in zip(indices, buffer.shape):
        bad |= (lanes.lane_array(index) < 0) | (lanes.lane_array(index) >= extent)
    lane = int(np.argmax(bad))
    index = _format_index(int(lanes.lane_array(i)[lane]) for i in indices)
    return (f"{action} buffer '{buffer.name}' at index {index} out of bounds of shape "
            f"{tuple(buffer.shape)}{lanes.where(lane)}")


def _format_index(values):
    return "(" + ", ".join(str(value) for value in values) + ")"


def _log(storage, lanes):
    """The PhaseLog that checks an access, or None where nothing can race."""
    if storage.log is not None:
        return storage.log
    launch = lanes.launch
    if storage.level is not None or launch is None or not lanes.machine.check:
        return None
    key = id(storage.buffer)
    if key not in launch.written:
        return None  # read-only during this launch
    log = launch.logs.get(key)
    if log is None:
        log = launch.logs[key] = PhaseLog(storage.buffer.size)
    return log


def _identity(storage, lanes):
    """Who accesses, per lane: the thread in its block (shared) or in the grid (global)."""
    if storage.level is not None:
        return lanes.lane_array(lanes.thread)
    return lanes.lane_array(lanes.block * _THREAD_SPAN + lanes.thread)


def _race_message(storage, lanes, keys, conflict):
    buffer, lane = storage.buffer, conflict.lane
    element = _format_index(int(i) for i in np.unravel_index(int(keys[lane]) % buffer.size, buffer.shape))
    if storage.level is not None:
        me, other = f"thread {int(lanes.lane_array(lanes.thread)[lane])}", f"thread {conflict.other}"
        place = f"shared buffer '{buffer.name}' element {element} in block {int(lanes.lane_array(lanes.block)[lane])}"
        when = "with no barrier between them"
    else:
        block, thread = divmod(int(lanes.lane_array(lanes.block * _THREAD_SPAN + lanes.thread)[lane]), _THREAD_SPAN)
        me = f"thread {thread} of block {block}"
        other = "thread {1} of block {0}".format(*divmod(conflict.other, _THREAD_SPAN))
        place = f"global buffer '{buffer.name}' element {element}"
        when = "in the same launch"
    if conflict.kind == "same store":
        return f"race on {place}: {me} and {other} write it in the same store"
    what = {"read after write": f"{me} reads what {other} wrote",
            "write after write": f"{me} writes what {other} wrote",
            "write after read": f"{me} writes what {other} read"}[conflict.kind]
    return f"race on {place}: {what} {when}"


# ---------------------------------------------------------------- expressions

def _compile_expr(expr):
    """expr as a function of the active lanes: a scalar where every lane agrees, else an array
    with one value per lane."""
    if isinstance(expr, IterVar):
        key, name = id(expr), expr.name

        def variable(lanes):
            value = lanes.vars.get(key)
            if value is None:
                raise InterpretError(f"loop variable '{name}' is used outside its loop")
            return value
        return variable
    if isinstance(expr, Const):
        constant = np.asarray(expr.value, dtype=expr.dtype)[()]
        return lambda lanes: constant
    if isinstance(expr, Load):
        return _compile_load(expr)
    if isinstance(expr, Binary):
        return _elementwise(_ARITH[expr.op], expr.dtype, expr.a, expr.b)
    if isinstance(expr, Compare):
        return _elementwise(_COMPARE[expr.op], expr.dtype, expr.a, expr.b)
    if isinstance(expr, Call):
        return _elementwise(_MATH[expr.func], expr.dtype, expr.arg)
    if isinstance(expr, Intrinsic):
        return _elementwise(_INTRINSICS[expr.func], expr.dtype, *expr.args)
    if isinstance(expr, Cast):
        value, dtype = _compile_expr(expr.value), np.dtype(expr.dtype)
        return lambda lanes: np.asarray(value(lanes)).astype(dtype)[()]
    if isinstance(expr, Logical):
        return _compile_logical(expr)
    if isinstance(expr, Select):
        return _compile_select(expr)
    raise InterpretError(f"cannot interpret expression {type(expr).__name__} '{format_expr(expr)}'")


def _elementwise(func, dtype, *operands):
    args = [_compile_expr(operand) for operand in operands]
    pin = dtypes.is_float(dtype)  # float32 op int64 would widen in numpy
    if len(args) == 1:
        (a,) = args
        return (lambda lanes: _as_float(func(a(lanes)), dtype)) if pin else (lambda lanes: func(a(lanes)))
    a, b = args
    return (lambda lanes: _as_float(func(a(lanes), b(lanes)), dtype)) if pin else \
        (lambda lanes: func(a(lanes), b(lanes)))


def _compile_load(expr):
    buffer = expr.tensor
    indices = [_compile_expr(index) for index in expr.indices]
    lookup = _storage_lookup(buffer)

    def load(lanes):
        storage = lookup(lanes)
        keys = _keys(storage, lanes, [index(lanes) for index in indices], "load from")
        for speculation in lanes.speculations:
            speculation.check(storage, lanes, keys, False)
        log = _log(storage, lanes)
        if log is not None:
            keys = lanes.lane_array(keys)
            conflict = log.read(keys, _identity(storage, lanes))
            if conflict is not None:
                raise InterpretError(_race_message(storage, lanes, keys, conflict))
        return storage.data[keys]
    return load


def _compile_logical(expr):
    """C's && and ||: the right side runs only on the lanes where the left does not decide."""
    a = _compile_expr(expr.a)
    if expr.op == "~":
        return lambda lanes: np.logical_not(a(lanes))
    b = _compile_expr(expr.b)
    is_and = expr.op == "&"

    def logical(lanes):
        left = a(lanes)
        if np.ndim(left) == 0:
            return b(lanes) if bool(left) == is_and else left
        undecided = np.flatnonzero(left if is_and else ~left)
        if len(undecided) == 0:
            return left
        if len(undecided) == lanes.n:
            return lanes.lane_array(b(lanes)).astype(bool)
        result = left.copy()
        result[undecided] = b(lanes.subset(undecided))
        return result
    return logical


def _compile_select(expr):
    """C's ?: each side runs only on the lanes that take it (padding may index out of bounds
    on the others)."""
    cond, when_true, when_false = (_compile_expr(part) for part in (expr.cond, expr.true_value, expr.false_value))
    dtype = expr.dtype

    def select(lanes):
        taken = cond(lanes)
        if np.ndim(taken) == 0:
            return when_true(lanes) if taken else when_false(lanes)
        true_lanes, false_lanes = _split(taken)
        if len(false_lanes) == 0:
            return when_true(lanes)
        if len(true_lanes) == 0:
            return when_false(lanes)
        true_value = when_true(lanes.subset(true_lanes))
        false_value = when_false(lanes.subset(false_lanes))
        result = np.empty(lanes.n, dtype=np.result_type(true_value, false_value))
        result[true_lanes] = true_value
        result[false_lanes] = false_value
        return _as_float(result, dtype)
    return select
