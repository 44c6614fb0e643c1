"""A bound on the code a kernel unrolls into: LLVM's optimisation time grows faster than the
size of one straight-line body, so a schedule that unrolls hundreds of vector statements (a
guarded 256-step reduction, a 64 x 7 tile of masked rows) could take a minute to build. Past
the budget, unrolled loops are rolled back into counted loops, outermost and largest first, so
the innermost unrolling (the register tile) is the last to go, as far as the instructions each
cost to emit say is needed."""

from __future__ import annotations

from dataclasses import replace

from .ir import Allocate, For, IfThenElse, Seq, Store

# Instructions of unoptimised LLVM IR per kernel, index arithmetic folded (an unrolled tile's
# accesses share their address sums): measured on random points of multi-node graphs and the
# benchmark's searched bests (2-core EPYC, AVX-512). Up to ~6k, modules build in 0.1-1 s; the
# same tiles unrolled to 11-14k instructions took 1-3 s to build and ran up to 2x slower.
MAX_EMITTED_INSTRUCTIONS = 6_000
# A laid-out store is at least a load, an operation and the store: more stores than this cannot
# fit, and need not be emitted to find out.
MAX_EMITTED_STORES = MAX_EMITTED_INSTRUCTIONS // 3
# A module past the budget is rolled until what its last emission measured of each unrolled loop
# says it fits (roll_to_budget), and emitted again. A rolled loop's step costs more than an
# unrolled step (its indices no longer fold), so the prediction can fall short: each further
# attempt aims this much lower, compounded (on a search's own candidates of YOLO C1-C10, the
# re-emitted module came out at 0.86-1.9x its prediction, 1.05x in the median).
ROLL_MARGIN = 0.8


def emitted_copies(stmt):
    """Stores the statement emits once its unrolled loops are laid out (a vector body is one)."""
    if isinstance(stmt, Seq):
        return sum(emitted_copies(part) for part in stmt.stmts)
    if isinstance(stmt, For):
        return emitted_copies(stmt.body) * (stmt.extent if stmt.kind == "unrolled" else 1)
    if isinstance(stmt, Allocate):
        return emitted_copies(stmt.body)
    if isinstance(stmt, IfThenElse):
        return emitted_copies(stmt.then_body) + (emitted_copies(stmt.else_body) if stmt.else_body else 0)
    return 1 if isinstance(stmt, Store) else 0


# What a rolled loop adds each time it is emitted: its counter, bound test, increment and branches.
ROLLED_LOOP_INSTRUCTIONS = 6


def roll_to_budget(stmt, instructions, budget, costs, per_copy):
    """stmt with unrolled loops rolled in roll_largest_unrolled's order until the instructions it
    emits, predicted from an emission of stmt that took `instructions`, are within budget (or
    nothing is left to roll).

    costs: {unrolled loop: [instructions, times emitted]} of the loops that emission laid out
    whole; a loop it did not reach is priced at per_copy instructions a store. Rolling a loop
    emits one step where it emitted all, so it saves all but a step's share of what it cost."""
    while instructions > budget:
        loop = _largest_outermost_unrolled(stmt)
        if loop is None:
            break
        spent, emitted = costs.get(loop, (emitted_copies(loop) * per_copy, 1))
        instructions -= _emissions(stmt, loop) * (spent / emitted * (1 - 1 / loop.extent) - ROLLED_LOOP_INSTRUCTIONS)
        stmt = _replace_loop(stmt, loop, replace(loop, kind="serial"))
    return stmt


def _emissions(stmt, loop):
    """How many times stmt emits loop: the product of the unrolled extents around it."""
    if stmt is loop:
        return 1
    if isinstance(stmt, Seq):
        return sum(_emissions(part, loop) for part in stmt.stmts)
    if isinstance(stmt, For):
        return _emissions(stmt.body, loop) * (stmt.extent if stmt.kind == "unrolled" else 1)
    if isinstance(stmt, Allocate):
        return _emissions(stmt.body, loop)
    if isinstance(stmt, IfThenElse):
        return _emissions(stmt.then_body, loop) + (_emissions(stmt.else_body, loop) if stmt.else_body else 0)
    return 0


def _outermost_unrolled(stmt):
    """The unrolled loops of more than one step not inside another such loop."""
    if isinstance(stmt, For) and stmt.kind == "unrolled" and stmt.extent > 1:
        return [stmt]
    if isinstance(stmt, Seq):
        return [loop for part in stmt.stmts for loop in _outermost_unrolled(part)]
    if isinstance(stmt, (For, Allocate)):
        return _outermost_unrolled(stmt.body)
    if isinstance(stmt, IfThenElse):
        return _outermost_unrolled(stmt.then_body) + (_outermost_unrolled(stmt.else_body) if stmt.else_body else [])
    return []


def roll_to_fit(stmt, copies_allowed):
    """stmt with its largest unrolled loops rolled until it emits at most copies_allowed stores
    (or nothing is left to roll)."""
    while emitted_copies(stmt) > copies_allowed:
        rolled = roll_largest_unrolled(stmt)
        if rolled is None:
            break
        stmt = rolled
    return stmt


def roll_largest_unrolled(stmt):
    """stmt with its largest outermost unrolled loop made serial, or None when nothing unrolls
    more than once."""
    largest = _largest_outermost_unrolled(stmt)
    return None if largest is None else _replace_loop(stmt, largest, replace(largest, kind="serial"))


def _largest_outermost_unrolled(stmt):
    """The outermost unrolled loop that emits the most stores (the next to roll), or None."""
    return max(_outermost_unrolled(stmt), key=emitted_copies, default=None)


def _replace_loop(stmt, old, new):
    """stmt with the loop old replaced by new; untouched parts stay the same objects."""
    if stmt is old:
        return new
    if isinstance(stmt, Seq):
        parts = tuple(_replace_loop(part, old, new) for part in stmt.stmts)
        return stmt if all(a is b for a, b in zip(parts, stmt.stmts)) else replace(stmt, stmts=parts)
    if isinstance(stmt, (For, Allocate)):
        body = _replace_loop(stmt.body, old, new)
        return stmt if body is stmt.body else replace(stmt, body=body)
    if isinstance(stmt, IfThenElse):
        then_body = _replace_loop(stmt.then_body, old, new)
        else_body = None if stmt.else_body is None else _replace_loop(stmt.else_body, old, new)
        if then_body is stmt.then_body and else_body is stmt.else_body:
            return stmt
        return replace(stmt, then_body=then_body, else_body=else_body)
    return stmt
