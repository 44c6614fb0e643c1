"""The vector registers an unrolled loop's steps would keep for the loads they share.

LLVM merges a load that recurs from one unrolled step to the next (a stride-2 convolution's tile
reads most of its input columns again at the next filter tap) and keeps the value in a register
from the first step that needs it to the last. Beside a register tile's accumulators, those values
can outgrow the register file and spill the tile; this counts them, from the loop IR alone, so the
back end can keep the steps apart where they would.

Each load's indices are split once into the unrolled loops' terms (coefficients), the vectorised
loop's (its lanes), and the rest (the same at every step, kept as printed); the steps are then
enumerated by arithmetic alone, since the back end asks this of every unrolled loop it emits.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass

from flexsched import affine
from flexsched.expr import IterVar, Load, format_expr, walk

from .ir import Allocate, For, IfThenElse, Seq, Store
from .vectorize import access_indices

# Unrolled iterations enumerated per load over all the loop's steps, at most: a register tile's points
# times its reduction steps stay far below it; past it the count gives up (and says none are shared).
MAX_ENUMERATED = 1 << 14


@dataclass(frozen=True)
class _Site:
    """A load as the unrolled loops around it see it: their names and extents, outermost first, the
    vectorised loop's extent (or None), and per index (coefficient of each unrolled loop, coefficient of
    the vectorised loop, what the other loops contribute, the constant, the terms that take the unrolled
    loops under // or % as (scale, term))."""

    load: Load
    unrolled: tuple
    vector_extent: int | None
    indices: tuple


def shared_load_registers(loop, register_lanes, skip=()):
    """The vector registers the distinct loads that two or more of `loop`'s steps read would fill,
    merged (a vector load of the vectorised loop's lanes fills its whole registers, any other one, a
    broadcast); loads of the buffers in `skip` (the tile's own accumulators) are left out, and so are
    loads whose elements cannot be told apart from the indices (one mixing the vectorised loop or
    the others with the unrolled ones under // or %)."""
    sites = []
    _collect(loop.body, ((loop.var.name, loop.extent),), None, set(skip), sites)
    steps_reading, registers = defaultdict(int), {}   # per element: a bit per step that reads it
    for site in sites:
        keys = _site_keys(site, register_lanes)
        if keys is None:   # too many unrolled iterations to enumerate: say nothing is shared
            return 0
        for step, key, count in keys:
            steps_reading[key] |= 1 << step
            registers[key] = count
    return sum(registers[key] for key, steps in steps_reading.items() if steps & (steps - 1))


def _collect(stmt, unrolled, vector, skip, sites):
    """Append a _Site for each comparable load under stmt, inside the unrolled loops `unrolled`
    ((name, extent), outermost first) and the vectorised loop `vector` ((name, extent) or None)."""
    if isinstance(stmt, Seq):
        for part in stmt.stmts:
            _collect(part, unrolled, vector, skip, sites)
    elif isinstance(stmt, Allocate):
        _collect(stmt.body, unrolled, vector, skip, sites)
    elif isinstance(stmt, IfThenElse):
        for body in (stmt.then_body, stmt.else_body):
            if body is not None:
                _collect(body, unrolled, vector, skip, sites)
    elif isinstance(stmt, For):
        if stmt.kind == "vectorized":
            _collect(stmt.body, unrolled, (stmt.var.name, stmt.extent), skip, sites)
        elif stmt.kind == "unrolled":
            _collect(stmt.body, unrolled + ((stmt.var.name, stmt.extent),), vector, skip, sites)
        else:   # a rolled loop's loads change every iteration: its variable stays symbolic
            _collect(stmt.body, unrolled, vector, skip, sites)
    elif isinstance(stmt, Store):
        for node in walk(stmt.value):
            if isinstance(node, Load) and node.tensor not in skip:
                site = _site(node, unrolled, vector)
                if site is not None:
                    sites.append(site)


def _site(load, unrolled, vector):
    """A load's _Site, or None where its elements cannot be told apart from its indices."""
    names = [name for name, _ in unrolled]
    vector_name = vector[0] if vector else None
    inner = set(names) | ({vector_name} if vector else set())
    indices = []
    for index in access_indices(load):
        terms = affine.split_terms(index, inner)
        if terms is None:
            return None
        inner_terms, outer_terms, constant = terms
        coefficients, lanes, nonlinear = dict.fromkeys(names, 0), 0, []
        for scale, term in inner_terms:
            form = affine.affine_form(term)
            if form is None:
                if any(isinstance(node, IterVar) and node.name == vector_name for node in walk(term)) \
                        or affine.interval(term) is None:
                    return None
                nonlinear.append((scale, term))
                continue
            term_coefficients, offset = form
            constant += scale * offset
            for name, coefficient in term_coefficients.items():
                if name == vector_name:
                    lanes += scale * coefficient
                else:
                    coefficients[name] += scale * coefficient
        outer = tuple(sorted((scale, format_expr(term)) for scale, term in outer_terms))
        indices.append((tuple(coefficients[name] for name in names), lanes, outer, constant, tuple(nonlinear)))
    return _Site(load, unrolled, vector[1] if vector else None, tuple(indices))


def _site_keys(site, register_lanes):
    """[(step of the outermost loop, element key, registers)] for every unrolled iteration of a site;
    None where there are too many iterations to enumerate."""
    names = [name for name, _ in site.unrolled]
    extents = [extent for _, extent in site.unrolled]
    if math.prod(extents) > MAX_ENUMERATED:
        return None
    vectorised = any(lanes for _, lanes, *_ in site.indices)
    registers = -(-site.vector_extent // max(1, register_lanes)) if vectorised else 1
    shape = tuple((lanes, outer) for _, lanes, outer, *_ in site.indices)
    keys = []
    for values in itertools.product(*(range(extent) for extent in extents)):
        offsets = tuple(constant + sum(c * v for c, v in zip(coefficients, values))
                        + sum(scale * _evaluated(term, names, values) for scale, term in nonlinear)
                        for coefficients, _, _, constant, nonlinear in site.indices)
        keys.append((values[0], (site.load.tensor, shape, offsets), registers))
    return keys


def _evaluated(term, names, values):
    """An index term of the unrolled loops alone (under // or %), at these values of theirs."""
    return affine.interval(term, {name: (value, value) for name, value in zip(names, values)})[0]
