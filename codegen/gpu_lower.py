"""GPU lowering: a lowered GPU schedule becomes launches that every thread of a grid runs.

Lowering leaves a GPU schedule as nested loops: block loops, virtual-thread loops, thread loops,
then each thread's work, with shared buffers allocated where their stage is computed. The passes,
in order, for each top-level statement (one kernel launch):
1. launch shape: the block and thread loops become the launch's grid and block (a missing level
   becomes a loop of one), conditions between them move inside the thread loop, and conditions
   on a thread's or virtual thread's own elements are pushed below the shared-memory copies
   (the block's work, bounded by their own guards);
2. virtual threads: each thread runs its virtual threads' work as unrolled loops pushed down to
   the statements that depend on them, local buffers getting one copy per virtual thread (TVM's
   vthread injection), so the reduction loops and shared-memory refills run once;
3. register tiles: loops that index a local buffer are unrolled, so the buffer lives in registers;
4. cooperative fetch: a copy into shared memory is spread over the block's threads, thread t
   copying elements t, t + T, t + 2T, ... (four at a time where _vector_copy proves it exact);
5. shared buffers move to block scope, and barriers go around each run of copies (before it
   too when it sits in a loop, so nobody still reads the previous tile); a barrier under a
   condition on the thread is refused, since not every thread of the block would reach it;
6. loops of one iteration go, and index arithmetic has its like terms collected.

The result keeps the loop IR's statements: a launch is For(blockIdx...) > Allocate(shared)... >
For(threadIdx...) > body, where body holds serial and unrolled loops, stores, conditions, local
buffers and barriers. The CUDA printer and the CPU emulator both read that form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flexsched import affine
from flexsched.expr import Binary, Const, IterVar, Load, as_expr, iter_vars_of, transform, walk

from .ir import (Allocate, Barrier, Buffer, For, IfThenElse, PrimFunc, Seq, Store, flatten, loop_var, map_exprs,
                 map_stmts, seq, walk_stmts)
from .lower import LoweringError

BLOCK_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
MAX_UNROLLED_TILE_LOOP = 64   # a local buffer indexed by a longer loop stays in (slow) local memory
SHARED_ALIGNMENT = 16         # bytes: each shared buffer starts on a float4 boundary
VECTOR_WIDTH = 4              # elements a vectorised copy moves at once (a float4)


@dataclass(frozen=True)
class Launch:
    """One kernel launch read off a GPU-lowered statement: grid and block sizes and the shared
    buffers (bytes from the start of dynamic shared memory)."""

    index: int
    grid: tuple           # (x, y, z)
    block: tuple          # (x, y, z)
    shared: tuple         # (Buffer, byte offset)
    stmt: object          # the For(blockIdx...) nest

    @property
    def threads(self):
        return math.prod(self.block)

    @property
    def blocks(self):
        return math.prod(self.grid)

    @property
    def shared_bytes(self):
        if not self.shared:
            return 0
        buffer, offset = self.shared[-1]
        return offset + buffer.size * _item_size(buffer.dtype)


def lower_gpu(func: PrimFunc) -> PrimFunc:
    """func, a lowered GPU schedule, as a sequence of launches (see the module docstring)."""
    parts = [_launch(stmt, index) for index, stmt in enumerate(flatten(func.body))]
    return PrimFunc(func.name, func.params, seq(*parts))


def launches(func: PrimFunc):
    """The Launches of a GPU-lowered function, in the order they run."""
    result = []
    for index, stmt in enumerate(flatten(func.body)):
        grid, block, shared = [1, 1, 1], [1, 1, 1], []
        node = stmt
        while isinstance(node, (For, Allocate)):
            if isinstance(node, For) and node.kind in BLOCK_AXES:
                grid[BLOCK_AXES.index(node.kind)] = node.extent
            elif isinstance(node, For) and node.kind in THREAD_AXES:
                block[THREAD_AXES.index(node.kind)] = node.extent
            elif isinstance(node, Allocate) and node.buffer.scope == "shared":
                shared.append(node.buffer)
            else:
                break
            node = node.body
        offsets, offset = [], 0
        for buffer in shared:
            offsets.append((buffer, offset))
            offset += -(-buffer.size * _item_size(buffer.dtype) // SHARED_ALIGNMENT) * SHARED_ALIGNMENT
        result.append(Launch(index, tuple(grid), tuple(block), tuple(offsets), stmt))
    return result


def _item_size(dtype):
    return 8 if dtype in ("float64", "int64") else 4


# ---------------------------------------------------------------- 1. launch shape

def _launch(stmt, index):
    """One top-level statement as a launch: block loops, shared buffers, thread loops, body."""
    blocks, threads, vthreads, guards, shared = [], [], [], [], []
    node = stmt
    while True:
        if isinstance(node, For) and node.kind in BLOCK_AXES and not threads and not vthreads:
            blocks.append(node)
        elif isinstance(node, For) and node.kind == "vthread" and not threads:
            vthreads.append(node)
        elif isinstance(node, For) and node.kind in THREAD_AXES:
            threads.append(node)
        elif isinstance(node, IfThenElse) and node.else_body is None and not threads:
            guards.append(node.cond)
        elif isinstance(node, Allocate) and node.buffer.scope == "shared" and not threads:
            shared.append(node.buffer)
        else:
            break
        node = node.then_body if isinstance(node, IfThenElse) else node.body
    for loop in walk_stmts(node):
        if isinstance(loop, For) and loop.kind in BLOCK_AXES + THREAD_AXES:
            raise LoweringError(f"launch {index}: loop '{loop.var.name}' is bound to {loop.kind} below another "
                                "loop's body; bind the outermost loops of each stage only")
    if len({loop.kind for loop in blocks}) < len(blocks) or len({loop.kind for loop in threads}) < len(threads):
        raise LoweringError(f"launch {index}: a GPU axis is bound twice")
    body = _guarded(node, guards)
    thread_ids = {id(loop.var) for loop in threads}
    shared_buffers = set(shared) | {n.buffer for n in walk_stmts(body)
                                    if isinstance(n, Allocate) and n.buffer.scope == "shared"}
    body = _guards_off_copies(body, thread_ids | {id(loop.var) for loop in vthreads}, shared_buffers)
    body = _inject_virtual_threads(body, vthreads)
    body = _unroll_register_tiles(body)
    body = _cooperative_fetch(body, threads, shared_buffers, index)
    body, hoisted = _hoist_shared(body)
    body = _check_barriers(_insert_barriers(body), thread_ids, index)
    body = map_exprs(_drop_unit_loops(body), _simplify_indices)
    for loop in reversed(threads or [For(loop_var(f"launch{index}.thread", 1), 1, "threadIdx.x", None)]):
        body = For(loop.var, loop.extent, loop.kind, body)
    for buffer in reversed(shared + hoisted):
        body = Allocate(buffer, body)
    for loop in reversed(blocks or [For(loop_var(f"launch{index}.block", 1), 1, "blockIdx.x", None)]):
        body = For(loop.var, loop.extent, loop.kind, body)
    return body


def _guards_off_copies(body, lane_ids, shared):
    """Conditions on a thread's or virtual thread's own elements pushed below the shared-memory
    copies they enclose, which drop them: a copy is the whole block's work, bounded by its own
    guards, and must not repeat per virtual thread or leave a thread out of its barrier."""
    def push(stmt, conds):
        if not _stores_into(stmt, shared):
            return _guarded(stmt, conds)
        if _is_copy(stmt, shared):
            return stmt
        if isinstance(stmt, IfThenElse) and _expr_mentions(stmt.cond, lane_ids):
            parts = [push(stmt.then_body, conds + (stmt.cond,))]
            if stmt.else_body is not None:
                parts.append(push(stmt.else_body, conds + (~stmt.cond,)))
            return seq(*parts)
        if isinstance(stmt, Seq):
            return seq(*(push(part, conds) for part in stmt.stmts))
        if isinstance(stmt, (For, Allocate)):
            return _with_body(stmt, push(stmt.body, conds))
        if isinstance(stmt, IfThenElse):
            return IfThenElse(stmt.cond, push(stmt.then_body, conds),
                              None if stmt.else_body is None else push(stmt.else_body, conds))
        return _guarded(stmt, conds)

    return push(body, ())


def _guarded(stmt, conds):
    for cond in reversed(conds):
        stmt = IfThenElse(cond, stmt)
    return stmt


def _with_body(stmt, body):
    if isinstance(stmt, For):
        return For(stmt.var, stmt.extent, stmt.kind, body)
    return Allocate(stmt.buffer, body)


def _stores_into(stmt, buffers):
    return any(isinstance(node, Store) and node.buffer in buffers for node in walk_stmts(stmt))


def _is_copy(stmt, shared):
    """A nest of loops and conditions around stores into shared buffers only (a refill)."""
    stores = [node for node in walk_stmts(stmt) if isinstance(node, Store)]
    others = [node for node in walk_stmts(stmt) if not isinstance(node, (Store, For, IfThenElse, Seq))]
    return bool(stores) and not others and all(store.buffer in shared for store in stores)


def _drop_unit_loops(body):
    """Loops of one iteration removed, their variable replaced by 0 (printed code stays short)."""
    zero = as_expr(0, "int64")
    units = {}

    def visit(stmt):
        if isinstance(stmt, For) and stmt.extent == 1 and stmt.kind in ("serial", "unrolled"):
            units[id(stmt.var)] = zero
            return stmt.body
        return None

    body = map_stmts(body, visit)
    return map_exprs(body, _substituter(units)) if units else body


def _simplify_indices(expr):
    """Index arithmetic with like terms collected (inside loads too)."""
    expr = affine.simplify(expr)
    return transform(expr, lambda node: Load(node.tensor, tuple(affine.simplify(i) for i in node.indices),
                                             node.dtype) if isinstance(node, Load) else None)


# ---------------------------------------------------------------- 2. virtual threads

def _inject_virtual_threads(body, vthreads):
    """body, run once per thread with its virtual threads' iterations pushed down as unrolled loops."""
    if not vthreads:
        return body
    variables = {id(loop.var) for loop in vthreads}
    per_vthread = _buffers_touched(body, variables)
    extents = tuple(loop.extent for loop in vthreads)
    expanded = {buffer: Buffer(buffer.name, extents + tuple(buffer.shape), buffer.dtype, buffer.scope)
                for buffer in per_vthread}
    indices = tuple(loop.var for loop in vthreads)
    body = _redirect_buffers(body, expanded, indices)
    touched_buffers = set(expanded.values())

    def touches(stmt):
        for node in walk_stmts(stmt):
            if isinstance(node, Store) and (node.buffer in touched_buffers or _mentions(node, variables)):
                return True
            if isinstance(node, IfThenElse) and _expr_mentions(node.cond, variables):
                return True
            if isinstance(node, Store) and any(load.tensor in touched_buffers for load in _loads(node)):
                return True
        return False

    def wrap(stmt):
        for loop in reversed(vthreads):
            stmt = For(loop.var, loop.extent, "unrolled", stmt)
        return stmt

    def inject(stmt):
        if not touches(stmt):
            return stmt
        if isinstance(stmt, Seq):
            return seq(*(inject(part) for part in stmt.stmts))
        if isinstance(stmt, For):
            return For(stmt.var, stmt.extent, stmt.kind, inject(stmt.body))
        if isinstance(stmt, Allocate):
            return Allocate(stmt.buffer, inject(stmt.body))
        if isinstance(stmt, IfThenElse) and not _expr_mentions(stmt.cond, variables):
            return IfThenElse(stmt.cond, inject(stmt.then_body),
                              None if stmt.else_body is None else inject(stmt.else_body))
        return wrap(stmt)

    return inject(body)


