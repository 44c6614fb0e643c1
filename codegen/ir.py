"""The loop IR between lowering and the back ends: loops with a kind, stores, guards,
allocations and barriers, over buffers with a scope.

Expressions are the DSL's own nodes (flexsched.expr): loop variables are IterVars of kind
"loop", and a Load reads a Buffer by multi-dimensional indices. Statements are frozen values.
The IR already carries what the GPU back end needs (thread-bound loops, shared buffers,
barriers), even where only the CPU back end consumes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from flexsched.errors import FlexschedError
from flexsched.expr import IterVar, as_expr, format_expr

class CodegenError(FlexschedError, ValueError):
    """The loop IR holds something a back end cannot compile (one line naming the loop or buffer)."""


LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled",
              "blockIdx.x", "blockIdx.y", "blockIdx.z", "vthread", "threadIdx.x", "threadIdx.y", "threadIdx.z")
SCOPES = ("global", "local", "shared")


@dataclass(frozen=True, eq=False)
class Buffer:
    """A row-major array: a kernel argument (global) or scratch memory (local, shared)."""

    name: str
    shape: tuple
    dtype: str
    scope: str = "global"

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"Buffer({self.name!r}, {self.shape}, {self.dtype!r}, {self.scope!r})"


def loop_var(name, extent):
    """A fresh loop variable."""
    return IterVar(name, extent, "loop", "int64")


class Stmt:
    """Base of statements."""

    __slots__ = ()

    def __str__(self):
        return "\n".join(format_stmt(self))


@dataclass(frozen=True, eq=False, repr=False)
class For(Stmt):
    var: IterVar
    extent: int
    kind: str   # one of LOOP_KINDS
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class Seq(Stmt):
    stmts: tuple


@dataclass(frozen=True, eq=False, repr=False)
class Store(Stmt):
    buffer: Buffer
    indices: tuple
    value: object   # an Expr


@dataclass(frozen=True, eq=False, repr=False)
class IfThenElse(Stmt):
    cond: object    # a boolean Expr
    then_body: Stmt
    else_body: Stmt | None = None


@dataclass(frozen=True, eq=False, repr=False)
class Allocate(Stmt):
    """Scratch memory live during body (per thread on a CPU, per block when shared on a GPU)."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class Barrier(Stmt):
    """GPU: all threads of a block wait here (around shared-memory refills)."""


@dataclass(frozen=True, eq=False)
class PrimFunc:
    """A kernel: global buffers in argument order (inputs, then outputs) and a body."""

    name: str
    params: tuple
    body: Stmt

    def __str__(self):
        args = ", ".join(f"{b.name}: {b.dtype}{list(b.shape)}" for b in self.params)
        return "\n".join([f"def {self.name}({args}):", *("  " + line for line in format_stmt(self.body))])


def seq(*stmts):
    """A statement from parts, flattening nested Seqs and dropping Nones."""
    flat = []
    for stmt in stmts:
        if stmt is None:
            continue
        flat.extend(stmt.stmts if isinstance(stmt, Seq) else (stmt,))
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def walk_stmts(stmt):
    """Every statement under stmt, stmt first."""
    yield stmt
    if isinstance(stmt, Seq):
        for part in stmt.stmts:
            yield from walk_stmts(part)
    elif isinstance(stmt, (For, Allocate)):
        yield from walk_stmts(stmt.body)
    elif isinstance(stmt, IfThenElse):
        yield from walk_stmts(stmt.then_body)
        if stmt.else_body is not None:
            yield from walk_stmts(stmt.else_body)


def flatten(stmt):
    """The statements of a (possibly nested) Seq, in order."""
    return [part for inner in stmt.stmts for part in flatten(inner)] if isinstance(stmt, Seq) else [stmt]


def map_stmts(stmt, rule):
    """stmt rebuilt bottom-up, each statement replaced by rule(statement) (None keeps it)."""
    if isinstance(stmt, Seq):
        rebuilt = seq(*(map_stmts(part, rule) for part in stmt.stmts))
    elif isinstance(stmt, For):
        rebuilt = replace(stmt, body=map_stmts(stmt.body, rule))
    elif isinstance(stmt, Allocate):
        rebuilt = replace(stmt, body=map_stmts(stmt.body, rule))
    elif isinstance(stmt, IfThenElse):
        rebuilt = replace(stmt, then_body=map_stmts(stmt.then_body, rule),
                          else_body=None if stmt.else_body is None else map_stmts(stmt.else_body, rule))
    else:
        rebuilt = stmt
    replaced = rule(rebuilt)
    return rebuilt if replaced is None else replaced


def map_exprs(stmt, rule):
    """stmt with every expression it holds (stored values, store indices, conditions) replaced
    by rule(expression)."""
    def visit(node):
        if isinstance(node, Store):
            return Store(node.buffer, tuple(rule(as_expr(i, "int64")) for i in node.indices),
                         rule(as_expr(node.value, node.buffer.dtype)))
        if isinstance(node, IfThenElse):
            return replace(node, cond=rule(node.cond))
        return None

    return map_stmts(stmt, visit)


def format_stmt(stmt, indent=""):
    """Readable lines of a statement, as users read a lowered schedule."""
    if isinstance(stmt, For):
        tag = "" if stmt.kind == "serial" else f"  # {stmt.kind}"
        return [f"{indent}for {stmt.var.name} in range({stmt.extent}):{tag}",
                *format_stmt(stmt.body, indent + "  ")]
    if isinstance(stmt, Seq):
        return [line for part in stmt.stmts for line in format_stmt(part, indent)]
    if isinstance(stmt, Store):
        index = ", ".join(format_expr(i) for i in stmt.indices)
        return [f"{indent}{stmt.buffer.name}[{index}] = {format_expr(stmt.value)}"]
    if isinstance(stmt, IfThenElse):
        lines = [f"{indent}if {format_expr(stmt.cond)}:", *format_stmt(stmt.then_body, indent + "  ")]
        if stmt.else_body is not None:
            lines += [f"{indent}else:", *format_stmt(stmt.else_body, indent + "  ")]
        return lines
    if isinstance(stmt, Allocate):
        b = stmt.buffer
        return [f"{indent}{b.name} = alloc_{b.scope}({b.dtype}{list(b.shape)})", *format_stmt(stmt.body, indent)]
    if isinstance(stmt, Barrier):
        return [f"{indent}barrier()"]
    raise TypeError(f"not a statement: {stmt!r}")
