"""Lowering: a computation and an applied schedule become one loop-IR kernel.

The passes, in order:
1. define each stage: its axes and body (cache stages copy; a write-cached node copies out);
2. infer regions, consumers first: a stage computed at a consumer's loop covers only what the
   loops inside that loop read (from affine accesses; the whole tensor where not affine);
3. replay splits and fuses to express every axis in the stage's own loop variables, with a
   guard for each ceil-divided split, placed at the shallowest loop that defines it;
4. rewrite bodies: inlined stages are substituted, loads are redirected to caches and to
   region-local buffers;
5. build each nest: reductions get their init just inside the loops outside the first reduce
   loop (as TVM does), attached stages are emitted at the top of their anchor loop;
6. store blocked tensors in their blocked layouts (codegen.layout).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from flexsched import dtypes
from flexsched.affine import interval, monotone_span, split_terms
from flexsched.errors import FlexschedError
from flexsched.expr import (Binary, Call, Cast, Compare, Const, IterVar, Load, Logical, Reduce, Select,
                            as_expr, binary, iter_vars_of, walk)
from flexsched.merge_axes import merge_contiguous_axes
from flexsched.schedule import copy_axis_name
from flexsched.tensor import Tensor

from .ir import Allocate, Buffer, For, IfThenElse, PrimFunc, Store, loop_var, seq
from .layout import apply_layouts

_LOOP_KINDS = {"": "serial", "parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled",
               "pipeline": "serial"}


class LoweringError(FlexschedError, ValueError):
    """A schedule the lowering cannot express (it names the stage and what is missing)."""


@dataclass(frozen=True)
class Lowered:
    """A kernel and the role of its parameters: inputs, outputs, then workspaces it needs."""

    func: PrimFunc
    inputs: tuple
    outputs: tuple
    workspaces: tuple  # Buffers the caller allocates for intermediate stages at root
    blocked: tuple = ()  # layout.BlockedParam of each input or output passed in a blocked layout
    views: tuple = ()    # (name, the caller's shape) of each input or output whose axes merged (a reshape)


@dataclass
class _Nest:
    """Everything known about one stage while lowering it."""

    stage: object
    axes: list
    reduce_axes: list
    body: object
    combiner: str | None
    extents: dict = field(default_factory=dict)      # root axis name -> trip count (region for attached)
    region_min: dict = field(default_factory=dict)   # spatial axis name -> Expr of the region's origin
    buffer: Buffer | None = None
    loop_vars: dict = field(default_factory=dict)    # leaf loop name -> loop variable
    leaf_extents: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)       # root axis name -> Expr in leaf loop variables
    guards: list = field(default_factory=list)       # (condition, leaf loop names it uses)


def lower(task, state, name="kernel"):
    """The Lowered kernel of task under the ScheduleState state."""
    tensors = merge_contiguous_axes(tuple(task.outputs))   # as analyze() gave them to the schedule
    nests = {stage_name: _define(stage, tensors, state) for stage_name, stage in state.stages.items()
             if stage.attach != "inline"}
    inlined = {s.name: _define(s, tensors, state) for s in state.stages.values() if s.attach == "inline"}
    outputs = {t.name for t in task.outputs}
    for nest in _consumers_first(nests):
        _infer_region(nest, nests, tensors, inlined)
    interface = (*task.inputs, *task.outputs)
    params = {t.name: Buffer(t.name, tensors.get(t.name, t).shape, t.dtype) for t in interface}
    workspaces = []
    for nest in nests.values():
        _split_axes(nest)
        if nest.stage.attach == "root":
            if nest.stage.name in params:
                nest.buffer = params[nest.stage.name]
            else:
                nest.buffer = Buffer(_ident(nest.stage.name), nest.stage.shape, nest.body.dtype)
                workspaces.append(nest.buffer)
        else:
            shape = tuple(nest.extents[axis.name] for axis in nest.axes)
            nest.buffer = Buffer(_ident(nest.stage.name), shape, nest.body.dtype, _scope(nest.stage))
    buffers = {**params, **{n: nest.buffer for n, nest in nests.items()}}
    body = seq(*(_build(nest, nests, buffers, inlined) for nest in _root_order(nests, inlined)))
    missing = outputs - set(nests)
    if missing:
        raise LoweringError(f"output '{sorted(missing)[0]}' has no stage")
    ordered = [params[t.name] for t in task.inputs] + [params[t.name] for t in task.outputs] + workspaces
    inputs, outputs = tuple(t.name for t in task.inputs), tuple(t.name for t in task.outputs)
    layouts = {_ident(name): blockings for name, blockings in state.layouts.items()}
    func, blocked, _ = apply_layouts(PrimFunc(name, tuple(ordered), body), layouts, inputs, outputs)
    views = tuple((t.name, t.shape) for t in interface if params[t.name].shape != t.shape)
    return Lowered(func, inputs, outputs, func.params[len(inputs) + len(outputs):], blocked, views)


def _root_order(nests, inlined):
    """The stages at root, each after the root stages it reads, directly or through inlined
    stages and the stages computed inside it (a read cache made at root comes before its reader)."""
    stages = {**{name: nest.stage for name, nest in nests.items()}, **{n: i.stage for n, i in inlined.items()}}

    def needs(name, seen):
        found = set()
        for stage in [stages[name]] + [s for s in stages.values() if s.attach == "at" and s.attach_to[0] == name]:
            for read in stage.reads:
                if read in seen or read not in stages:
                    continue
                seen.add(read)
                found |= {read} if stages[read].attach == "root" else needs(read, seen)
        return found

    roots = [name for name, nest in nests.items() if nest.stage.attach == "root"]
    order, placed = [], set()
    while len(order) < len(roots):
        for name in roots:
            if name not in placed and needs(name, {name}) <= placed:
                order.append(nests[name])
                placed.add(name)
                break
        else:
            raise LoweringError("stages at root read each other in a cycle")
    return order


def _ident(name):
    return name.replace(".", "_")


def _scope(stage):
    return stage.scope if stage.scope in ("local", "shared") else "local"


# ---------------------------------------------------------------- 1. definitions

def _define(stage, tensors, state):
    """Axes, reduce axes and body of a stage, before any rewriting."""
    if stage.cache_of and stage.cache_of in tensors and stage.name != stage.cache_of and \
            state.stages.get(stage.cache_of) is not None and state.stages[stage.cache_of].reads == [stage.name]:
        tensor = tensors[stage.cache_of]  # a write cache computes what its node defined
        return _from_tensor(stage, tensor)
    if stage.cache_of:  # a read cache copies its source
        source = _source_tensor(stage.cache_of, tensors, state)
        # The copy's root axes, one per dimension: its loops may since have been split or reordered.
        axes = [IterVar(copy_axis_name(stage.name, dim), extent, "spatial") for dim, extent in enumerate(stage.shape)]
        return _Nest(stage, axes, [], Load(source, tuple(axes), source.dtype), None)
    tensor = tensors[stage.name]
    caches = [s for s in state.stages.values() if s.cache_of == stage.name and stage.reads == [s.name]]
    if caches:  # this node copies its write cache out
        cache = _source_tensor(caches[0].name, tensors, state)
        return _Nest(stage, list(tensor.axes), [], Load(cache, tuple(tensor.axes), tensor.dtype), None)
    return _from_tensor(stage, tensor)


def _from_tensor(stage, tensor):
    body = tensor.body
    if isinstance(body, Reduce):
        return _Nest(stage, list(tensor.axes), list(body.axes), body.source, body.combiner)
    return _Nest(stage, list(tensor.axes), [], body, None)


def _source_tensor(name, tensors, state):
    """A Tensor standing for a stage or input (cache stages get a placeholder-like Tensor)."""
    if name in tensors:
        return tensors[name]
    return Tensor(name, tuple(state.tensor_shapes[name]), _stage_dtype(name, tensors, state))


def _stage_dtype(name, tensors, state):
    stage = state.stages[name]
    return tensors[stage.cache_of].dtype if stage.cache_of in tensors else \
        _stage_dtype(stage.cache_of, tensors, state)


# ---------------------------------------------------------------- 2. regions

def _consumers_first(nests):
    """Stages ordered so that each attached stage comes after the stage it is attached to and
    after the stages that read it (its region is what they read)."""
    order, placed = [], set()
    while len(order) < len(nests):
        progressed = False
        for name, nest in nests.items():
            anchor = nest.stage.attach_to[0] if nest.stage.attach == "at" else None
            readers = _attached_readers(nest, nests) if anchor else []
            if name not in placed and (anchor is None or anchor in placed) and \
                    all(reader.stage.name in placed for reader in readers):
                order.append(nest)
                placed.add(name)
                progressed = True
        if not progressed:
            raise LoweringError("stages are computed at each other in a cycle")
    return order


def _infer_region(nest, nests, tensors, inlined):
    """Trip counts of a stage's axes: the full shape at root, the region read at its anchor."""
    for axis in nest.reduce_axes:
        nest.extents[axis.name] = axis.extent
    for axis in nest.axes:
        nest.extents[axis.name] = axis.extent
        nest.region_min[axis.name] = as_expr(0, "int64")
    if nest.stage.attach != "at":
        return
    consumer_name, anchor = nest.stage.attach_to
    consumer = nests[consumer_name]
    _split_axes(consumer)  # its leaf loops, with its own region already known
    names = list(consumer.loop_vars)
    inner = {consumer.loop_vars[name].name for name in names[names.index(anchor) + 1:]}
    if nest.stage.scope == "shared":  # one copy serves every thread of a block
        inner |= _thread_loop_names(consumer, nests)
    reads = [load for load in _rewritten_loads(consumer, nests, inlined) if load.tensor.name == nest.stage.name]
    for reader in _attached_readers(nest, nests):  # readers computed inside the anchor loop
        inner |= _enclosed_loop_names(reader, consumer, anchor, nests)
        reads += [load for load in _rewritten_loads(reader, nests, inlined) if load.tensor.name == nest.stage.name]
    for dim, axis in enumerate(nest.axes):
        low, size = _dim_region([load.indices[dim] for load in reads], inner, axis.extent)
        nest.region_min[axis.name] = low
        nest.extents[axis.name] = size


