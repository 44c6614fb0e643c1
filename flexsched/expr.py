"""The scalar expression tree of the tensor-expression DSL.

Every node is a frozen value. Python operators build nodes (`A[i, k] * B[k, j]`,
`i >= 1`, `cond & other`), so a definition reads like the math it states. Expressions
have no truth value: `if`, `and` and `or` on them raise, use `select`, `&`, `|`, `~`.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dtypes
from .errors import DefinitionError

ARITH_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod",
             "max": "max", "min": "min"}
COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")
LOGICAL_OPS = ("&", "|")
MATH_FUNCS = ("exp", "log", "sqrt", "abs", "tanh")
COMBINERS = ("sum", "max", "min")
# Operations with C's semantics, written by code generation's legalisation (never by the DSL):
# tdiv / tmod truncate toward zero (their divisor is neither 0 nor -1), floor and fmod as in C.
INTRINSICS = ("tdiv", "tmod", "floor", "fmod")


class Expr:
    """Base of all scalar expressions; subclasses are frozen dataclasses."""

    __slots__ = ()
    dtype: str

    # Arithmetic.
    def __add__(self, other): return binary("+", self, other)
    def __radd__(self, other): return binary("+", other, self)
    def __sub__(self, other): return binary("-", self, other)
    def __rsub__(self, other): return binary("-", other, self)
    def __mul__(self, other): return binary("*", self, other)
    def __rmul__(self, other): return binary("*", other, self)
    def __truediv__(self, other): return binary("/", self, other)
    def __rtruediv__(self, other): return binary("/", other, self)
    def __floordiv__(self, other): return binary("//", self, other)
    def __rfloordiv__(self, other): return binary("//", other, self)
    def __mod__(self, other): return binary("%", self, other)
    def __rmod__(self, other): return binary("%", other, self)
    def __neg__(self): return binary("-", as_expr(0, self.dtype), self)
    def __pos__(self): return self

    # Comparisons build expressions; hashing stays by identity.
    def __lt__(self, other): return compare("<", self, other)
    def __le__(self, other): return compare("<=", self, other)
    def __gt__(self, other): return compare(">", self, other)
    def __ge__(self, other): return compare(">=", self, other)
    def __eq__(self, other): return compare("==", self, other)  # type: ignore[override]
    def __ne__(self, other): return compare("!=", self, other)  # type: ignore[override]
    __hash__ = object.__hash__

    # Logic on boolean expressions.
    def __and__(self, other): return logical("&", self, other)
    def __rand__(self, other): return logical("&", other, self)
    def __or__(self, other): return logical("|", self, other)
    def __ror__(self, other): return logical("|", other, self)
    def __invert__(self): return logical_not(self)

    def __bool__(self):
        raise DefinitionError(
            f"expression '{self}' has no truth value: use select(), &, | and ~ instead of if/and/or/not")

    def astype(self, dtype):
        """This expression converted to another dtype."""
        return cast(dtype, self)

    def __str__(self):
        return format_expr(self)

    def __repr__(self):
        return f"<{type(self).__name__} {format_expr(self)}>"


@dataclass(frozen=True, eq=False, repr=False)
class IterVar(Expr):
    """A loop variable: a spatial axis of a compute, or a reduce axis."""

    name: str
    extent: int
    kind: str  # "spatial" or "reduce"
    dtype: str = "int32"


@dataclass(frozen=True, eq=False, repr=False)
class Const(Expr):
    value: int | float | bool
    dtype: str


@dataclass(frozen=True, eq=False, repr=False)
class Load(Expr):
    """An element of a tensor: tensor[indices]."""

    tensor: object  # flexsched.tensor.Tensor (kept untyped to avoid an import cycle)
    indices: tuple
    dtype: str


@dataclass(frozen=True, eq=False, repr=False)
class Binary(Expr):
    op: str  # a key of ARITH_OPS
    a: Expr
    b: Expr
    dtype: str


@dataclass(frozen=True, eq=False, repr=False)
class Compare(Expr):
    op: str  # one of COMPARE_OPS
    a: Expr
    b: Expr
    dtype: str = dtypes.BOOL


@dataclass(frozen=True, eq=False, repr=False)
class Logical(Expr):
    op: str  # "&", "|" or "~" (then b is None)
    a: Expr
    b: Expr | None
    dtype: str = dtypes.BOOL


@dataclass(frozen=True, eq=False, repr=False)
class Select(Expr):
    cond: Expr
    true_value: Expr
    false_value: Expr
    dtype: str


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    """An elementwise math function of one argument."""

    func: str  # one of MATH_FUNCS
    arg: Expr
    dtype: str


@dataclass(frozen=True, eq=False, repr=False)
class Cast(Expr):
    value: Expr
    dtype: str


@dataclass(frozen=True, eq=False, repr=False)
class Intrinsic(Expr):
    """A primitive with C semantics (see INTRINSICS) that every back end emits as it stands."""

    func: str
    args: tuple
    dtype: str


@dataclass(frozen=True, eq=False, repr=False)
class Reduce(Expr):
    """A reduction of `source` over `axes` with `combiner`; only the whole body of a compute."""

    combiner: str  # one of COMBINERS
    source: Expr
    axes: tuple
    dtype: str


# ---------------------------------------------------------------- construction

def as_expr(value, like_dtype=None):
    """Wrap a Python scalar as a Const, taking like_dtype where it fits (weak typing)."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return Const(value, dtypes.BOOL)
    if isinstance(value, int):
        dtype = like_dtype if like_dtype in dtypes.TENSOR_DTYPES else "int32"
        if dtype == "int32" and not -2**31 <= value < 2**31:
            dtype = "int64"
        return Const(value, dtype)
    if isinstance(value, float):
        dtype = like_dtype if dtypes.is_float(like_dtype) else "float32"
        return Const(value, dtype)
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return as_expr(value.item(), like_dtype)  # numpy scalars
    raise DefinitionError(f"cannot use {type(value).__name__} value {value!r} in an expression")


