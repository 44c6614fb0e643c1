"""Integer index arithmetic, in one place: affine forms, strides, additive splits and intervals.

The analyzer reads access coefficients, lowering infers the regions a loop touches, the back
ends prove contiguity and alignment, and legalisation proves indices non-negative; all of them
ask these questions of the same expression trees (loop variables, constants, + - *, and // or %
by constants, as the DSL allows in indices).
"""

from __future__ import annotations

from .expr import Binary, Cast, Const, Intrinsic, IterVar, Select, iter_vars_of

_INTEGER = ("int32", "int64")


def _int_const(expr):
    """The value of an integer constant, else None."""
    if isinstance(expr, Const) and type(expr.value) is int:
        return expr.value
    return None


def affine_form(expr):
    """({loop name: coefficient}, offset) of an index, or None when it uses // or %, a load or a
    product of two loops."""
    if isinstance(expr, IterVar):
        return {expr.name: 1}, 0
    if isinstance(expr, Const):
        return ({}, int(expr.value)) if _int_const(expr) is not None else None
    if isinstance(expr, Cast) and expr.dtype in _INTEGER and expr.value.dtype in _INTEGER:
        return affine_form(expr.value)
    if not isinstance(expr, Binary) or expr.op not in ("+", "-", "*"):
        return None
    left, right = affine_form(expr.a), affine_form(expr.b)
    if left is None or right is None:
        return None
    (a_coef, a_off), (b_coef, b_off) = left, right
    if expr.op in ("+", "-"):
        sign = 1 if expr.op == "+" else -1
        coef = dict(a_coef)
        for name, value in b_coef.items():
            coef[name] = coef.get(name, 0) + sign * value
        return {k: v for k, v in coef.items() if v}, a_off + sign * b_off
    if a_coef and b_coef:
        return None
    scale, (coef, off) = (a_off, right) if not a_coef else (b_off, left)
    return {k: v * scale for k, v in coef.items() if v * scale}, off * scale


def stride(expr, var):
    """How far expr moves per step of var (compared by identity): 0 when it does not use var,
    None when the step is not one constant (var under // or %, a load, a product of loops)."""
    if not any(node is var for node in iter_vars_of(expr)):
        return 0
    if expr is var:
        return 1
    if isinstance(expr, Cast) and expr.dtype in _INTEGER and expr.value.dtype in _INTEGER:
        return stride(expr.value, var)
    if not (isinstance(expr, Binary) and expr.dtype in _INTEGER):
        return None
    if expr.op in ("+", "-"):
        a, b = stride(expr.a, var), stride(expr.b, var)
        if a is None or b is None:
            return None
        return a + b if expr.op == "+" else a - b
    if expr.op == "*":
        for factor, other in ((expr.a, expr.b), (expr.b, expr.a)):
            value = _int_const(factor)
            if value is not None:
                step = stride(other, var)
                return None if step is None else value * step
    return None


def split_terms(expr, inner):
    """expr as inner part + outer part + constant, split at its top-level sums and constant
    products: (inner terms, outer terms, constant), each term a (coefficient, sub-expression)
    pair, an inner term using only loops named in `inner`, an outer one none of them. None when
    a term mixes both (say (i_inner + j_outer) // 2)."""
    inner_terms, outer_terms = [], []

    def visit(node, scale):
        names = {v.name for v in iter_vars_of(node)}
        if not names & inner:
            value = _int_const(node)
            if value is not None:
                return value * scale
            outer_terms.append((scale, node))
            return 0
        if names <= inner and not (isinstance(node, Binary) and node.op in ("+", "-", "*")):
            inner_terms.append((scale, node))
            return 0
        if isinstance(node, Binary) and node.op in ("+", "-"):
            constant = visit(node.a, scale)
            if constant is None:
                return None
            rest = visit(node.b, scale if node.op == "+" else -scale)
            return None if rest is None else constant + rest
        if isinstance(node, Binary) and node.op == "*":
            for factor, other in ((node.a, node.b), (node.b, node.a)):
                value = _int_const(factor)
                if value is not None:
                    return visit(other, scale * value)
        if names <= inner:
            inner_terms.append((scale, node))
            return 0
        return None

    constant = visit(expr, 1)
    return None if constant is None else (inner_terms, outer_terms, constant)


def interval(expr, ranges=None):
    """A sound (min, max) of an integer expression over its loops' values, by interval
    arithmetic; ranges maps a loop name to (min, max), a loop not in it ranging over
    0..extent-1. None where the expression holds something without known bounds (a load).
    Legalised indices (truncating tdiv / tmod by a positive constant) are bounded too."""
    ranges = ranges or {}

    def go(node):
        if isinstance(node, IterVar):
            return ranges.get(node.name, (0, node.extent - 1))
        value = _int_const(node)
        if value is not None:
            return value, value
        if isinstance(node, Cast) and node.dtype in _INTEGER and node.value.dtype in _INTEGER:
            return go(node.value)
        if isinstance(node, Select):
            a, b = go(node.true_value), go(node.false_value)
            return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
        if isinstance(node, Intrinsic) and node.func in ("tdiv", "tmod") and node.dtype in _INTEGER:
            a, b = go(node.args[0]), go(node.args[1])
            return None if a is None or b is None else _truncating_interval(node.func, a, b)
        if not isinstance(node, Binary) or node.dtype not in _INTEGER:
            return None
        a, b = go(node.a), go(node.b)
        if a is None or b is None:
            return None
        return _binary_interval(node.op, a, b)

    return go(expr)


