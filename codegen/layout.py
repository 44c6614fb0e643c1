"""Blocked layouts in the loop IR: buffers stored with a dimension split and its block innermost.

Lowering builds every access with the tensor's logical indices; this pass, run last, gives each
blocked buffer its physical shape (flexsched.schedule.physical_shape) and rewrites each index i
of a blocked dimension into i // block in place and i % block innermost. Where i is a sum whose
terms are multiples of the block but for one part provably inside 0..block-1 (a split loop whose
inner factor is the block), the quotient and remainder are those terms themselves, so the
innermost block stays contiguous along the vectorised loop. A dimension stored in phases
(flexsched.schedule.Deinterleave) becomes (i % phases, i // phases) in place.

An input or output blocked only inside the kernel is converted there: a blocked workspace is
filled from the caller's array before the computation, or copied out to it after, and that
conversion is part of every call. One blocked at the interface is passed blocked by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from flexsched.affine import interval, split_terms
from flexsched.errors import FlexschedError
from flexsched.expr import Load, as_expr, iter_vars_of, transform
from flexsched.schedule import physical_shape

from .ir import Allocate, Buffer, For, Store, loop_var, map_exprs, map_stmts, seq


# The conversion's innermost loop runs on vector lanes: on YOLO C9 blocked by 32 along k, the kernel
# with both conversions took 1.19x the time of one taking W and O blocked, against 1.38x with scalar
# conversion loops. Where the loop just outside reads the source contiguously, the back end copies
# square tiles through registers (codegen.llvm_backend's transposed copies), so neither side is
# read or written a lane at a time.
CONVERSION_VECTORS = True
# The longest vectorised conversion loop; a longer one is strip-mined (_strip_mined).
MAX_CONVERSION_STRIP = 64


class LayoutError(FlexschedError, ValueError):
    """A blocked layout that does not fit the buffer it applies to (names the tensor and dimension)."""


@dataclass(frozen=True)
class BlockedParam:
    """A kernel parameter the caller passes in a blocked layout: its logical shape and blockings."""

    name: str
    logical_shape: tuple
    blockings: tuple

    @property
    def blocks(self):
        """The blockings in words: 'dim 0 by 16, dim 1 by 4'."""
        return ", ".join(f"dim {b.dim} by {b.block}" for b in self.blockings)

    def describe(self):
        """The layout in words, e.g. 'W: [512, 512, 1, 1] blocked as [32, 512, 1, 1, 16] (dim 0 by 16)'."""
        return (f"{self.name}: {list(self.logical_shape)} blocked as "
                f"{list(physical_shape(self.logical_shape, self.blockings))} ({self.blocks})")


def to_blocked(array, blockings):
    """A caller's array in the blocked layout (a copy; what a blocked interface expects)."""
    array = np.asarray(array)
    shape, axes_outer, axes_inner = [], [], []
    position = 0
    blocked = {b.dim: b.block for b in blockings}
    for dim, extent in enumerate(array.shape):
        if dim in blocked:
            shape += [extent // blocked[dim], blocked[dim]]
            axes_outer.append(position)
            axes_inner.append((dim, position + 1))
            position += 2
        else:
            shape.append(extent)
            axes_outer.append(position)
            position += 1
    inner_by_dim = dict(axes_inner)
    order = axes_outer + [inner_by_dim[b.dim] for b in blockings]
    return np.ascontiguousarray(array.reshape(shape).transpose(order))


def from_blocked(array, logical_shape, blockings):
    """A blocked array back in the caller's layout (a copy)."""
    ndim, count = len(logical_shape), len(blockings)
    inner_axis = {b.dim: ndim + k for k, b in enumerate(blockings)}
    order = []
    for dim in range(ndim):
        order.append(dim)
        if dim in inner_axis:
            order.append(inner_axis[dim])
    assert len(order) == ndim + count
    return np.ascontiguousarray(np.asarray(array).transpose(order).reshape(logical_shape))


def split_index(index, block):
    """(index // block, index % block), exact where the index's terms allow: the terms that are
    multiples of the block go to the quotient whole, and only the rest is divided (floor division
    makes (q * block + rest) // block equal to q + rest // block for any rest), so a loop whose
    coefficient the block divides stays affine in the quotient (a stride-2 read 2 * w + s in
    phases of 2 is w + s // 2 at phase s % 2)."""
    index = as_expr(index, "int64")
    parts = split_terms(index, {v.name for v in iter_vars_of(index)})
    if parts is None:
        return index // block, index % block
    terms, _, constant = parts
    quotient = as_expr(constant // block, "int64")
    rest = as_expr(constant % block, "int64")
    for coefficient, term in terms:
        if coefficient % block == 0:
            quotient = quotient + term * (coefficient // block)
        else:
            rest = rest + term * coefficient
    bounds = interval(rest)
    if bounds is not None and 0 <= bounds[0] and bounds[1] < block:
        return quotient, rest
    if not iter_vars_of(quotient):   # nothing left the block divides: the plain form, as simple
        return index // block, index % block
    return quotient + rest // block, rest % block


def physical_indices(indices, blockings):
    """Logical indices of a blocked buffer as its physical ones."""
    outer, inner = [(index,) for index in indices], []
    for blocking in blockings:
        quotient, remainder = split_index(indices[blocking.dim], blocking.block)
        if blocking.phases:
            outer[blocking.dim] = (remainder, quotient)
        else:
            outer[blocking.dim] = (quotient,)
            inner.append(remainder)
    return tuple(index for dims in outer for index in dims) + tuple(inner)


def apply_layouts(func, layouts, inputs, outputs):
    """(func, blocked interface params, new workspaces) with every blocked buffer stored blocked;
    layouts maps a buffer's name to its blockings. Workspaces among func's params keep their
    place with their physical shape; the conversion workspaces are appended."""
    if not layouts:
        return func, (), ()
    blocked = {}        # old Buffer -> new Buffer
    interface, workspaces, before, after = [], [], [], []
    params = list(func.params)
    for position, param in enumerate(func.params):
        blockings = layouts.get(param.name)
        if not blockings:
            continue
        _check_fits(param, blockings)
        physical = Buffer(param.name, physical_shape(param.shape, blockings), param.dtype, param.scope)
        if blockings[0].interface or param.name not in inputs + outputs:  # a workspace is ours to lay out
            params[position] = physical
            blocked[param] = physical
            if param.name in inputs + outputs:
                interface.append(BlockedParam(param.name, param.shape, tuple(blockings)))
            continue
        inside = Buffer(f"{param.name}_blocked", physical.shape, param.dtype)
        blocked[param] = inside
        workspaces.append(inside)
        if param.name in inputs:
            before.append(_conversion(param, inside, blockings, to_inside=True))
        if param.name in outputs:
            after.append(_conversion(param, inside, blockings, to_inside=False))

    def note_allocations(stmt):
        if isinstance(stmt, Allocate) and layouts.get(stmt.buffer.name) and stmt.buffer not in blocked:
            _check_fits(stmt.buffer, layouts[stmt.buffer.name])
            blocked[stmt.buffer] = replace(stmt.buffer, shape=physical_shape(stmt.buffer.shape,
                                                                              layouts[stmt.buffer.name]))
        return None

    map_stmts(func.body, note_allocations)

    def rewrite_expr(expr):
        def rule(node):  # bottom-up: the indices are rewritten already
            if isinstance(node, Load) and node.tensor in blocked:
                return Load(blocked[node.tensor], _physical(node.tensor, node.indices), node.dtype)
            return None
        return transform(expr, rule)

    def _physical(buffer, indices):
        return physical_indices(indices, layouts[buffer.name])

    def relocate(stmt):  # stores and allocations of blocked buffers; their loads are rewritten already
        if isinstance(stmt, Store) and stmt.buffer in blocked:
            return Store(blocked[stmt.buffer], _physical(stmt.buffer, stmt.indices), stmt.value)
        if isinstance(stmt, Allocate) and stmt.buffer in blocked:
            return Allocate(blocked[stmt.buffer], stmt.body)
        return None

    body = map_stmts(map_exprs(func.body, rewrite_expr), relocate)
    body = seq(*before, body, *after)
    func = replace(func, params=tuple(params) + tuple(workspaces), body=body)
    return func, tuple(interface), tuple(workspaces)


def _check_fits(buffer, blockings):
    for blocking in blockings:
        extent = buffer.shape[blocking.dim]
        if extent % blocking.block and not blocking.phases:   # phases are rounded up
            raise LayoutError(f"buffer '{buffer.name}': dimension {blocking.dim} (extent {extent}) is not a "
                              f"multiple of its block {blocking.block}")


def _conversion(param, inside, blockings, to_inside):
    """The loop nest copying a caller's array into its blocked workspace (or back out); the outermost
    loop runs in parallel, the innermost is contiguous in the destination and runs on vector lanes.

    Into the workspace, the loops follow the blocked order, so the block is innermost and the loop
    around it is the caller's last dimension, contiguous in the source. Out of it, with one dimension
    blocked that is not the last, the block's loop goes just outside the caller's last dimension, for
    the same reason. Loops of one iteration are left out (their index is 0), so the two loops a
    transposed copy needs sit next to each other."""
    if to_inside:
        variables = _loop_vars(inside.name, inside.shape)
        logical = list(variables[:len(param.shape)])
        for k, blocking in enumerate(blockings):
            logical[blocking.dim] = logical[blocking.dim] * blocking.block + variables[len(param.shape) + k]
        stmt = Store(inside, tuple(variables), Load(param, tuple(logical), param.dtype))
        return _copy_nest(stmt, list(zip(variables, inside.shape)))
    variables = _loop_vars(param.name, param.shape)
    last = len(param.shape) - 1
    if len(blockings) != 1 or blockings[0].dim == last:
        stmt = Store(param, tuple(variables), Load(inside, physical_indices(tuple(variables), blockings), param.dtype))
        return _copy_nest(stmt, list(zip(variables, param.shape)))
    dim, block = blockings[0].dim, blockings[0].block
    outer = loop_var(f"{param.name}.c{dim}o", param.shape[dim] // block)
    inner = loop_var(f"{param.name}.c{dim}i", block)
    logical = list(variables)
    logical[dim] = outer * block + inner
    stmt = Store(param, tuple(logical), Load(inside, physical_indices(tuple(logical), blockings), param.dtype))
    loops = [(outer, outer.extent) if d == dim else (variables[d], param.shape[d]) for d in range(last)]
    return _copy_nest(stmt, loops + [(inner, block), (variables[last], param.shape[last])])


def _strip_mined(stmt, loops):
    """(stmt, loops) with an innermost loop longer than MAX_CONVERSION_STRIP split into strips of
    whole vectors (16 lanes where they divide it, else 8), the strip loop moved outside the loop
    around it; unchanged where no strip divides it. The innermost loop stays vectorised and the two
    loops a transposed copy needs stay next to each other (YOLO C1's output rows, 224 long, were
    copied element by element otherwise)."""
    var, extent = loops[-1]
    if len(loops) < 2 or extent <= MAX_CONVERSION_STRIP or not CONVERSION_VECTORS:
        return stmt, loops
    # Largest first, whole AVX-512 registers (multiples of 16) before the rest.
    sizes = sorted(range(MAX_CONVERSION_STRIP, 7, -8), key=lambda size: size % 16 != 0)
    strip = next((size for size in sizes if extent % size == 0), None)
    if strip is None:
        return stmt, loops
    outer, inner = loop_var(f"{var.name}o", extent // strip), loop_var(f"{var.name}i", strip)
    stmt = map_exprs(stmt, lambda expr: transform(expr, lambda node: outer * strip + inner if node is var else None))
    return stmt, loops[:-2] + [(outer, outer.extent), loops[-2], (inner, strip)]


def _loop_vars(name, shape):
    return [loop_var(f"{name}.c{d}", n) for d, n in enumerate(shape)]


def _copy_nest(stmt, loops):
    """stmt inside (variable, extent) loops, outermost first; one-iteration loops become index 0."""
    trivial = {id(var): as_expr(0, "int64") for var, extent in loops if extent == 1}
    if trivial:
        stmt = map_exprs(stmt, lambda expr: transform(expr, lambda node: trivial.get(id(node))))
    loops = [(var, extent) for var, extent in loops if extent > 1] or loops[-1:]
    stmt, loops = _strip_mined(stmt, loops)
    for depth in range(len(loops) - 1, -1, -1):
        var, extent = loops[depth]
        kind = "parallel" if depth == 0 and extent > 1 else "serial"
        if depth == len(loops) - 1 and CONVERSION_VECTORS and 1 < extent <= MAX_CONVERSION_STRIP and kind == "serial":
            kind = "vectorized"
        stmt = For(var, extent, kind, stmt)
    return stmt