def _attached_readers(nest, nests):
    """Stages other than its anchor that read an attached stage (they are computed inside the
    anchor, so one copy made at the anchor's loop serves all of them)."""
    anchor = nest.stage.attach_to[0]
    return [other for other in nests.values()
            if nest.stage.name in other.stage.reads and other.stage.name != anchor]


def _enclosed_loop_names(reader, anchor_nest, anchor_loop, nests):
    """Loop variables that vary inside anchor_loop of anchor_nest on the way down to reader:
    all of reader's own and of each stage between, and the anchor's loops inside anchor_loop."""
    names, nest = set(), reader
    while True:
        _split_axes(nest)
        names |= {var.name for var in nest.loop_vars.values()}
        if nest.stage.attach != "at":
            raise LoweringError(f"stage '{reader.stage.name}' reads a copy made at loop '{anchor_loop}' of "
                                f"'{anchor_nest.stage.name}' but is not computed inside it")
        outer_name, loop = nest.stage.attach_to
        outer = nests[outer_name]
        if outer is anchor_nest:
            loops = list(outer.loop_vars)
            if loops.index(loop) < loops.index(anchor_loop):
                raise LoweringError(f"stage '{reader.stage.name}' is computed at loop '{loop}' of "
                                    f"'{outer_name}', outside the loop '{anchor_loop}' where the copy it "
                                    "reads is made")
            return names | {outer.loop_vars[name].name for name in loops[loops.index(anchor_loop) + 1:]}
        nest = outer


