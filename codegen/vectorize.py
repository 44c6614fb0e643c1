"""Vectorisation legality and lane padding: when one vector body computes what a loop's lanes
would one by one, and how many lanes it computes (back-end neutral analysis of the loop IR)."""

from __future__ import annotations

from flexsched import affine
from flexsched.expr import Const, IterVar, Load, as_expr, children, walk

from .ir import CodegenError, IfThenElse, Store, flatten

MAX_VECTOR_LANES = 64


def access_indices(access):
    """The indices of a Load or Store as expressions (lowering may leave plain ints)."""
    return tuple(as_expr(index, "int64") for index in access.indices)


def stored_value(store):
    """The stored value as an expression of the buffer's dtype."""
    return as_expr(store.value, store.buffer.dtype)


def check_indices(buffer, indices):
    """Refuse an access with the wrong number of indices, naming the buffer."""
    if len(indices) != buffer.ndim:
        raise CodegenError(f"buffer '{buffer.name}' has {buffer.ndim} dimensions but is indexed with {len(indices)}")


def row_strides(shape):
    """Elements between neighbours along each dimension of a row-major array."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return strides[::-1]


def mentions(expr, var):
    """Whether expr uses the loop variable var (by identity)."""
    return any(node is var for node in walk(expr))


def flat_stride(buffer, indices, var, shape=None, stride_of=affine.stride):
    """Elements between the accesses of neighbouring lanes, None when not a constant (stride_of:
    affine.stride, or a caller's cached copy of it)."""
    total = 0
    for index, step in zip(indices, row_strides(shape or buffer.shape)):
        stride = stride_of(index, var)
        if stride is None:
            return None
        total += stride * step
    return total


def _node_label(expr):
    """What, besides its children, makes a node what it is."""
    value = (type(expr.value), expr.value) if isinstance(expr, Const) else None
    tensor = id(expr.tensor) if isinstance(expr, Load) else None
    return (type(expr), getattr(expr, "op", None), getattr(expr, "func", None), expr.dtype, value, tensor)


def same_expr(a, b):
    """Structural equality (loop variables and buffers by identity)."""
    if a is b:
        return True
    if isinstance(a, IterVar) or _node_label(a) != _node_label(b):
        return False
    ca, cb = children(a), children(b)
    return len(ca) == len(cb) and all(map(same_expr, ca, cb))


def same_indices(a, b):
    """Whether two index tuples are structurally equal."""
    return len(a) == len(b) and all(map(same_expr, a, b))


def loads_in_store(store):
    """Every load in a store's value and indices."""
    roots = (stored_value(store), *access_indices(store))
    return [node for root in roots for node in walk(root) if isinstance(node, Load)]


def guarded_stores(stmt):
    """The statements of a body, conditions looked through: a vector body computes a guarded
    store on every lane and writes only the lanes whose condition holds."""
    found = []
    for part in flatten(stmt):
        if isinstance(part, IfThenElse):
            found += guarded_stores(part.then_body)
            if part.else_body is not None:
                found += guarded_stores(part.else_body)
        else:
            found.append(part)
    return found


def vectorize_blocker(loop):
    """Why a vectorized loop must run lane by lane (None when one vector body computes the same).

    One vector body runs each statement for all lanes before the next statement, so it is exact
    only when every lane touches its own elements: each written buffer is stored at one index
    that moves by a constant non-zero step per lane, and read (if at all) at that same index.
    Conditions become lane masks on the statements under them.
    """
    if loop.extent < 2:
        return "it has a single lane"
    if loop.extent > MAX_VECTOR_LANES:
        return f"its {loop.extent} lanes exceed {MAX_VECTOR_LANES}"
    stores = guarded_stores(loop.body)
    for stmt in stores:
        if not isinstance(stmt, Store):
            return f"its body holds a {type(stmt).__name__}"
    written = {}
    for store in stores:
        check_indices(store.buffer, access_indices(store))
        if flat_stride(store.buffer, access_indices(store), loop.var) in (None, 0):
            return f"the store to '{store.buffer.name}' does not move by a constant step per lane"
        first = written.setdefault(store.buffer, access_indices(store))
        if not same_indices(first, access_indices(store)):
            return f"'{store.buffer.name}' is stored at two different indices"
    for store in stores:
        for load in loads_in_store(store):
            if load.tensor in written and not same_indices(access_indices(load), written[load.tensor]):
                return f"'{load.tensor.name}' is read at an index other than the one it is stored at"
    return None


def padded_lanes(extent, register_lanes):
    """The lanes a vectorized loop of extent computes: whole registers of register_lanes 32-bit
    lanes (of SSE width, 4, for short loops); a width LLVM would split into odd pieces costs shuffles."""
    if extent <= 2:
        return extent
    unit = register_lanes if extent > register_lanes // 2 else 4
    padded = -(-extent // unit) * unit
    return padded if padded <= MAX_VECTOR_LANES else extent


def row_pitch(row, register_lanes):
    """The padded length of a local buffer's rows: room for a padded vector that starts anywhere
    in the row (its live lanes end inside it, the rest by less than a register further)."""
    unit = register_lanes
    return row if row <= 1 or row % unit == 0 else -(-(row + unit - 1) // unit) * unit
