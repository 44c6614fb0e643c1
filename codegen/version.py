"""Register tiles in two versions: without their bounds tests where the whole tile is in bounds,
with them where it is not.

A tile that runs past an extent (11 rows over 512, 32 lanes over 196 pixels) tests its bounds
inside the reduction: lanes under a mask, rows under a branch, every step of it. On YOLO C11
(AVX-512) such a tile's inner loop carried a mask on every FMA and a clamped address per row,
and an 8-row tile with the masked lanes was split by LLVM into FMAs and blends, its accumulators
spilled. Peeling (codegen.peel) removes the tests from serial loops' full iterations, but not
from a parallel loop's or a short one's. Here a tile is tested once, before it starts: each of
its guards, taken at the worst values of the loops inside the tile, becomes a test of the loops
around it; where they all hold, a copy of the tile without those guards runs. Elsewhere the
guarded tile runs, its reduction steps rolled (it runs seldom; its rows stay unrolled), or
nothing at all where no store of the tile can be in bounds (a tiling that covers 96 columns of 56
leaves whole tiles past the edge).
"""

from __future__ import annotations

from dataclasses import replace

from flexsched.affine import interval, split_terms
from flexsched.expr import Compare, Const, Load, Logical, iter_vars_of, walk

from .ir import Allocate, For, IfThenElse, PrimFunc, Seq, Store, map_stmts, seq, walk_stmts
from .peel import tile_guards

# Loop kinds whose guards split a register tile: the unrolled rows and the vector lanes.
TILE_LOOP_KINDS = ("unrolled", "vectorized")


def version_tiles(func: PrimFunc) -> PrimFunc:
    """func with each guarded register tile run unguarded where the tile is wholly in bounds."""
    return PrimFunc(func.name, func.params, _version(func.body))


def _version(stmt):
    if isinstance(stmt, Seq):
        return seq(*(_version(part) for part in stmt.stmts))
    if isinstance(stmt, For):
        return replace(stmt, body=_version(stmt.body))
    if isinstance(stmt, IfThenElse):
        return replace(stmt, then_body=_version(stmt.then_body),
                       else_body=None if stmt.else_body is None else _version(stmt.else_body))
    if not isinstance(stmt, Allocate):
        return stmt
    if _holds_allocate(stmt.body) and not _accumulates(stmt):   # a packed panel around tiles
        return replace(stmt, body=_version(stmt.body))
    inside = _loops_inside(stmt.body)
    hoisted = {}
    for cond in tile_guards(stmt.body, kinds=TILE_LOOP_KINDS):
        for part in _conjuncts(cond):
            test = _tile_wide(part, inside)
            if test is not None:
                hoisted[_key(part)] = test
    if not hoisted:
        return stmt
    whole = replace(stmt, body=map_stmts(stmt.body, lambda node: _without(node, hoisted)))
    tests = list({str(test): test for test in hoisted.values() if not _always(test)}.values())
    if not tests:
        return whole
    reach = [test for test in _store_tests(stmt.body, inside).values() if not _always(test)]
    partial = _steps_rolled(stmt)
    if reach:   # a tile wholly past the extent stores nothing: skip it
        partial = IfThenElse(_conjunction(reach), partial)
    return IfThenElse(_conjunction(tests), whole, partial)


def _steps_rolled(tile):
    """The tile with its unrolled loops rolled, but for those that index its buffer: its rows and
    lanes keep their accumulators in registers, its reduction steps become loops. A partial tile
    runs seldom; fully unrolled, its copy doubled the code LLVM optimised (YOLO C4's searched bests
    built in 0.91 s against 0.60 s unversioned) for 1-3% of speed."""
    names = set()
    for stmt in walk_stmts(tile.body):
        if isinstance(stmt, Store) and stmt.buffer == tile.buffer:
            names.update(var.name for index in stmt.indices for var in iter_vars_of(index))
        values = (stmt.cond,) if isinstance(stmt, IfThenElse) else \
            (*stmt.indices, stmt.value) if isinstance(stmt, Store) else ()
        for node in (node for value in values for node in walk(value)):
            if isinstance(node, Load) and node.tensor == tile.buffer:
                names.update(var.name for index in node.indices for var in iter_vars_of(index))
    return map_stmts(tile, lambda node: replace(node, kind="serial")
                     if isinstance(node, For) and node.kind == "unrolled" and node.var.name not in names else None)