def _buffers_touched(body, variables):
    """Local buffers whose contents differ per virtual thread: written by a statement that uses a
    virtual thread's variable or reads such a buffer (to a fixed point)."""
    local = {node.buffer for node in walk_stmts(body) if isinstance(node, Allocate) and node.buffer.scope == "local"}
    touched = set()
    stores = [node for node in walk_stmts(body) if isinstance(node, Store)]
    changed = True
    while changed:
        changed = False
        for store in stores:
            if store.buffer in local and store.buffer not in touched and (
                    _mentions(store, variables) or any(load.tensor in touched for load in _loads(store))
                    or _guarded_by(body, store, variables)):
                touched.add(store.buffer)
                changed = True
    return touched


def _guarded_by(body, store, variables):
    """Whether a condition around the store uses a virtual thread's variable."""
    def search(stmt, conds):
        if stmt is store:
            return any(_expr_mentions(cond, variables) for cond in conds)
        if isinstance(stmt, Seq):
            return any(search(part, conds) for part in stmt.stmts)
        if isinstance(stmt, (For, Allocate)):
            return search(stmt.body, conds)
        if isinstance(stmt, IfThenElse):
            return search(stmt.then_body, conds + (stmt.cond,)) or (
                stmt.else_body is not None and search(stmt.else_body, conds + (stmt.cond,)))
        return False

    return search(body, ())