def _thread_loop_names(nest, nests):
    """Loop variables bound to threads or virtual threads in a stage and the stages it is
    computed inside (what a shared buffer read by all of them must cover)."""
    names = set()
    while True:
        _split_axes(nest)
        names |= {nest.loop_vars[loop.name].name for loop in nest.stage.loops
                  if loop.annotation == "vthread" or loop.annotation.startswith("threadIdx")}
        if nest.stage.attach != "at":
            return names
        nest = nests[nest.stage.attach_to[0]]


def _dim_region(indices, inner, full):
    """(origin Expr, size) of one dimension as the loops named in `inner` run over their ranges;
    the whole dimension when an index mixes inner and outer loops, an inner part has no bounds,
    or the loads disagree outside the inner loops."""
    whole = (as_expr(0, "int64"), full)
    parts = [split_terms(index, inner) for index in indices]
    if not parts:
        return whole
    if any(part is None for part in parts):   # inner and outer loops meet under // (grouped channels)
        return _monotone_region(indices, inner, full)
    outers = [_outer_key(part[1]) for part in parts]
    if any(outer != outers[0] for outer in outers):
        return whole
    lows, highs = [], []
    for inner_terms, _, constant in parts:
        low = high = constant
        for coefficient, term in inner_terms:
            bounds = interval(term)
            if bounds is None:
                return whole
            ends = (coefficient * bounds[0], coefficient * bounds[1])
            low, high = low + min(ends), high + max(ends)
        lows.append(low)
        highs.append(high)
    size = max(highs) - min(lows) + 1
    if size >= full:
        return whole
    origin = as_expr(min(lows), "int64")
    for coefficient, term in parts[0][1]:
        origin = origin + term * coefficient
    return origin, size


