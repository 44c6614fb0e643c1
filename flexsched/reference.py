"""The reference evaluator: any computation, computed with numpy, vectorised over the output."""

import math

import numpy as np

from . import dtypes
from .errors import EvaluationError
from .expr import Binary, Reduce, iter_vars_of
from .numpy_expr import axis_arrays, eval_expr
from .tensor import Tensor

# Elements of one vectorised step (output points x reduction points), bounding temporaries.
_BLOCK_ELEMENTS = 1 << 22
# Largest factor gathered over its own loop variables for an einsum contraction (float64).
_EINSUM_ELEMENTS = 1 << 25
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def topological_order(outputs):
    """Every tensor the outputs depend on, producers before consumers (a post-order)."""
    order, done = [], set()

    def visit(tensor, path):
        if id(tensor) in done:
            return
        if id(tensor) in path:
            raise EvaluationError(f"tensor '{tensor.name}' depends on itself")
        for producer in tensor.inputs:
            visit(producer, path | {id(tensor)})
        done.add(id(tensor))
        order.append(tensor)

    for out in outputs:
        visit(out, frozenset())
    return order


def evaluate(outputs, feed):
    """Values of `outputs` (a tensor or a sequence) given arrays for the placeholders.

    feed maps placeholder tensors or their names to arrays. Returns one array for a single
    tensor, else a list in the order given.
    """
    single = isinstance(outputs, Tensor)
    outputs = [outputs] if single else list(outputs)
    values = {}
    for tensor in topological_order(outputs):
        if tensor.is_placeholder:
            values[id(tensor)] = _fed_array(tensor, feed)
        else:
            values[id(tensor)] = evaluate_compute(tensor, values)
    results = [values[id(out)] for out in outputs]
    return results[0] if single else results


def _fed_array(tensor, feed):
    if tensor in feed:
        array = feed[tensor]
    elif tensor.name in feed:
        array = feed[tensor.name]
    else:
        raise EvaluationError(f"no array given for input '{tensor.name}'")
    array = np.asarray(array)
    if array.shape != tensor.shape:
        raise EvaluationError(f"input '{tensor.name}' has shape {array.shape}, expected {tensor.shape}")
    if not np.can_cast(array.dtype, tensor.dtype, casting="same_kind"):
        raise EvaluationError(f"input '{tensor.name}' has dtype {array.dtype}, expected {tensor.dtype}")
    return array.astype(tensor.dtype, copy=False)


def _loader(values):
    def load(node, indices):
        array = values[id(node.tensor)]
        # Indices under an untaken select branch may stray (padding); clipping keeps them
        # addressable, and validation proved that taken branches stay in bounds.
        clipped = tuple(np.clip(index, 0, extent - 1) for index, extent in zip(indices, array.shape))
        return array[clipped]
    return load


def evaluate_compute(tensor, values):
    """One compute tensor's value, given the arrays of the tensors it reads."""
    load = _loader(values)
    if not isinstance(tensor.body, Reduce):
        env = axis_arrays(tensor.axes)
        result = eval_expr(tensor.body, env, load)
        return np.broadcast_to(result, tensor.shape).astype(tensor.dtype)
    result = _contract_products(tensor, tensor.body, load)
    if result is None:
        result = _evaluate_reduction(tensor, tensor.body, load)
    return result


def _product_factors(expr):
    """The factors of a float product tree: a*b*c -> [a, b, c]."""
    if isinstance(expr, Binary) and expr.op == "*" and dtypes.is_float(expr.dtype):
        return _product_factors(expr.a) + _product_factors(expr.b)
    return [expr]


def _contract_products(tensor, body, load):
    """A float sum of products as one einsum (BLAS): each factor is evaluated over only the
    loop variables it uses, so a GEMM or convolution never builds its whole iteration space.
    None when it does not apply or a factor would be too large to gather."""
    variables = (*tensor.axes, *body.axes)
    if body.combiner != "sum" or not dtypes.is_float(tensor.dtype) or len(variables) > len(_LETTERS):
        return None
    letter = {id(var): _LETTERS[n] for n, var in enumerate(variables)}
    operands, subscripts, used = [], [], set()
    for factor in _product_factors(body.source):
        factor_vars = iter_vars_of(factor)
        extents = [var.extent for var in factor_vars]
        if math.prod(extents) > _EINSUM_ELEMENTS:
            return None
        value = eval_expr(factor, axis_arrays(factor_vars), load)
        operands.append(np.broadcast_to(value, extents).astype("float64"))
        subscripts.append("".join(letter[id(var)] for var in factor_vars))
        used.update(id(var) for var in factor_vars)
    kept = [axis for axis in tensor.axes if id(axis) in used]
    spec = ",".join(subscripts) + "->" + "".join(letter[id(axis)] for axis in kept)
    result = np.einsum(spec, *operands, optimize=True)
    # Output axes no factor uses are broadcast (the sum is the same along them).
    shape = [axis.extent if id(axis) in used else 1 for axis in tensor.axes]
    return np.broadcast_to(result.reshape(shape), tensor.shape).astype(tensor.dtype)


def _accumulator(combiner, dtype, shape):
    wide = "float64" if dtypes.is_float(dtype) else "int64"
    if combiner == "sum":
        return np.zeros(shape, dtype=wide)
    if dtypes.is_float(dtype):
        start = -np.inf if combiner == "max" else np.inf
    else:
        start = np.iinfo(wide).min if combiner == "max" else np.iinfo(wide).max
    return np.full(shape, start, dtype=wide)


def _evaluate_reduction(tensor, body, load):
    """Blocks of flattened reduction points go along one extra trailing axis."""
    ndim = tensor.ndim
    reduce_extents = [axis.extent for axis in body.axes]
    total = math.prod(reduce_extents)
    block = max(1, min(total, _BLOCK_ELEMENTS // tensor.size))
    env = axis_arrays(tensor.axes, ndim + 1)
    acc = _accumulator(body.combiner, tensor.dtype, tensor.shape)
    combine = {"sum": np.add, "max": np.maximum, "min": np.minimum}[body.combiner]
    fold = {"sum": lambda v: np.sum(v, axis=-1, dtype=acc.dtype),
            "max": lambda v: np.max(v, axis=-1), "min": lambda v: np.min(v, axis=-1)}[body.combiner]
    for start in range(0, total, block):
        flat = np.arange(start, min(total, start + block), dtype=np.int64)
        for axis, coords in zip(body.axes, np.unravel_index(flat, reduce_extents)):
            env[id(axis)] = coords.reshape([1] * ndim + [-1])
        # Validation guarantees the source uses a reduce axis, so the trailing axis is there.
        value = eval_expr(body.source, env, load)
        combine(acc, fold(value) if value.shape[-1] > 1 else value[..., 0], out=acc)
    return acc.astype(tensor.dtype)
