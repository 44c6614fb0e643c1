"""Tensors and the constructors that define them: placeholder, compute, reduce_axis."""

from __future__ import annotations

import functools
import inspect
import math
import os
from dataclasses import dataclass

import numpy as np

from . import dtypes
from .errors import DefinitionError
from .expr import Expr, IterVar, Load, Reduce, as_expr, cast, loads_of

# No real tensor dimension comes near this, and it keeps arithmetic on extents cheap (the
# schedule space factorises every extent by trial division, up to its square root).
MAX_EXTENT = 2**31


@dataclass(frozen=True, eq=False)
class Tensor:
    """A named n-dimensional array: an input (placeholder) or the result of a compute."""

    name: str
    shape: tuple
    dtype: str
    axes: tuple = ()        # spatial IterVars of a compute, one per dimension
    body: Expr | None = None  # None for a placeholder
    tag: str = ""

    @property
    def is_placeholder(self):
        return self.body is None

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def reduce_axes(self):
        return self.body.axes if isinstance(self.body, Reduce) else ()

    @property
    def inputs(self):
        """The tensors this compute reads, in first-use order, each once."""
        if self.body is None:
            return ()
        seen = {}
        for load in loads_of(self.body):
            seen.setdefault(id(load.tensor), load.tensor)
        return tuple(seen.values())

    def __getitem__(self, indices):
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise DefinitionError(f"tensor '{self.name}' has {self.ndim} dimension(s) but is indexed "
                                  f"with {len(indices)} index(es)")
        return Load(self, tuple(_index_expr(self.name, dim, index) for dim, index in enumerate(indices)),
                    self.dtype)

    def __repr__(self):
        kind = "placeholder" if self.is_placeholder else "compute"
        return f"Tensor({self.name!r}, shape={self.shape}, dtype={self.dtype!r}, {kind})"


def _index_expr(tensor_name, dim, index):
    if isinstance(index, Expr):
        expr = index
    elif isinstance(index, int) and not isinstance(index, bool):
        expr = as_expr(index)
    else:
        raise DefinitionError(f"index {dim} of tensor '{tensor_name}' must be an integer expression, "
                              f"got {type(index).__name__} {index!r}")
    if not dtypes.is_int(expr.dtype):
        raise DefinitionError(f"index {dim} of tensor '{tensor_name}' must be an integer expression, "
                              f"got {expr.dtype} '{expr}'")
    if loads_of(expr):
        raise DefinitionError(f"index {dim} of tensor '{tensor_name}' reads a tensor ('{expr}'): "
                              "data-dependent indexing is not supported")
    return expr


def _check_name(name, what="tensor"):
    if not isinstance(name, str) or not name.isidentifier():
        raise DefinitionError(f"{what} name {name!r} must be a Python-style identifier")
    return name


def _check_shape(name, shape):
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not shape:
        raise DefinitionError(f"tensor '{name}': shape must be a non-empty tuple of positive integers, "
                              f"got {shape!r}")
    for dim, extent in enumerate(shape):
        if isinstance(extent, bool) or not isinstance(extent, int) or extent <= 0:
            raise DefinitionError(f"tensor '{name}': shape[{dim}] must be a positive integer, got {extent!r}")
        if extent > MAX_EXTENT:
            raise DefinitionError(f"tensor '{name}': shape[{dim}] is {extent}, beyond the largest extent "
                                  f"supported, 2**31 = {MAX_EXTENT}")
    return tuple(int(extent) for extent in shape)


@functools.cache
def machine_memory_bytes():
    """This machine's physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _check_fits(name, shape, dtype):
    """Refuse a tensor that could never be allocated here, before anything is built for it."""
    size = math.prod(shape) * np.dtype(dtype).itemsize
    if size > machine_memory_bytes():
        raise DefinitionError(f"tensor '{name}': shape {'x'.join(map(str, shape))} of {dtype} needs "
                              f"{_gib(size)}, more than this machine's memory ({_gib(machine_memory_bytes())})")


def _gib(size):
    return f"{size / 2**30:.3g} GiB"


def placeholder(shape, dtype="float32", name="placeholder"):
    """An input tensor of the computation."""
    _check_name(name)
    shape = _check_shape(name, shape)
    _check_fits(name, shape, dtypes.check_tensor_dtype(dtype, name))
    return Tensor(name, shape, dtype)


def reduce_axis(extent, name="rk"):
    """A reduction loop over 0..extent-1, to be summed (or max/min-ed) over in a compute."""
    _check_name(name, "reduce axis")
    if isinstance(extent, bool) or not isinstance(extent, int) or extent <= 0:
        raise DefinitionError(f"reduce axis '{name}': extent must be a positive integer, got {extent!r}")
    if extent > MAX_EXTENT:
        raise DefinitionError(f"reduce axis '{name}': extent {extent} is beyond the largest extent supported, "
                              f"2**31 = {MAX_EXTENT}")
    return IterVar(name, extent, "reduce")


def _index_names(fcompute, ndim, name):
    """Loop variable names taken from fcompute's parameters (i0, i1, ... for *args)."""
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        return [f"i{d}" for d in range(ndim)]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return [f"i{d}" for d in range(ndim)]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) != ndim:
        raise DefinitionError(f"tensor '{name}': fcompute takes {len(positional)} index argument(s) "
                              f"but the shape has {ndim} dimension(s)")
    return [p.name for p in positional]


def compute(shape, fcompute, name="compute", dtype=None, tag="", axis_names=None):
    """A tensor whose element at (i, j, ...) is fcompute(i, j, ...), checked when defined.

    Loop variables take fcompute's parameter names unless axis_names gives them.
    """
    from .validate import validate_compute  # late import: validate needs Tensor

    _check_name(name)
    shape = _check_shape(name, shape)
    if axis_names is None:
        axis_names = _index_names(fcompute, len(shape), name)
    elif len(axis_names) != len(shape):
        raise DefinitionError(f"tensor '{name}': {len(axis_names)} axis_names for a shape of "
                              f"{len(shape)} dimension(s)")
    axes = tuple(IterVar(_check_name(var, "axis"), extent, "spatial") for var, extent in zip(axis_names, shape))
    try:
        body = fcompute(*axes)
    except DefinitionError as err:
        raise DefinitionError(f"tensor '{name}': {err}") from None
    if isinstance(body, Tensor):
        raise DefinitionError(f"tensor '{name}': fcompute returned tensor '{body.name}', not an element "
                              f"of it (index it: {body.name}[...])")
    try:
        body = as_expr(body)
    except DefinitionError as err:
        raise DefinitionError(f"tensor '{name}': {err}") from None
    if body.dtype == dtypes.BOOL:
        raise DefinitionError(f"tensor '{name}': the body '{body}' is a condition; select() a value instead")
    if dtype is not None:
        dtypes.check_tensor_dtype(dtype, name)
        body = _cast_body(body, dtype)
    _check_fits(name, shape, body.dtype)
    validate_compute(name, axes, body)
    return Tensor(name, shape, body.dtype, axes, body, tag)


def _cast_body(body, dtype):
    if isinstance(body, Reduce):
        return Reduce(body.combiner, cast(dtype, body.source), body.axes, dtype)
    return cast(dtype, body)