def _binary_interval(op, a, b):
    (a_low, a_high), (b_low, b_high) = a, b
    if op == "+":
        return a_low + b_low, a_high + b_high
    if op == "-":
        return a_low - b_high, a_high - b_low
    if op == "*":
        corners = [a_low * b_low, a_low * b_high, a_high * b_low, a_high * b_high]
        return min(corners), max(corners)
    if op in ("max", "min"):
        pick = max if op == "max" else min
        return pick(a_low, b_low), pick(a_high, b_high)
    if b_low != b_high or b_low <= 0:  # only division by a positive constant is bounded here
        return None
    divisor = b_low
    if op == "//":
        return a_low // divisor, a_high // divisor
    if op == "%":
        return (a_low, a_high) if 0 <= a_low and a_high < divisor else (0, divisor - 1)
    return None


def simplify(expr):
    """An integer index with like terms collected: x * 2 + k - x * 2 becomes k, so a register
    tile's index is a constant once its loops are unrolled (sub-expressions under // and % are
    simplified in place)."""
    if not (isinstance(expr, Binary) and expr.dtype in _INTEGER):
        return expr
    if expr.op not in ("+", "-", "*"):
        simpler = Binary(expr.op, simplify(expr.a), simplify(expr.b), expr.dtype)
        return _fold(simpler)
    terms = {}
    constant = _collect(expr, 1, terms)
    if constant is None:
        return expr
    result = None
    for key, (coefficient, atom) in terms.items():
        if coefficient == 0:
            continue
        term = atom if coefficient == 1 else Binary("*", atom, Const(coefficient, expr.dtype), expr.dtype)
        result = term if result is None else Binary("+", result, term, expr.dtype)
    if result is None:
        return Const(constant, expr.dtype)
    if constant:
        result = Binary("+", result, Const(constant, expr.dtype), expr.dtype)
    return result


def _collect(node, scale, terms):
    """Adds scale * node's terms to terms ({text: [coefficient, atom]}); returns the constant
    part, or None when a product of two non-constants stops the collection."""
    value = _int_const(node)
    if value is not None:
        return value * scale
    if isinstance(node, Binary) and node.op in ("+", "-"):
        left = _collect(node.a, scale, terms)
        right = _collect(node.b, scale if node.op == "+" else -scale, terms)
        return None if left is None or right is None else left + right
    if isinstance(node, Binary) and node.op == "*":
        for factor, other in ((node.a, node.b), (node.b, node.a)):
            factor_value = _int_const(factor)
            if factor_value is not None:
                return _collect(other, scale * factor_value, terms)
    atom = simplify(node) if isinstance(node, Binary) else node
    if isinstance(atom, Const):
        return atom.value * scale
    key = str(atom)
    entry = terms.setdefault(key, [0, atom])
    entry[0] += scale
    return 0


def _fold(node):
    """A // or % of two integer constants, evaluated (floor semantics, as the DSL's)."""
    a, b = _int_const(node.a), _int_const(node.b)
    if a is None or b is None or b == 0 or node.op not in ("//", "%"):
        return node
    return Const(a // b if node.op == "//" else a % b, node.dtype)


def _truncating_interval(func, a, b):
    """C's a / b or a % b (toward zero) by a positive constant; None for other divisors."""
    (a_low, a_high), (b_low, b_high) = a, b
    if b_low != b_high or b_low <= 0:
        return None
    divisor = b_low
    if func == "tdiv":  # truncation is monotone in the dividend
        return _truncate(a_low, divisor), _truncate(a_high, divisor)
    if -divisor < a_low and a_high < divisor:
        return a_low, a_high
    return (0 if a_low >= 0 else -(divisor - 1)), (0 if a_high <= 0 else divisor - 1)


def _truncate(value, divisor):
    return value // divisor if value >= 0 else -(-value // divisor)


def monotone_span(expr, inner):
    """(origin, count) of an index as the loops named in `inner` run over their ranges, when the
    index never decreases as one of them grows: origin is the index with those loops at 0 (an
    expression of the other loops), count bounds its distinct values. Sums, products by a
    non-negative constant and floor division by a positive one qualify: (o + i) // c over
    i < n spans at most (n - 1) // c + 2 values. None for anything else (%, a subtracted inner
    loop, a load)."""
    if not {v.name for v in iter_vars_of(expr)} & inner:
        return expr, 1
    if isinstance(expr, IterVar):
        return Const(0, expr.dtype if expr.dtype in _INTEGER else "int64"), expr.extent
    if isinstance(expr, Cast) and expr.dtype in _INTEGER and expr.value.dtype in _INTEGER:
        return monotone_span(expr.value, inner)
    if not (isinstance(expr, Binary) and expr.dtype in _INTEGER):
        return None
    if expr.op == "+":
        left, right = monotone_span(expr.a, inner), monotone_span(expr.b, inner)
        if left is None or right is None:
            return None
        return left[0] + right[0], left[1] + right[1] - 1
    if expr.op == "-" and not {v.name for v in iter_vars_of(expr.b)} & inner:
        left = monotone_span(expr.a, inner)
        return None if left is None else (left[0] - expr.b, left[1])
    if expr.op == "*":
        for factor, other in ((expr.a, expr.b), (expr.b, expr.a)):
            scale = _int_const(factor)
            if scale is not None and scale >= 0:
                part = monotone_span(other, inner)
                return None if part is None else (part[0] * scale, (part[1] - 1) * scale + 1)
        return None
    divisor = _int_const(expr.b)
    if expr.op == "//" and divisor is not None and divisor > 0:
        part = monotone_span(expr.a, inner)
        return None if part is None else (part[0] // divisor, min(part[1], (part[1] - 1) // divisor + 2))
    return None