def _monotone_region(indices, inner, full):
    """The region of indices that grow with every inner loop (affine.monotone_span), when they
    all start at the same origin; the whole dimension otherwise."""
    spans = [monotone_span(index, inner) for index in indices]
    if any(span is None for span in spans) or len({str(origin) for origin, _ in spans}) != 1:
        return as_expr(0, "int64"), full
    size = max(count for _, count in spans)
    return (as_expr(0, "int64"), full) if size >= full else (spans[0][0], size)


def _outer_key(outer_terms):
    """The outer terms of an index as comparable text: {term: summed coefficient}."""
    key = {}
    for coefficient, term in outer_terms:
        key[str(term)] = key.get(str(term), 0) + coefficient
    return {text: coefficient for text, coefficient in key.items() if coefficient}


# ---------------------------------------------------------------- 3. splits and fuses

def _split_axes(nest):
    """Leaf loop variables and each root axis as an Expr of them (idempotent)."""
    if nest.loop_vars:
        return
    stage = nest.stage
    extents = dict(nest.extents)
    for relation in stage.relations:  # forward: trip counts of every loop
        if relation[0] == "split":
            _, parent, children, factors = relation
            outer = -(-extents[parent] // math.prod(factors[1:]))
            extents.update(zip(children, (outer, *factors[1:])))
        else:
            _, children, fused = relation
            extents[fused] = math.prod(extents[c] for c in children)
    for loop in stage.loops:
        var_name = f"{_ident(stage.name)}.{loop.name.replace('+', '_')}"
        nest.loop_vars[loop.name] = loop_var(var_name, extents[loop.name])
        nest.leaf_extents[loop.name] = extents[loop.name]
    # A loop of one iteration contributes nothing to an index.
    values = {name: var if extents[name] > 1 else as_expr(0, "int64") for name, var in nest.loop_vars.items()}
    for relation in reversed(stage.relations):  # backward: parents from children
        if relation[0] == "fuse":
            _, children, fused = relation
            rest = math.prod(extents[c] for c in children)
            for child in children:
                rest //= extents[child]
                value = values[fused] // rest
                values[child] = value % extents[child] if child != children[0] else value
        else:
            _, parent, children, _ = relation
            value = values[children[0]]
            for child in children[1:]:
                value = value * extents[child] + values[child]
            values[parent] = value
            if math.prod(extents[c] for c in children) != extents[parent]:
                nest.guards.append((value < extents[parent], parent))
    nest.guards = [(cond, _loops_used(nest, cond)) for cond, _ in nest.guards]
    spatial = {axis.name for axis in nest.axes}
    for axis in (*nest.axes, *nest.reduce_axes):
        value = values.get(axis.name, as_expr(0, "int64"))
        if axis.name in spatial and nest.stage.attach == "at" and not _region_inside(nest, axis):
            guard_value = value + nest.region_min[axis.name]
            nest.guards.append((_in_range(guard_value, axis.extent), _loops_used(nest, value)))
        nest.values[axis.name] = value


def _region_inside(nest, axis):
    """Whether the region of an attached stage provably stays inside the axis for every value of
    the enclosing loops (then its copy needs no guard and can be vectorised)."""
    bounds = interval(nest.region_min[axis.name])
    if bounds is None:  # a term interval arithmetic does not cover
        return False
    low, high = bounds
    return low >= 0 and high + nest.extents[axis.name] <= axis.extent


def _loops_used(nest, expr):
    """Names of this stage's loops that an Expr uses."""
    by_var = {var.name: loop for loop, var in nest.loop_vars.items()}
    return {by_var[v.name] for v in iter_vars_of(expr) if v.name in by_var}


def _in_range(value, extent):
    return (value >= 0) & (value < extent)


# ---------------------------------------------------------------- 4. rewriting

def _rewrite(expr, nest, nests, inlined, buffers, env):
    """expr with axes replaced by env, inlined stages substituted and loads redirected."""
    def go(node):
        if isinstance(node, IterVar):
            return env.get(id(node), node)
        if isinstance(node, Const):
            return node
        if isinstance(node, Load):
            indices = tuple(go(index) for index in node.indices)
            target = _redirect(nest.stage, node.tensor.name, nests, inlined)
            if target in inlined:
                producer = inlined[target]
                inner_env = {id(axis): index for axis, index in zip(producer.axes, indices)}
                return _rewrite(producer.body, nest, nests, inlined, buffers, inner_env)
            if target in nests and nests[target].stage.attach == "at":
                producer = nests[target]
                # (a stage whose region is not inferred yet reads at 0: only region inference
                # looks at such loads, and only at the stage it is inferring)
                # A dimension one element wide is read at 0: saying so keeps the index constant
                # where the subtraction would not fold (e.g. a fused loop's quotient).
                indices = tuple(as_expr(0, "int64") if producer.extents.get(axis.name) == 1
                                else index - producer.region_min.get(axis.name, 0)
                                for index, axis in zip(indices, producer.axes))
            buffer = buffers.get(target) if buffers is not None else None
            return Load(buffer if buffer is not None else _Named(target, node.tensor), indices, node.dtype)
        if isinstance(node, Binary):
            return binary(node.op, go(node.a), go(node.b)) if dtypes.is_int(node.dtype) else \
                Binary(node.op, go(node.a), go(node.b), node.dtype)
        if isinstance(node, Compare):
            return Compare(node.op, go(node.a), go(node.b))
        if isinstance(node, Logical):
            return Logical(node.op, go(node.a), None if node.b is None else go(node.b))
        if isinstance(node, Select):
            return Select(go(node.cond), go(node.true_value), go(node.false_value), node.dtype)
        if isinstance(node, Call):
            return Call(node.func, go(node.arg), node.dtype)
        if isinstance(node, Cast):
            return Cast(go(node.value), node.dtype)
        raise LoweringError(f"cannot lower expression {node!r}")

    return go(expr)


@dataclass(frozen=True, eq=False)
class _Named:
    """A load target known only by name (while inferring regions, before buffers exist)."""

    name: str
    tensor: object

    @property
    def shape(self):
        return self.tensor.shape


def _redirect(stage, name, nests, inlined):
    """The stage a load of `name` reads from inside `stage` (a cache of it, if the stage reads one)."""
    if name in stage.reads or name in inlined:
        return name
    for read in stage.reads:
        producer = nests.get(read) or inlined.get(read)
        if producer is not None and producer.stage.cache_of == name:
            return read
    return name


def _env(nest):
    """Each axis of the definition as an Expr of the stage's loops (plus its region's origin)."""
    env = {id(axis): nest.values[axis.name] for axis in nest.reduce_axes}
    env.update({id(axis): nest.values[axis.name] + nest.region_min[axis.name] for axis in nest.axes})
    return env


def _rewritten_loads(nest, nests, inlined):
    body = _rewrite(nest.body, nest, nests, inlined, None, _env(nest))
    return [node for node in walk(body) if isinstance(node, Load)]


# ---------------------------------------------------------------- 5. nests

def _identity(combiner, dtype):
    if combiner == "sum":
        return as_expr(0.0 if dtypes.is_float(dtype) else 0, dtype)
    if dtypes.is_float(dtype):
        return Const(float("-inf") if combiner == "max" else float("inf"), dtype)
    bits = 31 if dtype == "int32" else 63
    return Const(-(2 ** bits) if combiner == "max" else 2 ** bits - 1, dtype)


def _combine(combiner, old, new):
    return {"sum": lambda: Binary("+", old, new, old.dtype),
            "max": lambda: Binary("max", old, new, old.dtype),
            "min": lambda: Binary("min", old, new, old.dtype)}[combiner]()


def _build(nest, nests, buffers, inlined):
    """The loop nest of a stage, with the stages attached to its loops emitted inside."""
    stage = nest.stage
    value = _rewrite(nest.body, nest, nests, inlined, buffers, _env(nest))
    out_index = tuple(nest.values[axis.name] for axis in nest.axes)
    leaves = list(nest.loop_vars)
    attached = {}
    for other in nests.values():
        if other.stage.attach == "at" and other.stage.attach_to[0] == stage.name:
            attached.setdefault(other.stage.attach_to[1], []).append(other)
    build = (nest, nests, buffers, inlined)

    if nest.combiner is None:
        return _with_root_guards(nest, _wrap(build, leaves, 0, Store(nest.buffer, out_index, value), attached))
    first_reduce = next(i for i, loop in enumerate(stage.loops) if loop.kind == "reduce")
    outer = leaves[:first_reduce]
    spatial_rest = [loop.name for loop in stage.loops[first_reduce:] if loop.kind == "spatial"]
    init = Store(nest.buffer, out_index, _identity(nest.combiner, nest.buffer.dtype))
    current = Load(nest.buffer, out_index, nest.buffer.dtype)
    update = Store(nest.buffer, out_index, _combine(nest.combiner, current, value))
    inner = seq(_wrap(build, outer + spatial_rest, len(outer), init, {}),
                _wrap(build, leaves, len(outer), update, attached))
    return _with_root_guards(nest, _wrap(build, outer, 0, inner, attached))


def _wrap(build, names, start, stmt, attached):
    """Loops names[start:] around stmt, innermost last; each loop gets the guards it completes
    and, at the top of its body, the stages attached to it."""
    nest, nests, buffers, inlined = build
    annotation = {loop.name: loop.annotation for loop in nest.stage.loops}
    for depth in range(len(names), start, -1):
        name = names[depth - 1]
        defined = set(names[:depth])
        for cond, uses in nest.guards:
            if uses and uses <= defined and name in uses:
                stmt = IfThenElse(cond, stmt)
        for producer in reversed(_producers_first(attached.get(name, []))):
            stmt = Allocate(producer.buffer, seq(_build(producer, nests, buffers, inlined), stmt))
        kind = _loop_kind(annotation.get(name, ""))
        stmt = For(nest.loop_vars[name], nest.leaf_extents[name], kind, stmt)
    return stmt


def _producers_first(stages):
    """Stages attached at one loop, each after the ones it reads (a shared packed panel comes
    before the register tile that reads it)."""
    order, left = [], list(stages)
    while left:
        ready = next(s for s in left if not any(o.stage.name in s.stage.reads for o in left if o is not s))
        order.append(ready)
        left.remove(ready)
    return order


def _with_root_guards(nest, stmt):
    """Guards that use no loop at all (rare) wrap the whole nest."""
    for cond, uses in nest.guards:
        if not uses:
            stmt = IfThenElse(cond, stmt)
    return stmt


def _loop_kind(annotation):
    """The IR kind of an annotated loop; GPU thread axes pass through for the back ends."""
    return _LOOP_KINDS.get(annotation, annotation)
