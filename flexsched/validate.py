"""Definition-time checks of a compute body; each failure is one line naming tensor and axis."""

import math

import numpy as np

from .affine import interval
from .errors import DefinitionError
from .expr import (Binary, Const, IterVar, Load, Reduce, Select, children, iter_vars_of, logical_not,
                   loads_of, walk)
from .numpy_expr import axis_arrays, eval_expr

# Indices over more loop points than this are range-checked by intervals instead of exactly.
_EXACT_CHECK_POINTS = 1 << 22


def validate_compute(name, axes, body):
    """Raise DefinitionError if the body of compute `name` is malformed."""
    reduce_axes = _check_reduction_shape(name, body)
    _check_loop_names(name, axes, reduce_axes)
    _check_variable_use(name, axes, reduce_axes, body)
    for load in loads_of(body):
        for dim, index in enumerate(load.indices):
            _check_affine(name, load, dim, index)
    _check_bounds(name, body)


def _check_reduction_shape(name, body):
    """A reduction may only be the whole body; returns its axes."""
    nested = [node for node in walk(body) if isinstance(node, Reduce) and node is not body]
    if nested:
        raise DefinitionError(f"tensor '{name}': a reduction must be the whole body of a compute, found "
                              f"'{nested[0]}' inside '{body}'; reduce into its own tensor first")
    return body.axes if isinstance(body, Reduce) else ()


def _check_loop_names(name, axes, reduce_axes):
    seen = set()
    for var in (*axes, *reduce_axes):
        if var.name in seen:
            raise DefinitionError(f"tensor '{name}': two loops are named '{var.name}'; give each axis a "
                                  "distinct name")
        seen.add(var.name)


def _check_variable_use(name, axes, reduce_axes, body):
    own = {id(var) for var in (*axes, *reduce_axes)}
    for var in iter_vars_of(body):
        if id(var) in own:
            continue
        if var.kind == "reduce":
            raise DefinitionError(f"tensor '{name}': reduce axis '{var.name}' is used outside a reduction "
                                  "over it")
        raise DefinitionError(f"tensor '{name}': loop variable '{var.name}' belongs to another tensor")
    if isinstance(body, Reduce):
        used = {id(var) for var in iter_vars_of(body.source)}
        for var in reduce_axes:
            if id(var) not in used:
                raise DefinitionError(f"tensor '{name}': reduce axis '{var.name}' is not used in the "
                                      f"reduction '{body}'")


def _is_constant(expr):
    return all(not isinstance(node, (IterVar, Load)) for node in walk(expr))


def _check_affine(name, load, dim, index):
    """Indices are affine in the loop variables, with // and % by positive constants."""
    def ok(node):
        if isinstance(node, (IterVar, Const)):
            return True
        if isinstance(node, Binary):
            if node.op in ("+", "-"):
                return ok(node.a) and ok(node.b)
            if node.op == "*":
                return (_is_constant(node.a) or _is_constant(node.b)) and ok(node.a) and ok(node.b)
            if node.op in ("//", "%"):
                return ok(node.a) and _is_positive_constant(node.b)
        return False

    if not ok(index):
        raise DefinitionError(f"tensor '{name}': index {dim} of '{load.tensor.name}' is not affine: "
                              f"'{index}' (use +, -, * by constants and // or % by positive constants)")


def _is_positive_constant(expr):
    if not _is_constant(expr):
        return False
    value = eval_expr(expr, {}, None)
    return int(value) > 0


def _guarded_loads(expr, guards=()):
    """Each load with the select conditions that must hold for it to be evaluated."""
    if isinstance(expr, Select):
        yield from _guarded_loads(expr.cond, guards)
        yield from _guarded_loads(expr.true_value, guards + (expr.cond,))
        yield from _guarded_loads(expr.false_value, guards + (logical_not(expr.cond),))
    elif isinstance(expr, Load):
        yield expr, guards
    else:
        for child in children(expr):
            yield from _guarded_loads(child, guards)


def _check_bounds(name, body):
    for load, guards in _guarded_loads(body):
        if any(loads_of(guard) for guard in guards):
            continue  # a data-dependent guard: nothing can be proven
        for dim, index in enumerate(load.indices):
            extent = load.tensor.shape[dim]
            low, high, exact = _index_range(index, guards)
            if low is None:
                continue  # no loop point reaches this load
            # An exact range proves any excursion; an interval (an over-approximation) only a total miss.
            if (low < 0 or high >= extent) if exact else (high < 0 or low >= extent):
                reached = low if low < 0 else high
                raise DefinitionError(f"tensor '{name}': index {dim} of '{load.tensor.name}' is out of "
                                      f"bounds: '{index}' reaches {reached}, outside 0..{extent - 1}")


def _index_range(index, guards):
    """(min, max, exact) of an index over the loop points where its guards hold (None if none do)."""
    index_vars = {id(v): v for v in iter_vars_of(index)}
    relevant = [g for g in guards if any(id(v) in index_vars for v in iter_vars_of(g))]
    variables = list({id(v): v for g in (index, *relevant) for v in iter_vars_of(g)}.values())
    if math.prod(v.extent for v in variables) > _EXACT_CHECK_POINTS:
        return (*interval(index), False)
    env = axis_arrays(variables)
    values = np.broadcast_to(eval_expr(index, env, None), [v.extent for v in variables])
    mask = np.ones(values.shape, dtype=bool)
    for guard in relevant:
        mask &= np.broadcast_to(eval_expr(guard, env, None), values.shape)
    if not mask.any():
        return None, None, True
    reached = values[mask]
    return int(reached.min()), int(reached.max()), True
