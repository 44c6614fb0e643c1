"""Expressions evaluated for every active lane at once, with C's evaluation of conditionals.

An expression compiles to a function of the Lanes giving a scalar where every lane agrees and
an array of one value per lane otherwise. A select's side that reads memory runs only on the
lanes that take it, and so does the right side of & / | where the left decides (C's ?:, && and
||): padding such as select(h >= 1, I[h - 1], 0) never reads out of bounds. (Sides that read no
memory cannot fault, and run on every lane.) Arithmetic is the DSL's own (flexsched.numpy_expr):
integers as int64 where a loop variable is involved, floats pinned to their dtype.

A pure part of an expression (no loads) is recomputed only when its loop variables change:
index arithmetic of block and thread ids, guards and padding conditions are mostly invariant in
the loops inside a thread, and computing them again per iteration dominated the run time.
"""

from __future__ import annotations

import numpy as np

from flexsched import dtypes
from flexsched.expr import (Binary, Call, Cast, Compare, Const, Intrinsic, IterVar, Load, Logical, Select, children,
                            format_expr)
# The DSL's operator tables, so the interpreter and the reference evaluator agree by construction.
from flexsched.numpy_expr import ARITH, COMPARE, INTRINSICS, MATH, as_float

from .lanes import InterpretError, element_keys, splitter, storage_lookup, touch


def compile_expr(expr):
    """expr as a function of the active lanes."""
    facts = {}

    def compile_part(part, parent):
        run = _compile_node(part, lambda child: compile_part(child, part), lambda child: _facts(child, facts)[0])
        pure, variables = _facts(part, facts)
        # Memoise the largest pure parts for each set of variables (a parent using the same
        # variables would miss whenever its child does).
        if pure and children(part) and (parent is None or _facts(parent, facts) != (True, variables)):
            return _memoised(run, variables)
        return run

    return compile_part(expr, None)


def _facts(expr, facts):
    """(whether expr reads no memory, ids of the loop variables it uses), memoised in facts."""
    known = facts.get(id(expr))
    if known is None:
        if isinstance(expr, IterVar):
            known = (True, (id(expr),))
        elif isinstance(expr, Load):
            known = (False, ())
        else:
            parts = [_facts(child, facts) for child in children(expr)]
            variables = tuple(dict.fromkeys(var for _, used in parts for var in used))
            known = (all(pure for pure, _ in parts), variables)
        facts[id(expr)] = known
    return known


def _memoised(run, variables):
    """run, recomputed only for values of the variables it has not seen lately (loop values and
    lane arrays are stable objects, keyed by identity; the cache holds them, so no id is reused)."""
    seen = {}

    def memoised(lanes):
        env = lanes.vars
        values = tuple(env.get(key) for key in variables)
        key = tuple(map(id, values))
        known = seen.get(key)
        if known is not None and all(a is b for a, b in zip(values, known[0])):
            return known[1]
        result = run(lanes)
        if len(seen) >= 8:
            seen.clear()
        seen[key] = (values, result)
        return result
    return memoised


def _compile_node(expr, compile_child, is_pure):
    """One node as a function of the lanes, its children compiled by compile_child."""
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
    parts = [compile_child(child) for child in children(expr)]
    if isinstance(expr, Load):
        return _compile_load(expr, parts)
    if isinstance(expr, Binary):
        return _elementwise(ARITH[expr.op], expr.dtype, parts)
    if isinstance(expr, Compare):
        return _elementwise(COMPARE[expr.op], expr.dtype, parts)
    if isinstance(expr, Call):
        return _elementwise(MATH[expr.func], expr.dtype, parts)
    if isinstance(expr, Intrinsic):
        return _elementwise(INTRINSICS[expr.func], expr.dtype, parts)
    if isinstance(expr, Cast):
        (value,), dtype = parts, np.dtype(expr.dtype)
        return lambda lanes: np.asarray(value(lanes)).astype(dtype)[()]
    # A side that reads no memory cannot fault: computing it on every lane is cheaper than
    # splitting the lanes (and keeps the memoised parts it uses valid).
    if isinstance(expr, Logical):
        if expr.op != "~" and is_pure(expr.b):
            return _elementwise(np.logical_and if expr.op == "&" else np.logical_or, expr.dtype, parts)
        return _compile_logical(expr.op, parts)
    if isinstance(expr, Select):
        if is_pure(expr.true_value) and is_pure(expr.false_value):
            return _where(expr.dtype, parts)
        return _compile_select(expr.dtype, parts)
    raise InterpretError(f"cannot interpret expression {type(expr).__name__} '{format_expr(expr)}'")


def _elementwise(func, dtype, args):
    pin = dtypes.is_float(dtype)  # float32 op int64 would widen in numpy
    if len(args) == 1:
        (a,) = args
        return (lambda lanes: as_float(func(a(lanes)), dtype)) if pin else (lambda lanes: func(a(lanes)))
    a, b = args
    return (lambda lanes: as_float(func(a(lanes), b(lanes)), dtype)) if pin else \
        (lambda lanes: func(a(lanes), b(lanes)))


def _where(dtype, parts):
    cond, when_true, when_false = parts

    def where(lanes):
        taken = cond(lanes)
        if np.ndim(taken) == 0:
            return when_true(lanes) if taken else when_false(lanes)
        return as_float(np.where(taken, when_true(lanes), when_false(lanes)), dtype)
    return where


def _compile_load(expr, indices):
    lookup = storage_lookup(expr.tensor)

    def load(lanes):
        storage = lookup(lanes)
        keys = element_keys(storage, lanes, [index(lanes) for index in indices], "load from")
        touch(storage, lanes, keys, writes=False)
        return storage.data[keys]
    return load


def _compile_logical(op, parts):
    if op == "~":
        (a,) = parts
        return lambda lanes: np.logical_not(a(lanes))
    a, b = parts
    is_and = op == "&"
    split = splitter()

    def logical(lanes):
        left = a(lanes)
        if np.ndim(left) == 0:
            return b(lanes) if bool(left) == is_and else left
        holds, fails = split(left)
        undecided = holds if is_and else fails
        if len(undecided) == 0:
            return left
        if len(undecided) == lanes.n:
            return lanes.per_lane(b(lanes)).astype(bool)
        result = left.copy()
        result[undecided] = b(lanes.subset(undecided))
        return result
    return logical


def _compile_select(dtype, parts):
    cond, when_true, when_false = parts
    split = splitter()

    def select(lanes):
        taken = cond(lanes)
        if np.ndim(taken) == 0:
            return when_true(lanes) if taken else when_false(lanes)
        true_lanes, false_lanes = split(taken)
        if len(false_lanes) == 0:
            return when_true(lanes)
        if len(true_lanes) == 0:
            return when_false(lanes)
        true_value = when_true(lanes.subset(true_lanes))
        false_value = when_false(lanes.subset(false_lanes))
        result = np.empty(lanes.n, dtype=np.result_type(true_value, false_value))
        result[true_lanes] = true_value
        result[false_lanes] = false_value
        return as_float(result, dtype)
    return select