def _operands(a, b):
    """Both operands as Exprs, a Python scalar taking the dtype of the other side."""
    if isinstance(a, Expr):
        return a, as_expr(b, a.dtype)
    b = as_expr(b)
    return as_expr(a, b.dtype), b


def binary(op, a, b):
    a, b = _operands(a, b)
    for side in (a, b):
        if side.dtype == dtypes.BOOL:
            raise DefinitionError(f"arithmetic '{op}' on the boolean expression '{side}': use select()")
    dtype = dtypes.promote(a.dtype, b.dtype)
    if op == "/" and dtypes.is_int(dtype):
        raise DefinitionError(f"'/' on integers in '{a} / {b}': use // for integer division")
    if dtypes.is_int(dtype):
        simpler = _fold_integer(op, a, b)
        if simpler is not None and simpler.dtype == dtype:
            return simpler
    return Binary(op, a, b, dtype)


def _is_int_const(expr, value):
    return isinstance(expr, Const) and expr.value == value and not isinstance(expr.value, bool)


_FOLD = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
         "//": lambda x, y: x // y, "%": lambda x, y: x % y}


def _fold_integer(op, a, b):
    """Constant-fold integer arithmetic and drop x + 0, x - 0, x * 1, x // 1, x * 0 and x % 1:
    keeps generated index arithmetic readable."""
    both_const = isinstance(a, Const) and isinstance(b, Const)
    if both_const and op in _FOLD and not (op in ("//", "%") and b.value == 0):
        return Const(_FOLD[op](a.value, b.value), dtypes.promote(a.dtype, b.dtype))
    if op == "*" and (_is_int_const(a, 0) or _is_int_const(b, 0)):
        return Const(0, dtypes.promote(a.dtype, b.dtype))
    if op == "%" and _is_int_const(b, 1):
        return Const(0, dtypes.promote(a.dtype, b.dtype))
    if op in ("+", "-", "//") and _is_int_const(b, 0 if op != "//" else 1):
        return a
    if op == "+" and _is_int_const(a, 0):
        return b
    if op == "*":
        if _is_int_const(b, 1):
            return a
        if _is_int_const(a, 1):
            return b
    return None


def compare(op, a, b):
    a, b = _operands(a, b)
    return Compare(op, a, b)


def _check_bool(value, what):
    if value.dtype != dtypes.BOOL:
        raise DefinitionError(f"{what} must be a boolean condition (a comparison), got {value.dtype} '{value}'")


def logical(op, a, b):
    a, b = as_expr(a), as_expr(b)
    _check_bool(a, f"operand of '{op}'")
    _check_bool(b, f"operand of '{op}'")
    return Logical(op, a, b)


def logical_not(a):
    a = as_expr(a)
    _check_bool(a, "operand of '~'")
    return Logical("~", a, None)


def select(cond, true_value, false_value):
    """true_value where cond holds, else false_value (both sides are always well defined)."""
    cond = as_expr(cond)
    _check_bool(cond, "condition of select")
    t, f = _operands(true_value, false_value)
    if dtypes.BOOL in (t.dtype, f.dtype) and t.dtype != f.dtype:
        raise DefinitionError(f"select mixes a boolean and a number: '{t}' and '{f}'")
    dtype = t.dtype if t.dtype == f.dtype else dtypes.promote(t.dtype, f.dtype)
    return Select(cond, t, f, dtype)


def call(func, arg):
    arg = as_expr(arg)
    if func == "abs":
        if arg.dtype == dtypes.BOOL:
            raise DefinitionError(f"abs of the boolean expression '{arg}'")
        return Call(func, arg, arg.dtype)
    if not dtypes.is_float(arg.dtype):
        raise DefinitionError(f"{func}() needs a float argument, got {arg.dtype} '{arg}': cast it first")
    return Call(func, arg, arg.dtype)


def cast(dtype, value):
    value = as_expr(value)
    if dtype not in dtypes.TENSOR_DTYPES:
        raise DefinitionError(f"cannot cast '{value}' to unsupported dtype {dtype!r}; "
                              f"choose one of {', '.join(dtypes.TENSOR_DTYPES)}")
    return value if value.dtype == dtype else Cast(value, dtype)


