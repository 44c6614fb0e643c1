"""The vector registers an unrolled loop's steps would keep for the loads they share.

LLVM merges a load that recurs from one unrolled step to the next (a stride-2 convolution's tile
reads most of its input columns again at the next filter tap) and keeps the value in a register
from the first step that needs it to the last. Beside a register tile's accumulators, those values
can outgrow the register file and spill the tile; this counts them, from the loop IR alone, so the
back end can keep the steps apart where they would.
"""

from __future__ import annotations

from collections import Counter

from flexsched import affine
from flexsched.expr import IterVar, Load, format_expr, walk

from .ir import Allocate, For, IfThenElse, Seq, Store
from .vectorize import access_indices

# Inner unrolled steps enumerated per step of the loop, at most: a register tile's points times its
# innermost reduction steps stay far below it; past it the count gives up (and says none are shared).
MAX_ENUMERATED = 4096


def shared_load_registers(loop, register_lanes, skip=()):
    """The vector registers the distinct loads that two or more of `loop`'s steps read would fill,
    merged (a vector load of the vectorised loop's lanes fills its whole registers, any other one, a
    broadcast); loads of the buffers in `skip` (the tile's own accumulators) are left out."""
    per_step = []
    for step in range(loop.extent):
        keys = {}
        if not _collect(loop.body, {loop.var.name: step}, None, keys, register_lanes, set(skip), [0]):
            return 0
        per_step.append(keys)
    steps_reading = Counter(key for keys in per_step for key in keys)
    registers = {key: count for keys in per_step for key, count in keys.items()}
    return sum(registers[key] for key, steps in steps_reading.items() if steps > 1)


def _collect(stmt, bound, vector, keys, register_lanes, skip, enumerated):
    """Add {load key: registers} of stmt's loads with the unrolled loops' variables `bound` to values;
    `vector` is (name, extent) of the vectorised loop around stmt. False when there are too many steps."""
    if isinstance(stmt, Seq):
        return all(_collect(s, bound, vector, keys, register_lanes, skip, enumerated) for s in stmt.stmts)
    if isinstance(stmt, Allocate):
        return _collect(stmt.body, bound, vector, keys, register_lanes, skip, enumerated)
    if isinstance(stmt, IfThenElse):
        return all(_collect(body, bound, vector, keys, register_lanes, skip, enumerated)
                   for body in (stmt.then_body, stmt.else_body) if body is not None)
    if isinstance(stmt, For):
        if stmt.kind == "vectorized":
            return _collect(stmt.body, bound, (stmt.var.name, stmt.extent), keys, register_lanes, skip, enumerated)
        if stmt.kind != "unrolled":   # a rolled loop's loads change every iteration: left symbolic
            return _collect(stmt.body, bound, vector, keys, register_lanes, skip, enumerated)
        for value in range(stmt.extent):
            enumerated[0] += 1
            if enumerated[0] > MAX_ENUMERATED or not _collect(
                    stmt.body, {**bound, stmt.var.name: value}, vector, keys, register_lanes, skip, enumerated):
                return False
        return True
    if isinstance(stmt, Store):
        for node in walk(stmt.value):
            if isinstance(node, Load) and node.tensor not in skip:
                key, registers = _load_key(node, bound, vector, register_lanes)
                if key is not None:
                    keys[key] = registers
    return True


def _load_key(load, bound, vector, register_lanes):
    """(the element(s) a load reads with `bound` substituted, as a hashable key; the registers it fills),
    or (None, 0) where an index mixes the unrolled loops with others under // or % (such a load is
    not compared across steps). Terms of no unrolled loop (a fused parallel loop's quotients) are
    kept as printed: they are the same at every step."""
    inner = set(bound) | ({vector[0]} if vector else set())
    forms, vectorised = [], False
    for index in access_indices(load):
        terms = affine.split_terms(index, inner)
        if terms is None:
            return None, 0
        inner_terms, outer_terms, offset = terms
        lanes = 0
        for scale, term in inner_terms:
            if isinstance(term, IterVar) and term.name not in bound:   # the vectorised loop
                lanes += scale
                continue
            value = _value(term, bound)
            if value is None:
                return None, 0
            offset += scale * value
        vectorised |= lanes != 0
        forms.append((lanes, offset, tuple(sorted((scale, format_expr(term)) for scale, term in outer_terms))))
    registers = -(-vector[1] // max(1, register_lanes)) if vectorised else 1
    return (load.tensor, tuple(forms)), registers


def _value(term, bound):
    """An index term of the unrolled loops' variables, evaluated; None if it uses another loop."""
    if isinstance(term, IterVar):
        return bound.get(term.name)
    form = affine.affine_form(term)
    if form is not None:
        coefficients, offset = form
        if not set(coefficients) <= set(bound):
            return None
        return offset + sum(coefficient * bound[name] for name, coefficient in coefficients.items())
    span = affine.interval(term, {name: (value, value) for name, value in bound.items()})
    return span[0] if span is not None and span[0] == span[1] else None