def _store_tests(stmt, inside, tests=None):
    """{text: test} of the tests of the loops around the tile that every store in stmt needs: a
    guard around a store, at the best values of the loops inside the tile."""
    tests = tests or {}
    if isinstance(stmt, Store):
        return dict(tests)
    if isinstance(stmt, (For, Allocate)):
        return _store_tests(stmt.body, inside, tests)
    if isinstance(stmt, IfThenElse) and stmt.else_body is None:
        guarded = dict(tests)
        for part in _conjuncts(stmt.cond):
            test = _tile_wide(part, inside, best=True)
            if test is not None:
                guarded[str(test)] = test
        return _store_tests(stmt.then_body, inside, guarded)
    parts = stmt.stmts if isinstance(stmt, Seq) else \
        (stmt.then_body, stmt.else_body) if isinstance(stmt, IfThenElse) else ()
    common = None
    for part in parts:
        needed = _store_tests(part, inside, tests)
        if needed is not None:
            common = needed if common is None else {text: common[text] for text in common if text in needed}
    return common


def _accumulates(allocate):
    """Whether allocate's buffer is a tile's accumulator (a store adds to what it loads), not a
    packed copy: a tile holding a copy packed per reduction step is tested once, around its
    reduction, not at each step inside it."""
    return any(isinstance(node, Store) and node.buffer == allocate.buffer
               and any(isinstance(part, Load) and part.tensor == allocate.buffer for part in walk(node.value))
               for node in walk_stmts(allocate.body))


def _holds_allocate(stmt):
    return any(isinstance(node, Allocate) for node in walk_stmts(stmt) if node is not stmt)


def _loops_inside(stmt):
    """{name: extent} of the loops stmt holds."""
    return {node.var.name: node.extent for node in walk_stmts(stmt) if isinstance(node, For)}


def _conjuncts(cond):
    if isinstance(cond, Logical) and cond.op == "&":
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _conjunction(conds):
    whole = conds[0]
    for cond in conds[1:]:
        whole = whole & cond
    return whole


def _tile_wide(cond, inside, best=False):
    """A test of the loops around the tile that holds just where cond holds for every value of
    the loops inside it (for some value, if best) (an affine comparison); None where there is none
    worth making: cond is not affine in the inside loops, or never holds for a whole tile."""
    if not isinstance(cond, Compare) or cond.op not in ("<", "<=", ">", ">="):
        return None
    parts = split_terms(cond.a - cond.b, set(inside))
    if parts is None:
        return None
    inner_terms, outer_terms, constant = parts
    if not inner_terms or not outer_terms:
        return None   # no inside loop, or nothing outside to test it by (proven or never whole)
    span = [0, 0]
    for coefficient, term in inner_terms:
        bounds = interval(term)
        if bounds is None:
            return None
        low, high = sorted((coefficient * bounds[0], coefficient * bounds[1]))
        span[0] += low
        span[1] += high
    # a - b = inner + outer + constant; "<" and "<=" must hold at the inner part's largest value,
    # ">" and ">=" at its smallest.
    worst = span[1] if (cond.op in ("<", "<=")) != best else span[0]
    outer = None
    for coefficient, term in outer_terms:
        scaled = term if coefficient == 1 else term * coefficient
        outer = scaled if outer is None else outer + scaled
    test = Compare(cond.op, outer, Const(-(constant + worst), outer.dtype))
    bounds = interval(test.a)
    if bounds is not None and not _possible(test.op, bounds, test.b.value):
        return None   # no tile is ever whole along it: one version is enough
    return test


def _key(cond):
    """A guard's identity across the tile's copies of it: its text and its loops' extents."""
    return str(cond), tuple(sorted((var.name, var.extent) for var in iter_vars_of(cond)))


def _always(test):
    """Whether a tile-wide test holds for every value of the loops around the tile."""
    bounds = interval(test.a)
    return bounds is not None and not _possible(_NEGATION[test.op], bounds, test.b.value)


_NEGATION = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def _possible(op, bounds, value):
    low, high = bounds
    return {"<": low < value, "<=": low <= value, ">": high > value, ">=": high >= value}[op]


def _without(node, hoisted):
    """A guard with the conjuncts the tile-wide test covers dropped (its body where none is left)."""
    if not isinstance(node, IfThenElse) or node.else_body is not None:
        return None
    kept = [part for part in _conjuncts(node.cond) if _key(part) not in hoisted]
    if len(kept) == len(_conjuncts(node.cond)):
        return None
    return node.then_body if not kept else replace(node, cond=_conjunction(kept))