# ---------------------------------------------------------------- traversal

def children(expr):
    """The direct sub-expressions of expr, in evaluation order."""
    if isinstance(expr, (Binary, Compare)):
        return (expr.a, expr.b)
    if isinstance(expr, Logical):
        return (expr.a,) if expr.b is None else (expr.a, expr.b)
    if isinstance(expr, Load):
        return expr.indices
    if isinstance(expr, Select):
        return (expr.cond, expr.true_value, expr.false_value)
    if isinstance(expr, Call):
        return (expr.arg,)
    if isinstance(expr, Cast):
        return (expr.value,)
    if isinstance(expr, Reduce):
        return (expr.source,)
    if isinstance(expr, Intrinsic):
        return expr.args
    return ()


def with_children(expr, new_children):
    """expr with its direct sub-expressions replaced (in children() order); expr itself when
    they are the same objects."""
    new_children = tuple(new_children)
    old = children(expr)
    if len(old) == len(new_children) and all(a is b for a, b in zip(old, new_children)):
        return expr
    if isinstance(expr, (Binary, Compare)):
        return type(expr)(expr.op, *new_children, expr.dtype)
    if isinstance(expr, Logical):
        return Logical(expr.op, new_children[0], new_children[1] if expr.b is not None else None)
    if isinstance(expr, Load):
        return Load(expr.tensor, new_children, expr.dtype)
    if isinstance(expr, Select):
        return Select(*new_children, expr.dtype)
    if isinstance(expr, Call):
        return Call(expr.func, new_children[0], expr.dtype)
    if isinstance(expr, Cast):
        return Cast(new_children[0], expr.dtype)
    if isinstance(expr, Reduce):
        return Reduce(expr.combiner, new_children[0], expr.axes, expr.dtype)
    if isinstance(expr, Intrinsic):
        return Intrinsic(expr.func, new_children, expr.dtype)
    raise TypeError(f"{type(expr).__name__} has no sub-expressions to replace")


def transform(expr, rule):
    """expr rebuilt bottom-up, each node replaced by rule(node) (None keeps it)."""
    rebuilt = with_children(expr, [transform(child, rule) for child in children(expr)]) if children(expr) else expr
    replaced = rule(rebuilt)
    return rebuilt if replaced is None else replaced


def walk(expr):
    """Every node of the tree, parents before children."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def iter_vars_of(expr):
    """The loop variables an expression uses, in first-use order, each once."""
    seen = {}
    for node in walk(expr):
        if isinstance(node, IterVar):
            seen.setdefault(id(node), node)
    return list(seen.values())


def loads_of(expr):
    """Every tensor load in an expression (including loads inside indices)."""
    return [node for node in walk(expr) if isinstance(node, Load)]


# ---------------------------------------------------------------- printing

_PRECEDENCE = {"|": 1, "&": 2, "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3,
               "+": 4, "-": 4, "*": 5, "/": 5, "//": 5, "%": 5}
_ATOM = 9


def _precedence(expr):
    if isinstance(expr, (Binary, Compare)) and expr.op in _PRECEDENCE:
        return _PRECEDENCE[expr.op]
    if isinstance(expr, Logical) and expr.op != "~":
        return _PRECEDENCE[expr.op]
    if isinstance(expr, Const) and isinstance(expr.value, (int, float)) and expr.value < 0:
        return 6
    return _ATOM


def format_expr(expr):
    """Readable infix text of an expression, with only the parentheses it needs."""
    if isinstance(expr, IterVar):
        return expr.name
    if isinstance(expr, Const):
        return repr(expr.value)
    if isinstance(expr, Load):
        return f"{expr.tensor.name}[{', '.join(format_expr(i) for i in expr.indices)}]"
    if isinstance(expr, Logical) and expr.op == "~":
        return f"~{_wrap(expr.a, _ATOM)}"
    if isinstance(expr, (Binary, Compare, Logical)):
        if expr.op in ("max", "min"):
            return f"{expr.op}({format_expr(expr.a)}, {format_expr(expr.b)})"
        prec = _PRECEDENCE[expr.op]
        return f"{_wrap(expr.a, prec)} {expr.op} {_wrap(expr.b, prec + 1)}"
    if isinstance(expr, Select):
        return (f"select({format_expr(expr.cond)}, {format_expr(expr.true_value)}, "
                f"{format_expr(expr.false_value)})")
    if isinstance(expr, Call):
        return f"{expr.func}({format_expr(expr.arg)})"
    if isinstance(expr, Cast):
        return f"{expr.dtype}({format_expr(expr.value)})"
    if isinstance(expr, Intrinsic):
        return f"{expr.func}({', '.join(format_expr(arg) for arg in expr.args)})"
    if isinstance(expr, Reduce):
        axes = ", ".join(axis.name for axis in expr.axes)
        return f"{expr.combiner}({format_expr(expr.source)}, axis=[{axes}])"
    raise TypeError(f"not an expression: {expr!r}")


def _wrap(expr, min_precedence):
    text = format_expr(expr)
    return f"({text})" if _precedence(expr) < min_precedence else text
