"""DSL functions: reductions, select, math calls, constants and casts."""

from . import dtypes
from .errors import DefinitionError
from .expr import Expr, IterVar, Reduce, as_expr, binary, call, cast, select

__all__ = ["sum", "max", "min", "select", "if_then_else", "exp", "log", "sqrt", "abs", "tanh",
           "const", "cast", "all_of", "any_of"]


def _reduction(combiner, expr, axis):
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    if not axes:
        raise DefinitionError(f"{combiner}(): give at least one reduce axis")
    for ax in axes:
        if not isinstance(ax, IterVar) or ax.kind != "reduce":
            raise DefinitionError(f"{combiner}(): axis {ax} is not a reduce_axis")
    names = [ax.name for ax in axes]
    if len(set(map(id, axes))) != len(axes):
        raise DefinitionError(f"{combiner}(): a reduce axis is listed twice in {names}")
    source = as_expr(expr)
    if source.dtype == dtypes.BOOL:
        raise DefinitionError(f"{combiner}() of the condition '{source}': select() a value first")
    return Reduce(combiner, source, axes, source.dtype)


def sum(expr, axis):  # noqa: A001 - the DSL mirrors the math
    """The sum of expr over one or more reduce axes."""
    return _reduction("sum", expr, axis)


def max(expr, other=None, axis=None):  # noqa: A001
    """max(expr, axis=k): a max-reduction; max(a, b): the elementwise maximum."""
    return _max_min("max", expr, other, axis)


def min(expr, other=None, axis=None):  # noqa: A001
    """min(expr, axis=k): a min-reduction; min(a, b): the elementwise minimum."""
    return _max_min("min", expr, other, axis)


def _max_min(op, expr, other, axis):
    if (other is None) == (axis is None):
        raise DefinitionError(f"{op}() takes either a second value (elementwise) or axis= (a reduction)")
    if axis is not None:
        return _reduction(op, expr, axis)
    return binary(op, expr, other)


def if_then_else(cond, true_value, false_value):
    """Alias of select, as in TVM."""
    return select(cond, true_value, false_value)


def exp(x): return call("exp", x)
def log(x): return call("log", x)
def sqrt(x): return call("sqrt", x)
def abs(x): return call("abs", x)  # noqa: A001
def tanh(x): return call("tanh", x)


def const(value, dtype="float32"):
    """A typed constant."""
    return cast(dtype, as_expr(value))


def all_of(*conds):
    """The conjunction of boolean conditions (Python's `and` cannot build expressions)."""
    return _fold("&", conds)


def any_of(*conds):
    """The disjunction of boolean conditions."""
    return _fold("|", conds)


def _fold(op, conds):
    if not conds:
        raise DefinitionError(f"{'all_of' if op == '&' else 'any_of'}() needs at least one condition")
    result = as_expr(conds[0])
    for cond in conds[1:]:
        result = (result & cond) if op == "&" else (result | cond)
    if not isinstance(result, Expr) or result.dtype != dtypes.BOOL:
        raise DefinitionError(f"'{result}' is not a condition")
    return result
