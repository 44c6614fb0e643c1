"""Evaluate a scalar expression over whole numpy arrays of loop-variable values at once.

The operator tables are the semantics every numpy evaluator shares (this one, the reference and
the loop-IR interpreter's lane expressions)."""

import numpy as np

from . import dtypes
from .expr import Binary, Call, Cast, Compare, Const, Intrinsic, IterVar, Load, Logical, Reduce, Select

ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
          "//": np.floor_divide, "%": np.mod, "max": np.maximum, "min": np.minimum}
COMPARE = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
            "==": np.equal, "!=": np.not_equal}
MATH = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "abs": np.abs, "tanh": np.tanh}


def _truncated_quotient(a, b):
    """C's a / b on integers: the floor quotient moved toward zero where the signs differ."""
    quotient = np.floor_divide(a, b)
    return quotient + ((np.mod(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0)))


INTRINSICS = {"tdiv": _truncated_quotient, "tmod": lambda a, b: a - b * _truncated_quotient(a, b),
               "floor": np.floor, "fmod": np.fmod}


def eval_expr(expr, env, load):
    """expr's value broadcast over the loop variables' arrays.

    env maps id(IterVar) to an integer array; load(Load, index_arrays) returns the loaded
    values. Integers stay 64-bit so index arithmetic cannot overflow; floats keep their dtype.
    """
    def ev(node):
        if isinstance(node, IterVar):
            return env[id(node)]
        if isinstance(node, Const):
            return np.asarray(node.value, dtype=node.dtype)
        if isinstance(node, Load):
            return load(node, [ev(index) for index in node.indices])
        if isinstance(node, Binary):
            return as_float(ARITH[node.op](ev(node.a), ev(node.b)), node.dtype)
        if isinstance(node, Compare):
            return COMPARE[node.op](ev(node.a), ev(node.b))
        if isinstance(node, Logical):
            if node.op == "~":
                return np.logical_not(ev(node.a))
            combine = np.logical_and if node.op == "&" else np.logical_or
            return combine(ev(node.a), ev(node.b))
        if isinstance(node, Select):
            return as_float(np.where(ev(node.cond), ev(node.true_value), ev(node.false_value)), node.dtype)
        if isinstance(node, Call):
            return as_float(MATH[node.func](ev(node.arg)), node.dtype)
        if isinstance(node, Cast):
            return np.asarray(ev(node.value)).astype(node.dtype)
        if isinstance(node, Intrinsic):
            return as_float(INTRINSICS[node.func](*(ev(arg) for arg in node.args)), node.dtype)
        if isinstance(node, Reduce):
            raise ValueError("a Reduce is evaluated by the tensor evaluator, not inside an expression")
        raise TypeError(f"not an expression: {node!r}")

    return ev(expr)


def as_float(value, dtype):
    """Pin float results to the expression's dtype (numpy would widen float32 with int64)."""
    return value.astype(dtype, copy=False) if dtypes.is_float(dtype) else value


def axis_arrays(variables, ndim=None):
    """env for `variables`: each an arange along its own axis of an ndim-dimensional grid."""
    ndim = len(variables) if ndim is None else ndim
    env = {}
    for position, var in enumerate(variables):
        shape = [1] * ndim
        shape[position] = var.extent
        env[id(var)] = np.arange(var.extent, dtype=np.int64).reshape(shape)
    return env
