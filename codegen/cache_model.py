"""Data movement of a loop nest through a cache, after Tuna (sec. III-A2): the bytes each level of
a loop nest brings into a cache of a given size, from the footprints of its accesses.

The footprint of a statement is, per buffer, the cache lines its accesses touch while the loops
inside the statement run and those outside stand still: each index dimension's interval (from
affine.interval; the whole dimension where an index has no bound), rows of the innermost
intervals rounded to whole lines. A footprint fits a cache when its bytes do and no set of the
cache has to hold far more of one buffer's lines than the cache has ways (rows a power of two apart, as in
a 1024-wide matrix, all land in a few sets: 32 such rows thrash an 8-way L1 of any size). Bottom-up,
a statement whose footprint fits moves its footprint once; a loop whose single iteration fits
moves its footprint (what one iteration shares with the next stays); otherwise each iteration
moves what its body moves. Written buffers move twice: a line is filled and later written back.
Calls follow each other as when a kernel is timed or run in a loop: a whole tree that fits a
cache finds its data there from the previous call and moves nothing into it.
"""

from __future__ import annotations

import math

import numpy as np

from flexsched.affine import interval
from flexsched.expr import Load, as_expr, walk

from .ir import Allocate, For, IfThenElse, Seq, Store

LINE_BYTES = 64   # the cache line of every x86-64 CPU
# A footprint thrashes a set only well past its ways: up to twice as many lines a set mostly
# still hit (LRU keeps the most used, prefetchers refill the rest); measured on GMV 1024 schedules
# reading 16 and 32 rows of 4 KB pitch per step on Zen 4, the first as fast as contiguous code.
CONFLICT_TOLERANCE = 2
# Footprints of more lines than this are not mapped onto sets (they exceed any L1 or L2 anyway).
MAX_MAPPED_LINES = 1 << 16


