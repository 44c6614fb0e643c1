"""Per-node statistics: loops, operation counts."""

from flexsched import dtypes
from flexsched.expr import Binary, Call, Compare, Load, Reduce, Select, children

from .info import Loop


def loops_of(tensor):
    """Spatial loops then reduce loops, outermost first, as the natural nest runs them."""
    spatial = tuple(Loop(a.name, a.extent, "spatial") for a in tensor.axes)
    reduce = tuple(Loop(a.name, a.extent, "reduce") for a in tensor.reduce_axes)
    return spatial, reduce


def ops_per_point(body):
    """Floating-point operations per iteration: index arithmetic and selection are free,
    a reduction's combine counts one, a select counts its costlier branch."""
    if isinstance(body, Reduce):
        return 1 + _count(body.source)
    return _count(body)


def has_select(expr):
    """Whether a body chooses its value by a condition anywhere."""
    return isinstance(expr, Select) or any(has_select(child) for child in children(expr))


def _count(expr):
    if isinstance(expr, Load):
        return 0
    if isinstance(expr, Select):
        return _count(expr.cond) + max(_count(expr.true_value), _count(expr.false_value))
    own = 0
    if isinstance(expr, (Binary, Call)) and dtypes.is_float(expr.dtype):
        own = 1
    elif isinstance(expr, Compare) and (dtypes.is_float(expr.a.dtype) or dtypes.is_float(expr.b.dtype)):
        own = 1
    return own + sum(_count(child) for child in children(expr))