def _redirect_buffers(body, expanded, leading):
    """body with each expanded buffer indexed first by the virtual threads' variables."""
    if not expanded:
        return body

    def rewrite_expr(expr):
        return transform(expr, lambda node: Load(expanded[node.tensor], leading + tuple(node.indices), node.dtype)
                         if isinstance(node, Load) and node.tensor in expanded else None)

    def visit(stmt):
        if isinstance(stmt, Allocate) and stmt.buffer in expanded:
            return Allocate(expanded[stmt.buffer], stmt.body)
        if isinstance(stmt, Store):
            indices = tuple(rewrite_expr(as_expr(i, "int64")) for i in stmt.indices)
            value = rewrite_expr(as_expr(stmt.value, stmt.buffer.dtype))
            if stmt.buffer in expanded:
                return Store(expanded[stmt.buffer], leading + indices, value)
            return Store(stmt.buffer, indices, value)
        if isinstance(stmt, IfThenElse):
            return IfThenElse(rewrite_expr(stmt.cond), stmt.then_body, stmt.else_body)
        return None

    return map_stmts(body, visit)


def _loads(store):
    roots = (as_expr(store.value, store.buffer.dtype), *(as_expr(i, "int64") for i in store.indices))
    return [node for root in roots for node in walk(root) if isinstance(node, Load)]


