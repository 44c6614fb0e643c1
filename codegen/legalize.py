"""Legalisation: the DSL's numpy semantics restated with operations every back end has.

The DSL's `//` and `%` floor (numpy: the result takes the divisor's sign, x // 0 == x % 0 == 0,
INT_MIN // -1 wraps) and its max/min let NaN through; LLVM and C truncate, trap on a zero
divisor or INT_MIN / -1, and C's fmax ignores NaN. This pass rewrites those operations once,
into truncating division (Intrinsic tdiv / tmod, whose divisor it keeps away from 0 and -1),
floor, fmod, comparisons and selects, so the LLVM, CUDA and HLS back ends print what they get
and agree with each other and with the reference evaluator.
"""

from __future__ import annotations

from flexsched import dtypes
from flexsched.affine import interval
from flexsched.expr import Binary, Compare, Const, Intrinsic, Logical, Select, transform

from .ir import PrimFunc, map_exprs


def legalize(func: PrimFunc) -> PrimFunc:
    """func with floor division, modulo and NaN-propagating max/min spelt out."""
    return PrimFunc(func.name, func.params, map_exprs(func.body, legalize_expr))


def legalize_expr(expr):
    """One expression, legalised bottom-up."""
    return transform(expr, _rule)


def _rule(node):
    if not isinstance(node, Binary):
        return None
    if node.op in ("//", "%"):
        return _int_divmod(node) if dtypes.is_int(node.dtype) else _float_divmod(node)
    if node.op in ("max", "min"):
        return _extreme(node)
    return None


def _const(value, dtype):
    return Const(value, dtype)


def _sub(a, b):
    return Binary("-", a, b, a.dtype)


def _add(a, b):
    return Binary("+", a, b, a.dtype)


def _int_divmod(node):
    """Python's a // b or a % b from C's truncating division."""
    a, b, dtype = node.a, node.b, node.dtype
    divisor = b.value if isinstance(b, Const) else None
    if divisor is not None and divisor > 0:
        bounds = interval(a)
        truncated = Intrinsic("tdiv" if node.op == "//" else "tmod", (a, b), dtype)
        if bounds is not None and bounds[0] >= 0:  # most indices: truncation is flooring
            return truncated
        return _floor_adjust(node.op, a, b, dtype)
    if divisor is not None and divisor not in (0, -1):
        return _floor_adjust(node.op, a, b, dtype)
    # A divisor that may be 0 or -1: numpy gives x // 0 == x % 0 == 0, x // -1 == -x, x % -1 == 0.
    zero, one, minus_one = _const(0, dtype), _const(1, dtype), _const(-1, dtype)
    by_zero, by_minus_one = Compare("==", b, zero), Compare("==", b, minus_one)
    safe = Select(Logical("|", by_zero, by_minus_one), one, b, dtype)
    result = _floor_adjust(node.op, a, safe, dtype)
    if node.op == "//":
        return Select(by_zero, zero, Select(by_minus_one, _sub(zero, a), result, dtype), dtype)
    return Select(Logical("|", by_zero, by_minus_one), zero, result, dtype)


def _floor_adjust(op, a, b, dtype):
    """Floor quotient or remainder: the truncated one, moved by one divisor where the remainder
    is non-zero and its sign differs from the divisor's."""
    zero = _const(0, dtype)
    remainder = Intrinsic("tmod", (a, b), dtype)
    adjust = Logical("&", Compare("!=", remainder, zero),
                     Compare("!=", Compare("<", remainder, zero), Compare("<", b, zero)))
    if op == "%":
        return Select(adjust, _add(remainder, b), remainder, dtype)
    quotient = Intrinsic("tdiv", (a, b), dtype)
    return Select(adjust, _sub(quotient, _const(1, dtype)), quotient, dtype)


def _float_divmod(node):
    a, b, dtype = node.a, node.b, node.dtype
    if node.op == "//":
        return Intrinsic("floor", (Binary("/", a, b, dtype),), dtype)
    zero = _const(0.0, dtype)
    remainder = Intrinsic("fmod", (a, b), dtype)
    adjust = Logical("&", Compare("!=", remainder, zero),
                     Compare("!=", Compare("<", remainder, zero), Compare("<", b, zero)))
    return Select(adjust, _add(remainder, b), remainder, dtype)


def _extreme(node):
    """numpy's maximum / minimum: the larger / smaller, NaN when either is NaN."""
    a, b, dtype = node.a, node.b, node.dtype
    picked = Select(Compare(">" if node.op == "max" else "<", a, b), a, b, dtype)  # a NaN b lands here
    if dtypes.is_int(dtype):
        return picked
    return Select(Compare("!=", a, a), a, picked, dtype)