class Cache:
    """One cache level as the model sees it: capacity in bytes, and its ways (0: fully associative,
    as for a last level whose sets are hashed)."""

    def __init__(self, capacity, ways=0):
        self.capacity = capacity
        self.ways = ways
        self.sets = max(1, int(capacity // (LINE_BYTES * ways))) if ways else 0


class CacheModel:
    """Footprints and data movement of one statement tree; `extents` overrides loops' trip counts
    (a parallel loop runs only a core's share of its iterations)."""

    def __init__(self, stmt, extents=None):
        self.stmt = stmt
        self.extents = dict(extents or {})
        self._footprints = {}
        self._hulls = {}
        self._fits = {}
        self._accesses = {}
        self._written = {}

    def footprint(self, stmt=None, pinned=frozenset()):
        """{buffer: bytes} the statement touches, with the loops named in pinned standing still."""
        stmt = self.stmt if stmt is None else stmt
        key = id(stmt)
        if key not in self._footprints:
            ranges = {name: (0, 0) for name in pinned}
            ranges.update({name: (0, extent - 1) for name, extent in self.extents.items() if name not in pinned})
            hulls = {}
            for buffer, indices in self.accesses(stmt):
                dims = []
                for index, extent in zip(indices, buffer.shape):
                    bound = interval(index, ranges)
                    low, high = (0, extent - 1) if bound is None else (max(0, bound[0]), min(extent - 1, bound[1]))
                    dims.append((low, max(low, high)))
                known = hulls.get(buffer)
                hulls[buffer] = dims if known is None else [(min(a[0], b[0]), max(a[1], b[1]))
                                                           for a, b in zip(known, dims)]
            self._hulls[key] = hulls
            self._footprints[key] = {buffer: _bytes(buffer, dims) for buffer, dims in hulls.items()}
        return self._footprints[key]

    def fits(self, stmt, pinned, cache):
        """Whether the statement's footprint fits the cache: its bytes, and its lines set by set."""
        key = (id(stmt), cache.capacity, cache.ways)
        if key not in self._fits:
            footprint = self.footprint(stmt, pinned)
            fits = sum(footprint.values()) <= cache.capacity
            if fits and cache.ways:   # each buffer's lines set by set (where buffers start is unknown)
                for buffer, dims in self._hulls[id(stmt)].items():
                    lines = _lines(buffer, dims)
                    if lines is None or np.bincount(lines % cache.sets).max() > CONFLICT_TOLERANCE * cache.ways:
                        fits = False
                        break
            self._fits[key] = fits
        return self._fits[key]

    def moved(self, cache):
        """Bytes one call of the whole tree brings into a cache (a Cache, or a capacity in bytes),
        written buffers twice, in calls back to back: a tree that fits stays from the last call."""
        cache = cache if isinstance(cache, Cache) else Cache(cache)
        if self.fits(self.stmt, frozenset(), cache):
            return 0
        moved = self._moved(self.stmt, cache, frozenset())
        return sum(value * (2 if buffer in self.written() else 1) for buffer, value in moved.items())

    def written(self):
        """The buffers some store of the tree writes."""
        key = id(self.stmt)
        if key not in self._written:
            self._written[key] = {node.buffer for node in _walk(self.stmt) if isinstance(node, Store)}
        return self._written[key]

    def _moved(self, stmt, cache, pinned):
        footprint = self.footprint(stmt, pinned)
        if self.fits(stmt, pinned, cache):
            return footprint
        if isinstance(stmt, For):
            inner = pinned | {stmt.var.name}
            if self.fits(stmt.body, inner, cache):
                return footprint   # one iteration fits: what it shares with the next stays
            trips = self.extents.get(stmt.var.name, stmt.extent)
            return {buffer: value * trips for buffer, value in self._moved(stmt.body, cache, inner).items()}
        if isinstance(stmt, Seq):
            parts = [self._moved(part, cache, pinned) for part in stmt.stmts]
        elif isinstance(stmt, Allocate):
            parts = [self._moved(stmt.body, cache, pinned)]
        elif isinstance(stmt, IfThenElse):
            # One branch runs (a versioned tile's fast or guarded copy, not both): the larger's bytes.
            branches = [self._moved(body, cache, pinned) for body in (stmt.then_body, stmt.else_body)
                        if body is not None]
            return max(branches, key=lambda moved: sum(moved.values()))
        else:
            return footprint
        total = {}
        for part in parts:
            for buffer, value in part.items():
                total[buffer] = total.get(buffer, 0) + value
        return total

    def accesses(self, stmt):
        """(buffer, index expressions) of every load and store under stmt."""
        key = id(stmt)
        if key not in self._accesses:
            found = []
            for node in _walk(stmt):
                if isinstance(node, Store):
                    found.append((node.buffer, tuple(as_expr(i, "int64") for i in node.indices)))
                    expressions = [as_expr(node.value, node.buffer.dtype), *(as_expr(i, "int64") for i in node.indices)]
                elif isinstance(node, IfThenElse):
                    expressions = [node.cond]
                else:
                    continue
                for expression in expressions:
                    found.extend((load.tensor, tuple(as_expr(i, "int64") for i in load.indices))
                                 for load in walk(expression) if isinstance(load, Load))
            self._accesses[key] = found
        return self._accesses[key]


def _walk(stmt):
    """Every statement under stmt, stmt first."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, Seq):
            stack.extend(node.stmts)
        elif isinstance(node, (For, Allocate)):
            stack.append(node.body)
        elif isinstance(node, IfThenElse):
            stack.append(node.then_body)
            if node.else_body is not None:
                stack.append(node.else_body)


def _bytes(buffer, dims):
    """Bytes of the whole cache lines a box of a row-major buffer touches: rows of its innermost
    intervals (merged across dimensions the box covers whole) rounded to lines; where rows do not
    all start alike within a line, the lines an unaligned row touches on average."""
    if not dims:
        return LINE_BYTES
    item, sizes, axis, run, strides, offset = _box(buffer, dims)
    rows = math.prod(sizes[:axis])
    if all(strides[d] * item % LINE_BYTES == 0 for d in range(axis)):
        lines = ((offset + run) * item - 1) // LINE_BYTES - offset * item // LINE_BYTES + 1
    else:
        lines = -(-(run * item + LINE_BYTES - item) // LINE_BYTES)
    whole = -(-buffer.size * item // LINE_BYTES)
    return min(rows * lines, whole) * LINE_BYTES


def _lines(buffer, dims):
    """The line numbers a box of a row-major buffer touches (the buffer starting at a line, as
    page-aligned arrays do), or None when there are more than MAX_MAPPED_LINES."""
    if not dims:
        return np.zeros(1, dtype=np.int64)
    item, sizes, axis, run, strides, offset = _box(buffer, dims)
    rows = math.prod(sizes[:axis])
    if rows * -(-(run * item + LINE_BYTES - item) // LINE_BYTES) > MAX_MAPPED_LINES:
        return None
    starts = np.array([offset], dtype=np.int64)
    for d in range(axis):
        starts = (starts[:, None] + np.arange(sizes[d], dtype=np.int64)[None, :] * strides[d]).ravel()
    first = starts * item // LINE_BYTES
    count = int((((starts + run) * item - 1) // LINE_BYTES - first).max()) + 1
    return (first[:, None] + np.arange(count, dtype=np.int64)[None, :]).ravel()


def _box(buffer, dims):
    """(item bytes, sizes, the outermost axis of the contiguous run, the run's elements, each
    axis's stride in elements, the box's first element) of a box of a row-major buffer."""
    item = np.dtype(buffer.dtype).itemsize
    sizes = [high - low + 1 for low, high in dims]
    axis = len(sizes) - 1
    run = sizes[axis]
    while axis > 0 and sizes[axis] == buffer.shape[axis]:
        axis -= 1
        run *= sizes[axis]
    strides = [math.prod(buffer.shape[d + 1:]) for d in range(len(dims))]
    offset = sum(low * stride for (low, _), stride in zip(dims, strides))
    return item, sizes, axis, run, strides, offset
