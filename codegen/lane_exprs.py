"""Expressions evaluated for every active lane at once, with C's evaluation of conditionals.

An expression compiles to a function of the Lanes giving a scalar where every lane agrees and
an array of one value per lane otherwise. Select runs each side only on the lanes that take it
and & / | run their right side only where the left does not decide (C's ?:, && and ||), so
padding such as select(h >= 1, I[h - 1], 0) never reads out of bounds. Arithmetic is the DSL's
own (flexsched.numpy_expr): integers as int64 where a loop variable is involved, floats pinned
to their dtype.
"""

from __future__ import annotations

import numpy as np

from flexsched import dtypes
from flexsched.expr import Binary, Call, Cast, Compare, Const, Intrinsic, IterVar, Load, Logical, Select, format_expr
# The DSL's operator tables, so the interpreter and the reference evaluator agree by construction.
from flexsched.numpy_expr import _ARITH, _COMPARE, _INTRINSICS, _MATH, _as_float

from .lanes import InterpretError, element_keys, split, storage_lookup, touch


def compile_expr(expr):
    """expr as a function of the active lanes."""
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
    if isinstance(expr, Load):
        return _compile_load(expr)
    if isinstance(expr, Binary):
        return _elementwise(_ARITH[expr.op], expr.dtype, expr.a, expr.b)
    if isinstance(expr, Compare):
        return _elementwise(_COMPARE[expr.op], expr.dtype, expr.a, expr.b)
    if isinstance(expr, Call):
        return _elementwise(_MATH[expr.func], expr.dtype, expr.arg)
    if isinstance(expr, Intrinsic):
        return _elementwise(_INTRINSICS[expr.func], expr.dtype, *expr.args)
    if isinstance(expr, Cast):
        value, dtype = compile_expr(expr.value), np.dtype(expr.dtype)
        return lambda lanes: np.asarray(value(lanes)).astype(dtype)[()]
    if isinstance(expr, Logical):
        return _compile_logical(expr)
    if isinstance(expr, Select):
        return _compile_select(expr)
    raise InterpretError(f"cannot interpret expression {type(expr).__name__} '{format_expr(expr)}'")


def _elementwise(func, dtype, *operands):
    args = [compile_expr(operand) for operand in operands]
    pin = dtypes.is_float(dtype)  # float32 op int64 would widen in numpy
    if len(args) == 1:
        (a,) = args
        return (lambda lanes: _as_float(func(a(lanes)), dtype)) if pin else (lambda lanes: func(a(lanes)))
    a, b = args
    return (lambda lanes: _as_float(func(a(lanes), b(lanes)), dtype)) if pin else \
        (lambda lanes: func(a(lanes), b(lanes)))


def _compile_load(expr):
    indices = [compile_expr(index) for index in expr.indices]
    lookup = storage_lookup(expr.tensor)

    def load(lanes):
        storage = lookup(lanes)
        keys = element_keys(storage, lanes, [index(lanes) for index in indices], "load from")
        touch(storage, lanes, keys, writes=False)
        return storage.data[keys]
    return load


def _compile_logical(expr):
    a = compile_expr(expr.a)
    if expr.op == "~":
        return lambda lanes: np.logical_not(a(lanes))
    b = compile_expr(expr.b)
    is_and = expr.op == "&"

    def logical(lanes):
        left = a(lanes)
        if np.ndim(left) == 0:
            return b(lanes) if bool(left) == is_and else left
        undecided = np.flatnonzero(left if is_and else ~left)
        if len(undecided) == 0:
            return left
        if len(undecided) == lanes.n:
            return lanes.per_lane(b(lanes)).astype(bool)
        result = left.copy()
        result[undecided] = b(lanes.subset(undecided))
        return result
    return logical


def _compile_select(expr):
    cond, when_true, when_false = (compile_expr(part) for part in (expr.cond, expr.true_value, expr.false_value))
    dtype = expr.dtype

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
        return _as_float(result, dtype)
    return select