def _expr_mentions(expr, variables):
    return any(id(var) in variables for var in iter_vars_of(expr))


def _mentions(store, variables):
    return any(_expr_mentions(as_expr(part, "int64"), variables) for part in (store.value, *store.indices))


# ---------------------------------------------------------------- 3. register tiles

def _unroll_register_tiles(body):
    """Unroll the serial loops whose variable indexes a local buffer (registers need constant
    indices), when they are short enough."""
    indexing = set()
    for node in walk_stmts(body):
        if isinstance(node, Store):
            accesses = [(node.buffer, node.indices)] + [(load.tensor, load.indices) for load in _loads(node)]
            for buffer, indices in accesses:
                if buffer.scope == "local":
                    for index in indices:
                        indexing |= {id(var) for var in iter_vars_of(as_expr(index, "int64"))}

    def visit(stmt):
        if isinstance(stmt, For) and stmt.kind == "serial" and id(stmt.var) in indexing \
                and stmt.extent <= MAX_UNROLLED_TILE_LOOP:
            return For(stmt.var, stmt.extent, "unrolled", stmt.body)
        return None

    return map_stmts(body, visit)


# ---------------------------------------------------------------- 4. cooperative fetch

@dataclass(frozen=True, eq=False)
class _Fill:
    """A marker around a cooperative copy into shared memory (removed before the passes end)."""

    stmt: object


