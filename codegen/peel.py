"""Peeling the last iteration of loops whose guards only its last iteration needs.

A ceil-divided split (a register tile of 6 rows over 1024) guards each row with a bounds test.
Inside an unrolled register tile such a test splits the accumulators into conditional blocks,
and LLVM no longer keeps them in registers: GMM 1024^3 with a 6x16 tile ran at 0.73x of the 4x16
one, while the same 6x16 tile over 1026 rows (no guard) ran at 1.06-1.09x (AVX2). Running all
iterations but the last without the tests, and the last one with them, gives the full tile to
every iteration but one.

A serial loop of 8 or more iterations is peeled where some guard of an unrolled tile inside it,
unprovable over the loop's whole range, holds by interval arithmetic over every iteration but
the last; the guards that then hold are dropped; one loop per nest. Parallel, unrolled and
vectorised loops are left as they are (the unroller and the vectoriser handle their own
remainders). Peeling doubles the code LLVM optimises: peeling every such loop, nested and short
ones included (a 3 x 3 YOLO tile whose 56 columns pad to 64 in 4 outer blocks), cost C4 and C8
1.1-1.7x the compile time of the points their searches visited, for none of the bests.
"""

from __future__ import annotations

from dataclasses import replace

from flexsched.affine import interval
from flexsched.expr import Compare, Const, IterVar, Logical, iter_vars_of, transform

from .ir import Allocate, For, IfThenElse, PrimFunc, Seq, loop_var, map_exprs, map_stmts, seq

PEELED_KINDS = ("serial",)
MIN_PEELED_EXTENT = 8   # a shorter loop's last iteration is too large a share to leave guarded for the code it costs
MAX_PEELS = 1   # each peel copies a loop body once; nested peels multiply the code LLVM optimises


def peel_tails(func: PrimFunc) -> PrimFunc:
    """func with the guard-only last iterations of its serial loops peeled off."""
    body = _drop_proven_guards(func.body)
    return PrimFunc(func.name, func.params, _peel(body, MAX_PEELS))


def _peel(stmt, budget):
    if isinstance(stmt, Seq):
        return seq(*(_peel(part, budget) for part in stmt.stmts))
    if isinstance(stmt, Allocate):
        return replace(stmt, body=_peel(stmt.body, budget))
    if isinstance(stmt, IfThenElse):
        return replace(stmt, then_body=_peel(stmt.then_body, budget),
                       else_body=None if stmt.else_body is None else _peel(stmt.else_body, budget))
    if not isinstance(stmt, For):
        return stmt
    if budget > 0 and stmt.kind in PEELED_KINDS and stmt.extent >= MIN_PEELED_EXTENT and _tail_only_guards(stmt):
        shorter = loop_var(stmt.var.name, stmt.extent - 1)
        main = For(shorter, stmt.extent - 1, stmt.kind,
                   _drop_proven_guards(_substitute(stmt.body, stmt.var.name, shorter)))
        tail = _drop_proven_guards(_substitute(stmt.body, stmt.var.name, Const(stmt.extent - 1, stmt.var.dtype)))
        return seq(replace(main, body=_peel(main.body, budget - 1)), _peel(tail, budget - 1))
    return replace(stmt, body=_peel(stmt.body, budget))


def _tail_only_guards(loop):
    """Whether some guard of an unrolled tile in the loop's body fails to hold over the loop's
    whole range but holds over all iterations but the last."""
    name = loop.var.name
    for cond in tile_guards(loop.body):
        if _uses(cond, name) and not _holds(cond) and _holds(cond, {name: (0, loop.extent - 2)}):
            return True
    return False


def tile_guards(stmt, tile_loops=frozenset(), kinds=("unrolled",)):
    """Conditions of the else-less guards that test an enclosing loop of the given kinds (unrolled:
    the ones that split a register tile; a guard elsewhere costs a branch, and peeling would double
    the code LLVM optimises: 1.2-1.8x the compile time of random YOLO points)."""
    if isinstance(stmt, Seq):
        return [cond for part in stmt.stmts for cond in tile_guards(part, tile_loops, kinds)]
    if isinstance(stmt, For):
        inner = tile_loops | {stmt.var.name} if stmt.kind in kinds else tile_loops
        return tile_guards(stmt.body, inner, kinds)
    if isinstance(stmt, Allocate):
        return tile_guards(stmt.body, tile_loops, kinds)
    if isinstance(stmt, IfThenElse):
        inner = tile_guards(stmt.then_body, tile_loops, kinds)
        if stmt.else_body is not None:
            return inner + tile_guards(stmt.else_body, tile_loops, kinds)
        return inner + ([stmt.cond] if any(_uses(stmt.cond, name) for name in tile_loops) else [])
    return []


def _drop_proven_guards(stmt):
    """stmt with every else-less guard that interval arithmetic proves true replaced by its body."""
    def rule(node):
        if isinstance(node, IfThenElse) and node.else_body is None and _holds(node.cond):
            return node.then_body
        return None

    return map_stmts(stmt, rule)


def _holds(cond, ranges=None):
    """Whether a guard (comparisons joined by &) is true for every value of its loops."""
    if isinstance(cond, Logical) and cond.op == "&":
        return _holds(cond.a, ranges) and _holds(cond.b, ranges)
    if isinstance(cond, Const):
        return bool(cond.value)
    if not isinstance(cond, Compare):
        return False
    a, b = interval(cond.a, ranges), interval(cond.b, ranges)
    if a is None or b is None:
        return False
    return {"<": a[1] < b[0], "<=": a[1] <= b[0], ">": a[0] > b[1], ">=": a[0] >= b[1]}.get(cond.op, False)


def _uses(expr, name):
    return any(var.name == name for var in iter_vars_of(expr))


def _substitute(stmt, name, value):
    """stmt with the loop variable called name replaced by value (a shorter loop's variable, a constant)."""
    def rule(node):
        return value if isinstance(node, IterVar) and node.name == name and node.kind == "loop" else None

    return map_exprs(stmt, lambda expr: transform(expr, rule))
