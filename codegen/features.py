"""Features of a candidate kernel for learned cost models, read from its lowered loop IR.

Two views of one kernel, the same for CPU and GPU loop IR:
- a fixed-length vector (for boosted trees): per innermost statement (a Store) the loops around it
  (how often it runs, vector lanes, unrolling, parallel and thread extents, the innermost loop), its
  arithmetic, and for each access (the store and its loads) the stride along the innermost loop and
  the bytes it touches within the 1, 2, ... innermost non-unit loops (the footprint per level of
  tiling) and its reuse; the two hottest statements, and kernel-wide totals: arithmetic, and the
  bytes the whole nest moves through caches of three sizes (codegen.cache_model, as the static CPU
  model counts them; fixed sizes, so the features stay the same for every target);
- a graph (for the graph network): loops, allocations, statements and accesses as nodes with
  features of the same kinds, and edges from each node to what it contains.
Values are log2-scaled so one model sees small and large operators alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flexsched.affine import stride as affine_stride
from flexsched.expr import Binary, Call, Load, children, walk

from .cache_model import Cache, CacheModel
from .ir import Allocate, For, IfThenElse, Seq, Store, walk_stmts

LEVELS = (1, 2, 3, 4, 6, 8)   # footprints within this many innermost non-unit loops, then the whole nest
ACCESS_SLOTS = 4              # the store and its three largest loads
HOT_STATEMENTS = 2            # statements described in the vector, hottest first
PARALLEL_KINDS = ("parallel", "blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_KINDS = ("threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread")
LOOP_CLASSES = ("serial", "parallel", "vectorized", "unrolled", "block", "thread", "vthread")
SCOPES = ("global", "local", "shared")
NODE_TYPES = ("loop", "allocate", "statement", "load", "store")
# Typical x86 L1 data, L2 and last-level caches (bytes, ways; 0: hashed sets).
CACHES = (Cache(48 * 1024, 12), Cache(1024 * 1024, 8), Cache(32 * 1024 * 1024))


def _log2(value):
    return math.log2(1.0 + max(0.0, float(value)))


def _loop_class(kind):
    if kind.startswith("blockIdx"):
        return "block"
    if kind.startswith("threadIdx"):
        return "thread"
    return kind


@dataclass(frozen=True)
class Access:
    """One buffer access of a statement, seen from the loops around it."""

    buffer: object
    is_store: bool
    stride: float            # elements per step of the innermost non-unit loop; nan when not affine
    footprints: tuple        # bytes touched within each of LEVELS innermost loops, then the whole nest

    def vector(self, executions):
        scope = [float(self.buffer.scope == s) for s in SCOPES]
        known = not math.isnan(self.stride)
        step = abs(self.stride) if known else 0.0
        elements = self.footprints[-1] / max(1, _itemsize(self.buffer.dtype))
        return [1.0, float(self.is_store), *scope, _log2(step), float(not known), float(known and step == 1),
                float(known and step == 0), *(_log2(b) for b in self.footprints),
                _log2(executions / max(1.0, elements))]


ACCESS_LENGTH = 2 + len(SCOPES) + 4 + len(LEVELS) + 1 + 1


@dataclass(frozen=True)
class Statement:
    """An innermost statement and the loops around it, outermost first."""

    store: Store
    loops: tuple             # the enclosing For statements
    accesses: tuple

    @property
    def executions(self):
        return math.prod(loop.extent for loop in self.loops)

    def operations(self):
        """(additions, multiplications, other arithmetic) in the stored value."""
        adds = muls = other = 0
        for node in _value_nodes(self.store.value):
            if isinstance(node, Binary):
                if node.op in ("+", "-"):
                    adds += 1
                elif node.op == "*":
                    muls += 1
                else:
                    other += 1
            elif isinstance(node, Call):
                other += 1
        return adds, muls, other

    def vector(self):
        kinds = [loop.kind for loop in self.loops]
        extents = [loop.extent for loop in self.loops]

        def product(wanted):
            return math.prod(e for k, e in zip(kinds, extents) if k in wanted)

        inner = [loop for loop in self.loops if loop.extent > 1]
        innermost = inner[-1] if inner else None
        lanes = innermost.extent if innermost is not None and innermost.kind == "vectorized" else 1
        reduction = any(isinstance(n, Load) and n.tensor is self.store.buffer for n in walk(self.store.value))
        head = [_log2(self.executions), float(len(inner)), _log2(lanes), _log2(product(("unrolled",))),
                _log2(product(PARALLEL_KINDS)), _log2(product(THREAD_KINDS)),
                _log2(innermost.extent if innermost else 1), *self.operations(),
                float(len(self.accesses) - 1), float(reduction)]
        slots = sorted(self.accesses[1:], key=lambda a: -a.footprints[-1])
        ordered = [self.accesses[0], *slots][:ACCESS_SLOTS]
        body = [value for access in ordered for value in access.vector(self.executions)]
        return head + body + [0.0] * (ACCESS_LENGTH * (ACCESS_SLOTS - len(ordered)))


STATEMENT_LENGTH = 12 + ACCESS_LENGTH * ACCESS_SLOTS
KERNEL_LENGTH = 6 + 2 * len(CACHES)
VECTOR_LENGTH = KERNEL_LENGTH + STATEMENT_LENGTH * HOT_STATEMENTS
NODE_LENGTH = len(NODE_TYPES) + len(LOOP_CLASSES) + 3 + ACCESS_LENGTH


@dataclass(frozen=True)
class CandidateFeatures:
    """A candidate's feature vector and its graph: node features, and (parent, child) edges."""

    vector: np.ndarray        # float32 [VECTOR_LENGTH]
    nodes: np.ndarray         # float32 [nodes, NODE_LENGTH]
    edges: np.ndarray         # int64 [edges, 2]