def _cooperative_fetch(body, threads, shared, index):
    """Each copy nest into a shared buffer, spread over the block's threads."""
    thread_ids = {id(loop.var) for loop in threads}
    linear = None  # the thread's number within its block
    for loop in threads:
        linear = loop.var if linear is None else linear * loop.extent + loop.var
    linear = linear if linear is not None else as_expr(0, "int64")
    count = math.prod(loop.extent for loop in threads)

    def spread_copies(stmt):
        if isinstance(stmt, Seq):
            return seq(*(_spread(part, linear, count, thread_ids, index) if _is_copy(part, shared) else part
                         for part in stmt.stmts))
        return None

    if _is_copy(body, shared):  # the whole body is one copy
        return _spread(body, linear, count, thread_ids, index)
    return map_stmts(body, spread_copies)


def _spread(stmt, linear, count, thread_ids, launch_index):
    """A copy nest as one flat loop over its elements, thread t taking every count-th one (or
    every count-th group of VECTOR_WIDTH elements, copied as one vector, where _vector_copy proves
    it exact)."""
    loops, guards, node = [], [], stmt
    while True:
        if isinstance(node, For):
            loops.append(node)
            node = node.body
        elif isinstance(node, IfThenElse) and node.else_body is None:
            guards.append(node.cond)
            node = node.then_body
        else:
            break
    if not isinstance(node, Store) or not loops or any(loop.kind in THREAD_AXES for loop in loops) or \
            _mentions(node, thread_ids) or any(_expr_mentions(cond, thread_ids) for cond in guards):
        return _Fill(stmt)  # already per thread, or not a plain nest: kept as it is
    width = VECTOR_WIDTH if not guards and _vector_copy(node, loops[-1]) else 1
    total = math.prod(loop.extent for loop in loops) // width
    steps = -(-total // count)
    step_var = loop_var(f"{node.buffer.name}.fetch{launch_index}", steps)
    flat = step_var * count + linear if steps > 1 else linear
    lane = loop_var(f"{node.buffer.name}.lane{launch_index}", width)
    env, rest = {}, total * width
    for loop in loops:
        rest //= loop.extent
        value = flat * width // rest if rest > 1 else flat * width
        value = value % loop.extent if loop is not loops[0] else value
        env[id(loop.var)] = value + lane if loop is loops[-1] and width > 1 else value
    substitute = _substituter(env)
    copy = Store(node.buffer, tuple(substitute(as_expr(i, "int64")) for i in node.indices),
                 substitute(as_expr(node.value, node.buffer.dtype)))
    if width > 1:
        copy = For(lane, width, "vectorized", copy)
    for cond in reversed(guards):
        copy = IfThenElse(substitute(cond), copy)
    if steps * count != total:
        copy = IfThenElse(flat < total, copy)
    if steps > 1:
        copy = For(step_var, steps, "unrolled" if steps <= 8 else "serial", copy)
    return _Fill(copy)


def _vector_copy(store, innermost):
    """Whether a copy's innermost loop can move VECTOR_WIDTH elements at a time: a plain load of
    a 4-byte type, contiguous in both buffers along the loop, whose groups start on a multiple of
    VECTOR_WIDTH elements in both for every value of the other loops (buffers themselves start on
    16-byte boundaries: cudaMalloc's, the shared carve-out's, checked at the call for the rest)."""
    value = store.value
    if not isinstance(value, Load) or store.buffer.dtype not in ("float32", "int32") or \
            value.tensor.dtype != store.buffer.dtype or innermost.extent % VECTOR_WIDTH:
        return False
    return all(_aligned_run(buffer, indices, innermost.var)
               for buffer, indices in ((store.buffer, store.indices), (value.tensor, value.indices)))


def _aligned_run(buffer, indices, var):
    """Whether an access is contiguous along var and starts on a multiple of VECTOR_WIDTH at var = 0."""
    flat = as_expr(0, "int64")
    for index, extent in zip(indices, buffer.shape):
        flat = flat * extent + as_expr(index, "int64")
    if affine.stride(flat, var) != 1:
        return False
    parts = affine.split_terms(flat, {var.name})
    if parts is None:
        return False
    inner, outer, constant = parts
    return (all(coefficient == 1 and term is var for coefficient, term in inner) and constant % VECTOR_WIDTH == 0
            and all(coefficient % VECTOR_WIDTH == 0 or _multiple_of(term, VECTOR_WIDTH) for coefficient, term in outer))


def _multiple_of(expr, k):
    """Whether an integer expression is a multiple of k for every value of its loops (a sound,
    syntactic check: sums of multiples, and products with a multiple)."""
    if isinstance(expr, Const):
        return expr.value % k == 0
    if isinstance(expr, Binary) and expr.op in ("+", "-"):
        return _multiple_of(expr.a, k) and _multiple_of(expr.b, k)
    if isinstance(expr, Binary) and expr.op == "*":
        return _multiple_of(expr.a, k) or _multiple_of(expr.b, k)
    return False


def _substituter(env):
    def substitute(expr):
        return transform(expr, lambda node: env.get(id(node)) if isinstance(node, IterVar) else None)
    return substitute


# ---------------------------------------------------------------- 5. shared buffers and barriers

def _hoist_shared(body):
    """body without its shared Allocates, and the buffers they allocated (for block scope)."""
    hoisted = []

    def visit(stmt):
        if isinstance(stmt, Allocate) and stmt.buffer.scope == "shared":
            hoisted.append(stmt.buffer)
            return stmt.body
        return None

    return map_stmts(body, visit), hoisted


def _insert_barriers(body):
    """A barrier after each run of cooperative copies, and before it when it sits in a loop."""
    def fenced(run, in_loop):
        return ([Barrier()] if in_loop else []) + run + [Barrier()]

    def place(stmt, in_loop):
        if isinstance(stmt, _Fill):
            return seq(*fenced([stmt.stmt], in_loop))
        if isinstance(stmt, Seq):
            parts, run = [], []
            for part in stmt.stmts:
                if isinstance(part, _Fill):
                    run.append(part.stmt)
                    continue
                if run:
                    parts += fenced(run, in_loop)
                    run = []
                parts.append(place(part, in_loop))
            if run:
                parts += fenced(run, in_loop)
            return seq(*parts)
        if isinstance(stmt, For):
            return For(stmt.var, stmt.extent, stmt.kind, place(stmt.body, in_loop or stmt.extent > 1))
        if isinstance(stmt, Allocate):
            return Allocate(stmt.buffer, place(stmt.body, in_loop))
        if isinstance(stmt, IfThenElse):
            return IfThenElse(stmt.cond, place(stmt.then_body, in_loop),
                              None if stmt.else_body is None else place(stmt.else_body, in_loop))
        return stmt

    return place(body, False)


def _check_barriers(body, thread_ids, index):
    """Every thread of a block must reach every barrier: none may sit under a thread's condition."""
    def visit(stmt, divergent):
        if isinstance(stmt, Barrier) and divergent:
            raise LoweringError(f"launch {index}: a barrier sits under a condition on the thread index")
        if isinstance(stmt, Seq):
            for part in stmt.stmts:
                visit(part, divergent)
        elif isinstance(stmt, (For, Allocate)):
            visit(stmt.body, divergent)
        elif isinstance(stmt, IfThenElse):
            inner = divergent or _expr_mentions(stmt.cond, thread_ids)
            visit(stmt.then_body, inner)
            if stmt.else_body is not None:
                visit(stmt.else_body, inner)

    visit(body, False)
    return body