def _value_nodes(expr):
    """The nodes of a stored value, not descending into the index arithmetic of its loads."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, Load):
            stack.extend(children(node))


def _itemsize(dtype):
    return np.dtype(dtype).itemsize


def _flat_stride(buffer, indices, var):
    """Elements the access moves per step of var in a row-major buffer; nan when not affine."""
    total, scale = 0, 1
    for extent, index in zip(reversed(buffer.shape), reversed(indices)):
        step = affine_stride(index, var)
        if step is None:
            return math.nan
        total += step * scale
        scale *= extent
    return float(total)


def _footprint(buffer, indices, loops):
    """Bytes the access touches while the given loops run: the distinct elements its indices can
    take (the loops it moves with, bounded by its span and the buffer), times the element size."""
    distinct = 1
    span = 0
    for loop in loops:
        step = _flat_stride(buffer, indices, loop.var)
        if step == 0:
            continue
        distinct *= loop.extent
        span += (abs(step) if not math.isnan(step) else buffer.size) * (loop.extent - 1)
    return min(distinct, span + 1, buffer.size) * _itemsize(buffer.dtype)


def _access(buffer, indices, loops, is_store):
    inner = [loop for loop in loops if loop.extent > 1]
    step = _flat_stride(buffer, indices, inner[-1].var) if inner else 0.0
    footprints = tuple(_footprint(buffer, indices, inner[len(inner) - level:] if level else []) for level in LEVELS)
    return Access(buffer, is_store, step, footprints + (_footprint(buffer, indices, inner),))


def statements(body):
    """Every Store of a loop-IR body with the loops around it, in program order."""
    found = []

    def visit(stmt, loops):
        if isinstance(stmt, For):
            visit(stmt.body, loops + (stmt,))
        elif isinstance(stmt, Seq):
            for part in stmt.stmts:
                visit(part, loops)
        elif isinstance(stmt, Allocate):
            visit(stmt.body, loops)
        elif isinstance(stmt, IfThenElse):
            visit(stmt.then_body, loops)
            if stmt.else_body is not None:
                visit(stmt.else_body, loops)
        elif isinstance(stmt, Store):
            loads = [node for node in walk(stmt.value) if isinstance(node, Load)]
            accesses = (_access(stmt.buffer, stmt.indices, loops, True),
                        *(_access(load.tensor, load.indices, loops, False) for load in loads
                          if hasattr(load.tensor, "scope")))
            found.append(Statement(stmt, loops, accesses))

    visit(body, ())
    return found


def kernel_vector(func):
    """The fixed-length feature vector of a kernel (a PrimFunc)."""
    found = statements(func.body)
    hottest = sorted(found, key=lambda s: -s.executions)[:HOT_STATEMENTS]
    allocations = [s for s in walk_stmts(func.body) if isinstance(s, Allocate)]
    local_bytes = sum(a.buffer.size * _itemsize(a.buffer.dtype) for a in allocations)
    arithmetic = sum(s.executions * sum(s.operations()) for s in found)
    params = sum(b.size * _itemsize(b.dtype) for b in func.params)
    cache_model = CacheModel(func.body)
    moved = [_log2(cache_model.moved(cache)) for cache in CACHES]
    vector = [_log2(arithmetic), float(len(found)), float(len(allocations)), _log2(local_bytes), _log2(params),
              _log2(arithmetic) - _log2(params), *moved, *(_log2(arithmetic) - m for m in moved)]
    for statement in hottest:
        vector += statement.vector()
    vector += [0.0] * (VECTOR_LENGTH - len(vector))
    return np.asarray(vector, dtype=np.float32)


def kernel_graph(func):
    """(node features, (parent, child) edges) of a kernel's loop nest."""
    nodes, edges = [], []

    def node(kind, loop_kind=None, extent=1, executions=1, extra=()):
        row = [float(kind == t) for t in NODE_TYPES]
        row += [float(loop_kind is not None and _loop_class(loop_kind) == c) for c in LOOP_CLASSES]
        row += [_log2(extent), _log2(executions), float(len(extra) > 0)]
        row += list(extra) + [0.0] * (ACCESS_LENGTH - len(extra))
        nodes.append(row)
        return len(nodes) - 1

    def visit(stmt, parent, loops):
        executions = math.prod(loop.extent for loop in loops)
        if isinstance(stmt, For):
            me = node("loop", stmt.kind, stmt.extent, executions * stmt.extent)
            edges.append((parent, me))
            visit(stmt.body, me, loops + (stmt,))
        elif isinstance(stmt, Seq):
            for part in stmt.stmts:
                visit(part, parent, loops)
        elif isinstance(stmt, Allocate):
            size = stmt.buffer.size * _itemsize(stmt.buffer.dtype)
            me = node("allocate", extent=size, executions=executions)
            edges.append((parent, me))
            visit(stmt.body, me, loops)
        elif isinstance(stmt, IfThenElse):
            visit(stmt.then_body, parent, loops)
            if stmt.else_body is not None:
                visit(stmt.else_body, parent, loops)
        elif isinstance(stmt, Store):
            loads = [n for n in walk(stmt.value) if isinstance(n, Load) and hasattr(n.tensor, "scope")]
            adds, muls, other = Statement(stmt, loops, ()).operations()
            me = node("statement", extent=adds + muls + other, executions=executions,
                      extra=(float(adds), float(muls), float(other), float(len(loads))))
            edges.append((parent, me))
            for access in (_access(stmt.buffer, stmt.indices, loops, True),
                           *(_access(n.tensor, n.indices, loops, False) for n in loads)):
                child = node("store" if access.is_store else "load", executions=executions,
                             extra=access.vector(executions))
                edges.append((me, child))

    root = node("loop", "serial", 1, 1)
    visit(func.body, root, ())
    return np.asarray(nodes, dtype=np.float32), np.asarray(edges, dtype=np.int64).reshape(-1, 2)


def candidate_features(func):
    """CandidateFeatures of a lowered kernel (the PrimFunc its back end compiles)."""
    nodes, edges = kernel_graph(func)
    return CandidateFeatures(kernel_vector(func), nodes, edges)


def features_of(task, schedule, target, info=None):
    """CandidateFeatures of task under schedule on target, from the loop IR its back end would compile."""
    from .kernel import lower_for

    _, lowered = lower_for(task, schedule, target, info=info)
    return candidate_features(lowered.func)
