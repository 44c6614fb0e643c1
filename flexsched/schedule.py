"""Schedules as data: an ordered list of primitive steps, each checking its own legality.

A step names the node (a compute tensor) it acts on and the loops by name. Applying a
schedule to the analysis of a computation replays the steps on a ScheduleState; a step
that does not fit refuses with one line naming the node, the loop and the value. Generated
configs and hand-written templates both produce Schedules, so they compare on equal terms,
and a Schedule round-trips through JSON exactly.
"""

from __future__ import annotations

import json
import math
import dataclasses
import functools
from dataclasses import asdict, dataclass, field, fields, replace
from typing import ClassVar

from .errors import FlexschedError

THREAD_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "vthread",
               "threadIdx.x", "threadIdx.y", "threadIdx.z")
CACHE_SCOPES = ("shared", "local")
MAX_UNROLL = 1024
MAX_VECTOR_LANES = 64


class ScheduleError(FlexschedError, ValueError):
    """A schedule step that is illegal where it is applied."""


# ---------------------------------------------------------------- state

@dataclass(frozen=True)
class LoopState:
    """One loop of a stage's current nest."""

    name: str
    extent: int
    kind: str                  # "spatial" or "reduce"
    annotation: str = ""       # "", "unroll", "vectorize", "parallel", "pipeline" or a THREAD_AXES name
    guarded: bool = False      # from a ceil-divided split: iterations past the original extent are skipped


@dataclass
class Stage:
    """A node being scheduled: its loop nest, where it is computed, what it reads."""

    name: str
    loops: list                # LoopState, outermost first
    reads: list                # names of the tensors the stage reads
    consumers: list            # names of the stages that read this one
    shape: tuple
    is_output: bool
    attach: str = "root"       # "root", "inline" or "at"
    attach_to: tuple = ()      # (consumer stage, loop) when attach == "at"
    scope: str = "global"      # "global", "shared" or "local"
    cache_of: str = ""         # the tensor a cache stage copies, or the stage a write cache feeds
    relations: list = field(default_factory=list)  # ("split", parent, children, factors) / ("fuse", children, fused)
    buffers: list = field(default_factory=list)    # FPGA: (tensor, loop) held on chip
    partitions: list = field(default_factory=list)  # FPGA: (tensor, dim, factor)
    pipeline_ii: dict = field(default_factory=dict)  # FPGA: loop -> initiation interval

    @property
    def has_reduce(self):
        return any(loop.kind == "reduce" for loop in self.loops)

    def loop_index(self, name, step):
        for position, loop in enumerate(self.loops):
            if loop.name == name:
                return position
        raise ScheduleError(f"{step}: node '{self.name}' has no loop '{name}'; loops: "
                            f"{', '.join(loop.name for loop in self.loops)}")


class ScheduleState:
    """The stages of a computation with every applied step reflected in them."""

    def __init__(self, info):
        self.tensor_shapes = {t.name: tuple(t.shape) for t in info.tensors}
        self.inputs, self.outputs = tuple(info.inputs), tuple(info.outputs)
        self.layouts = {}           # tensor -> (Blocking, ...) in the order applied
        self.stages = {}
        for node in info.nodes:
            loops = [LoopState(loop.name, loop.extent, loop.kind) for loop in node.loops]
            self.stages[node.name] = Stage(node.name, loops, list(node.inputs), list(node.consumers),
                                           tuple(node.shape), node.name in info.outputs)
        self.steps = []

    def stage(self, name, step):
        if name not in self.stages:
            raise ScheduleError(f"{step}: no node '{name}'; nodes: {', '.join(self.stages)}")
        stage = self.stages[name]
        if stage.attach == "inline":
            raise ScheduleError(f"{step}: node '{name}' is inlined and has no loops of its own")
        return stage

    def apply(self, step):
        """Apply one step; every step checks all it needs before changing anything, so a
        refused step leaves the state as it was."""
        step.apply(self)
        self.steps.append(step)
        return self

    def attached_at(self, stage_name, loop=None):
        """Stages computed at a loop of stage_name (any loop when loop is None)."""
        return [other.name for other in self.stages.values() if other.attach == "at"
                and other.attach_to[0] == stage_name and (loop is None or other.attach_to[1] == loop)]

    def describe(self):
        """The loop nests as text, one stage per paragraph (for people reading a schedule)."""
        lines = []
        for stage in self.stages.values():
            where = {"root": "root", "inline": "inlined"}.get(stage.attach, f"at {'.'.join(stage.attach_to)}")
            lines.append(f"{stage.name} ({where}, {stage.scope}):")
            for depth, loop in enumerate(stage.loops):
                tags = ", ".join(t for t in (loop.annotation, "guarded" if loop.guarded else "") if t)
                lines.append(f"{'  ' * (depth + 1)}for {loop.name} in 0..{loop.extent}"
                             + (f"  [{tags}]" if tags else ""))
        return "\n".join(lines)


# ---------------------------------------------------------------- steps

_STEP_KINDS = {}


def _step(cls):
    cls = dataclass(frozen=True)(cls)
    _STEP_KINDS[cls.kind] = cls
    return cls


class Step:
    """Base of the primitive steps; `kind` names the primitive in JSON."""

    kind: ClassVar[str] = ""

    def label(self):
        where = f" on node '{getattr(self, 'node', getattr(self, 'tensor', ''))}'"
        loop = getattr(self, "loop", None)
        return f"{self.kind}{where}" + (f", loop '{loop}'" if loop else "")

    def to_dict(self):
        return {"kind": self.kind, **{k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}}


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_annotatable(stage, position, step):
    loop = stage.loops[position]
    if loop.annotation:
        raise ScheduleError(f"{step.label()}: loop '{loop.name}' of node '{stage.name}' is already "
                            f"'{loop.annotation}'")
    return loop


def _check_not_anchor(state, stage, loops, step):
    """Loops that other stages are computed at cannot be split or fused away."""
    for loop in loops:
        attached = state.attached_at(stage.name, loop)
        if attached:
            raise ScheduleError(f"{step.label()}: '{attached[0]}' is computed at loop '{loop}' of node "
                                f"'{stage.name}'; transform the loop before compute_at")


def _check_nest(stage, loops, step):
    """Invariants over a whole candidate nest, checked before a step that changes it commits."""
    annotations = [loop.annotation for loop in loops]
    vectorized = [p for p, a in enumerate(annotations) if a == "vectorize"]
    if vectorized and vectorized[0] != len(loops) - 1:
        raise ScheduleError(f"{step.label()}: vectorized loop '{loops[vectorized[0]].name}' of node "
                            f"'{stage.name}' must stay innermost")
    rank = {"blockIdx": 0, "vthread": 1, "threadIdx": 2}
    bound = [rank[a.split(".")[0]] for a in annotations if a in THREAD_AXES]
    if bound != sorted(bound):
        raise ScheduleError(f"{step.label()}: node '{stage.name}' binds loops out of order; block axes "
                            "must enclose vthreads, which enclose thread axes")


@_step
class Split(Step):
    """Split a loop into len(factors) loops, outer to inner; the outer factor is
    ceil(extent / product of the others), with a boundary guard when it does not divide."""

    kind: ClassVar[str] = "split"
    node: str
    loop: str
    factors: tuple

    def apply(self, state):
        stage = state.stage(self.node, self.label())
        position = stage.loop_index(self.loop, self.label())
        loop = _check_annotatable(stage, position, self)
        _check_not_anchor(state, stage, [loop.name], self)
        factors = tuple(self.factors)
        if len(factors) < 2 or any(not _is_count(f) or f < 1 for f in factors):
            raise ScheduleError(f"{self.label()}: factors must be two or more positive integers, got "
                                f"{list(factors)}")
        inner = math.prod(factors[1:])
        if factors[0] != -(-loop.extent // inner):
            raise ScheduleError(f"{self.label()}: factors {list(factors)} do not fit extent {loop.extent}: the "
                                f"outer factor must be ceil({loop.extent}/{inner}) = {-(-loop.extent // inner)}")
        guarded = loop.guarded or math.prod(factors) != loop.extent
        children = [LoopState(f"{loop.name}.{level}", f, loop.kind, guarded=guarded)
                    for level, f in enumerate(factors)]
        taken = {other.name for other in stage.loops}
        for child in children:
            if child.name in taken:
                raise ScheduleError(f"{self.label()}: node '{stage.name}' already has a loop '{child.name}'")
        stage.loops[position:position + 1] = children
        stage.relations.append(("split", loop.name, tuple(c.name for c in children), factors))


@_step
class Reorder(Step):
    """Put the named loops, in this order, into the positions they occupy together."""

    kind: ClassVar[str] = "reorder"
    node: str
    order: tuple

    def apply(self, state):
        stage = state.stage(self.node, self.label())
        if len(set(self.order)) != len(self.order):
            raise ScheduleError(f"{self.label()}: a loop is listed twice in {list(self.order)}")
        positions = sorted(stage.loop_index(name, self.label()) for name in self.order)
        by_name = {loop.name: loop for loop in stage.loops}
        loops = list(stage.loops)
        for position, name in zip(positions, self.order):
            loops[position] = by_name[name]
        _check_nest(stage, loops, self)
        stage.loops = loops


@_step
class Fuse(Step):
    """Fuse adjacent loops of one kind (outer first) into one loop."""

    kind: ClassVar[str] = "fuse"
    node: str
    loops: tuple

    def apply(self, state):
        stage = state.stage(self.node, self.label())
        if len(self.loops) < 2:
            raise ScheduleError(f"{self.label()}: fuse needs at least two loops, got {list(self.loops)}")
        positions = [stage.loop_index(name, self.label()) for name in self.loops]
        if positions != list(range(positions[0], positions[0] + len(positions))):
            raise ScheduleError(f"{self.label()}: loops {list(self.loops)} of node '{stage.name}' are not "
                                "adjacent in this order")
        parts = [_check_annotatable(stage, p, self) for p in positions]
        _check_not_anchor(state, stage, self.loops, self)
        if len({loop.kind for loop in parts}) != 1:
            raise ScheduleError(f"{self.label()}: cannot fuse spatial and reduce loops {list(self.loops)} of "
                                f"node '{stage.name}'")
        fused = LoopState("+".join(self.loops), math.prod(loop.extent for loop in parts), parts[0].kind,
                          guarded=any(loop.guarded for loop in parts))
        stage.loops[positions[0]:positions[-1] + 1] = [fused]
        stage.relations.append(("fuse", tuple(self.loops), fused.name))


class _Annotation(Step):
    """A step that tags one loop with its kind; subclasses say what else it requires."""

    def check(self, stage, position, loop):
        """Extra legality of this annotation on this loop."""

    def apply(self, state):
        stage = state.stage(self.node, self.label())
        position = stage.loop_index(self.loop, self.label())
        loop = _check_annotatable(stage, position, self)
        self.check(stage, position, loop)
        loops = list(stage.loops)
        loops[position] = replace(loop, annotation=self.tag())
        _check_nest(stage, loops, self)
        stage.loops = loops
        self.record(stage, loop)

    def record(self, stage, loop):
        """Anything beyond the tag that the stage keeps (after every check passed)."""

    def tag(self):
        return self.kind


def _bounded_later(stage):
    """A stage computed at a consumer loop runs its loops over the region that loop needs,
    known only when lowering infers bounds; the back end checks those extents."""
    return stage.attach == "at"


@_step
class Unroll(_Annotation):
    kind: ClassVar[str] = "unroll"
    node: str
    loop: str

    def check(self, stage, position, loop):
        if loop.extent > MAX_UNROLL and not _bounded_later(stage):
            raise ScheduleError(f"{self.label()}: extent {loop.extent} is over the unroll limit {MAX_UNROLL}")


@_step
class Vectorize(_Annotation):
    kind: ClassVar[str] = "vectorize"
    node: str
    loop: str

    def check(self, stage, position, loop):
        if loop.kind != "spatial":
            raise ScheduleError(f"{self.label()}: reduce loop '{loop.name}' cannot be vectorized")
        if position != len(stage.loops) - 1:
            raise ScheduleError(f"{self.label()}: only the innermost loop of node '{stage.name}' can be "
                                f"vectorized, not '{loop.name}'")
        if loop.extent > MAX_VECTOR_LANES and not _bounded_later(stage):
            raise ScheduleError(f"{self.label()}: extent {loop.extent} is over {MAX_VECTOR_LANES} lanes")


@_step
class Parallel(_Annotation):
    kind: ClassVar[str] = "parallel"
    node: str
    loop: str

    def check(self, stage, position, loop):
        if loop.kind != "spatial":
            raise ScheduleError(f"{self.label()}: reduce loop '{loop.name}' cannot run in parallel")
        if any(other.annotation == "parallel" for other in stage.loops):
            raise ScheduleError(f"{self.label()}: node '{stage.name}' already has a parallel loop")


@_step
class Bind(_Annotation):
    """Bind a spatial loop to a GPU block, virtual-thread or thread axis."""

    kind: ClassVar[str] = "bind"
    node: str
    loop: str
    axis: str

    def tag(self):
        return self.axis

    def check(self, stage, position, loop):
        if self.axis not in THREAD_AXES:
            raise ScheduleError(f"{self.label()}: unknown thread axis '{self.axis}'; choose one of "
                                f"{', '.join(THREAD_AXES)}")
        if loop.kind != "spatial":
            raise ScheduleError(f"{self.label()}: reduce loop '{loop.name}' cannot be bound to '{self.axis}'")
        if self.axis != "vthread" and any(other.annotation == self.axis for other in stage.loops):
            raise ScheduleError(f"{self.label()}: node '{stage.name}' already binds '{self.axis}'")


@_step
class Pipeline(_Annotation):
    """FPGA: pipeline a loop with an initiation interval (cycles between iterations)."""

    kind: ClassVar[str] = "pipeline"
    node: str
    loop: str
    initiation_interval: int = 1

    def check(self, stage, position, loop):
        if not _is_count(self.initiation_interval) or self.initiation_interval < 1:
            raise ScheduleError(f"{self.label()}: initiation_interval must be a positive integer, got "
                                f"{self.initiation_interval!r}")

    def record(self, stage, loop):
        stage.pipeline_ii[loop.name] = self.initiation_interval


@_step
class ComputeInline(Step):
    """Substitute an elementwise node into its consumers: it gets no loops of its own."""

    kind: ClassVar[str] = "compute_inline"
    node: str

    def apply(self, state):
        stage = state.stage(self.node, self.label())
        if stage.is_output:
            raise ScheduleError(f"{self.label()}: node '{stage.name}' is an output and must be stored")
        if stage.has_reduce:
            raise ScheduleError(f"{self.label()}: node '{stage.name}' has reduce loops and cannot be inlined")
        if stage.relations or any(loop.annotation for loop in stage.loops) or stage.scope != "global":
            raise ScheduleError(f"{self.label()}: node '{stage.name}' is already scheduled; inline it first")
        attached = state.attached_at(stage.name)
        if attached:
            raise ScheduleError(f"{self.label()}: '{attached[0]}' is computed at node '{stage.name}', "
                                "which would have no loops once inlined")
        stage.attach = "inline"
        # Its consumers now read what it read, and its producers feed those consumers.
        for consumer in stage.consumers:
            reads = state.stages[consumer].reads
            position = reads.index(stage.name)
            reads[position:position + 1] = [t for t in stage.reads if t not in reads]
        for producer in stage.reads:
            if producer in state.stages:
                consumers = state.stages[producer].consumers
                position = consumers.index(stage.name)
                consumers[position:position + 1] = [c for c in stage.consumers if c not in consumers]


def _encloses_reader(state, outer, tensor):
    """Whether a stage that reads tensor is computed (directly or through other attached stages)
    inside stage outer: then tensor can be made once at a loop of outer and serve every
    instance of that reader below it (a packed panel shared by many register tiles)."""
    for stage in state.stages.values():
        if tensor not in stage.reads or stage.attach == "inline":
            continue
        seen = set()
        while stage.attach == "at" and stage.name not in seen:
            seen.add(stage.name)
            stage = state.stages[stage.attach_to[0]]
            if stage.name == outer:
                return True
    return False


@_step
class ComputeAt(Step):
    """Compute a producer inside a loop of one of its consumers, or of a stage its consumer is
    computed inside, for the region that loop needs."""

    kind: ClassVar[str] = "compute_at"
    node: str
    consumer: str
    loop: str

    def apply(self, state):
        stage = state.stage(self.node, self.label())
        consumer = state.stage(self.consumer, self.label())
        if stage.is_output and not stage.cache_of:
            raise ScheduleError(f"{self.label()}: node '{stage.name}' is an output and is computed at root")
        if stage.name not in consumer.reads and not _encloses_reader(state, consumer.name, stage.name):
            raise ScheduleError(f"{self.label()}: node '{consumer.name}' does not read '{stage.name}' and "
                                "encloses no stage that does")
        consumer.loop_index(self.loop, self.label())
        stage.attach, stage.attach_to = "at", (consumer.name, self.loop)


def copy_axis_name(cache, dim):
    """The name of a read cache's loop over dimension `dim` of what it copies (before any split)."""
    return f"{cache}.ax{dim}"


def cache_stage_name(tensor, scope, taken):
    """The name of a new cache of tensor: tensor.scope, then tensor.scope1, tensor.scope2, ..."""
    name, number = f"{tensor}.{scope}", 0
    while name in taken:
        number += 1
        name = f"{tensor}.{scope}{number}"
    return name


@_step
class CacheRead(Step):
    """Copy a tensor into shared or local memory for the given readers (a new stage, named by
    cache_stage_name)."""

    kind: ClassVar[str] = "cache_read"
    tensor: str
    scope: str
    readers: tuple

    def apply(self, state):
        if self.scope not in CACHE_SCOPES:
            raise ScheduleError(f"{self.label()}: unknown scope '{self.scope}'; choose one of "
                                f"{', '.join(CACHE_SCOPES)}")
        if self.tensor not in state.tensor_shapes:
            raise ScheduleError(f"{self.label()}: no tensor '{self.tensor}'")
        name = cache_stage_name(self.tensor, self.scope, state.stages)
        if not self.readers:
            raise ScheduleError(f"{self.label()}: name at least one reader of '{self.tensor}'")
        shape = state.tensor_shapes[self.tensor]
        readers = [state.stage(reader, self.label()) for reader in self.readers]
        for stage in readers:
            if self.tensor not in stage.reads:
                raise ScheduleError(f"{self.label()}: node '{stage.name}' does not read '{self.tensor}'")
        for stage in readers:
            stage.reads[stage.reads.index(self.tensor)] = name
        loops = [LoopState(copy_axis_name(name, d), extent, "spatial") for d, extent in enumerate(shape)]
        state.stages[name] = Stage(name, loops, [self.tensor], list(self.readers), shape, False,
                                   scope=self.scope, cache_of=self.tensor)
        state.tensor_shapes[name] = shape
        if self.tensor in state.stages:
            producer = state.stages[self.tensor]
            producer.consumers = [c for c in producer.consumers if c not in self.readers] + [name]


@_step
class CacheWrite(Step):
    """Compute a node into shared or local memory first, then copy it out (before any split)."""

    kind: ClassVar[str] = "cache_write"
    node: str
    scope: str

    def apply(self, state):
        stage = state.stage(self.node, self.label())
        if self.scope not in CACHE_SCOPES:
            raise ScheduleError(f"{self.label()}: unknown scope '{self.scope}'; choose one of "
                                f"{', '.join(CACHE_SCOPES)}")
        if stage.relations or any(loop.annotation for loop in stage.loops):
            raise ScheduleError(f"{self.label()}: cache_write on node '{stage.name}' must come before its "
                                "loops are scheduled")
        attached = state.attached_at(stage.name)
        if attached:
            raise ScheduleError(f"{self.label()}: '{attached[0]}' is computed at a loop of node "
                                f"'{stage.name}'; cache_write must come before compute_at")
        name = f"{stage.name}.{self.scope}"
        if name in state.stages:
            raise ScheduleError(f"{self.label()}: node '{stage.name}' already has a {self.scope} cache")
        cache = Stage(name, list(stage.loops), list(stage.reads), [stage.name], stage.shape, False,
                      scope=self.scope, cache_of=stage.name)
        ordered = {}
        for key, value in state.stages.items():  # the cache computes just before the copy-out
            if key == stage.name:
                ordered[name] = cache
            ordered[key] = value
        state.stages = ordered
        for producer in stage.reads:  # the cache now does the reading
            if producer in state.stages:
                consumers = state.stages[producer].consumers
                consumers[consumers.index(stage.name)] = name
        stage.loops = [loop for loop in stage.loops if loop.kind == "spatial"]
        stage.reads = [name]
        state.tensor_shapes[name] = stage.shape


@_step
class Buffer(Step):
    """FPGA: hold the tile of an input that a loop's body needs in on-chip memory."""

    kind: ClassVar[str] = "buffer"
    node: str
    tensor: str
    loop: str

    def apply(self, state):
        stage = state.stage(self.node, self.label())
        if self.tensor not in stage.reads and self.tensor != stage.name:
            raise ScheduleError(f"{self.label()}: node '{stage.name}' does not access '{self.tensor}'")
        stage.loop_index(self.loop, self.label())
        stage.buffers.append((self.tensor, self.loop))


@_step
class Partition(Step):
    """FPGA: split an on-chip array along one dimension into `factor` banks for parallel access."""

    kind: ClassVar[str] = "partition"
    node: str
    tensor: str
    dim: int
    factor: int

    def apply(self, state):
        stage = state.stage(self.node, self.label())
        if self.tensor not in stage.reads and self.tensor != stage.name:
            raise ScheduleError(f"{self.label()}: node '{stage.name}' does not access '{self.tensor}'")
        shape = state.tensor_shapes[self.tensor]
        if not _is_count(self.dim) or not 0 <= self.dim < len(shape):
            raise ScheduleError(f"{self.label()}: tensor '{self.tensor}' has no dimension {self.dim}")
        if not _is_count(self.factor) or not 1 <= self.factor <= shape[self.dim]:
            raise ScheduleError(f"{self.label()}: factor {self.factor} for dimension {self.dim} of "
                                f"'{self.tensor}' must lie in 1..{shape[self.dim]}")
        stage.partitions.append((self.tensor, self.dim, self.factor))


@dataclass(frozen=True)
class Blocking:
    """One dimension of a stored tensor split by `block`, the inner part moved innermost; with
    `phases`, split into `block` phases in place instead: index i stored at (i % block, i // block)."""

    dim: int
    block: int
    interface: bool = False
    phases: bool = False


def physical_shape(shape, blockings):
    """The shape a tensor is stored in under its blockings: each blocked dimension divided by its
    block in place, then the blocks, innermost last (NCHW with c=16 is N, C/16, H, W, 16); a
    dimension split into phases becomes (phases, extent / phases rounded up) in place (W=16 by 2 is
    2, 8; W=15 is 2, 8 with the last place of the second phase unused)."""
    outer = [(extent,) for extent in shape]
    for blocking in blockings:
        extent = shape[blocking.dim]
        outer[blocking.dim] = (blocking.block, -(-extent // blocking.block)) if blocking.phases \
            else (extent // blocking.block,)
    inner = tuple(blocking.block for blocking in blockings if not blocking.phases)
    return tuple(extent for dims in outer for extent in dims) + inner


def _stored_shape(step, state):
    """The shape of the tensor a layout step stores, once it is known to be stored and to have the
    step's dimension."""
    if step.tensor not in state.tensor_shapes:
        raise ScheduleError(f"{step.label()}: no tensor '{step.tensor}'")
    stage = state.stages.get(step.tensor)
    if stage is not None and stage.attach == "inline":
        raise ScheduleError(f"{step.label()}: node '{step.tensor}' is inlined and is never stored")
    shape = state.tensor_shapes[step.tensor]
    if not _is_count(step.dim) or not 0 <= step.dim < len(shape):
        raise ScheduleError(f"{step.label()}: tensor '{step.tensor}' has no dimension {step.dim!r}")
    return shape


@_step
class Layout(Step):
    """Store a tensor in a blocked layout: split dimension `dim` by `block` and move the inner part
    innermost (NCHW to NCHW[c]c; applied twice, KCRS to KCRS[c]c[k]k). Every access is rewritten.
    An input or output keeps the caller's layout at the kernel's interface, converted inside the
    kernel, unless `interface` asks the caller to pass it blocked (as pre-packed weights are)."""

    kind: ClassVar[str] = "layout"
    tensor: str
    dim: int
    block: int
    interface: bool = False

    def label(self):
        return f"layout on tensor '{self.tensor}'"

    def apply(self, state):
        shape = _stored_shape(self, state)
        if not _is_count(self.block) or self.block < 2 or shape[self.dim] % self.block:
            raise ScheduleError(f"{self.label()}: block {self.block!r} must be 2 or more and divide dimension "
                                f"{self.dim} of '{self.tensor}' (extent {shape[self.dim]})")
        earlier = state.layouts.get(self.tensor, ())
        if any(blocking.dim == self.dim for blocking in earlier):
            raise ScheduleError(f"{self.label()}: dimension {self.dim} of '{self.tensor}' is already blocked")
        if self.interface and self.tensor not in state.inputs + state.outputs:
            raise ScheduleError(f"{self.label()}: only an input or output is passed at the interface; "
                                f"'{self.tensor}' is internal")
        if earlier and earlier[0].interface != self.interface:
            raise ScheduleError(f"{self.label()}: tensor '{self.tensor}' is already blocked with interface="
                                f"{earlier[0].interface}; all its blockings must agree")
        if any(blocking.phases for blocking in earlier):
            raise ScheduleError(f"{self.label()}: tensor '{self.tensor}' is stored in phases and cannot also be blocked")
        state.layouts[self.tensor] = earlier + (Blocking(self.dim, self.block, bool(self.interface)),)


@_step
class Deinterleave(Step):
    """Store a tensor the kernel computes with dimension `dim` split into `stride` phases: index i at
    (i % stride, i // stride), so a loop reading every stride-th element (a strided convolution's
    input) reads one phase contiguously and a vector of its lanes is one plain load. The stride need
    not divide the extent (a cache holds a region of any size): each phase is rounded up."""

    kind: ClassVar[str] = "deinterleave"
    tensor: str
    dim: int
    stride: int

    def label(self):
        return f"deinterleave on tensor '{self.tensor}'"

    def apply(self, state):
        shape = _stored_shape(self, state)
        if self.tensor in state.inputs + state.outputs:
            raise ScheduleError(f"{self.label()}: '{self.tensor}' is an input or output; only a tensor the "
                                "kernel computes is stored in phases")
        if not _is_count(self.stride) or not 2 <= self.stride <= shape[self.dim]:
            raise ScheduleError(f"{self.label()}: stride {self.stride!r} must lie in 2..{shape[self.dim]}, the "
                                f"extent of dimension {self.dim} of '{self.tensor}'")
        if state.layouts.get(self.tensor):
            raise ScheduleError(f"{self.label()}: tensor '{self.tensor}' is already stored blocked or in phases")
        state.layouts[self.tensor] = (Blocking(self.dim, self.stride, phases=True),)


# ---------------------------------------------------------------- schedules

@functools.cache
def _step_fields(cls):
    """(every field's name, the names of those without a default) of a step class: record files
    hold thousands of steps, each read back through step_from_dict."""
    return (frozenset(f.name for f in fields(cls)),
            tuple(f.name for f in fields(cls) if f.default is dataclasses.MISSING))


def step_from_dict(data):
    """The step a to_dict() produced; unknown kinds and fields are refused by name."""
    data = dict(data)
    kind = data.pop("kind", None)
    if kind not in _STEP_KINDS:
        raise ScheduleError(f"unknown schedule step kind {kind!r}; known: {', '.join(sorted(_STEP_KINDS))}")
    cls = _STEP_KINDS[kind]
    names, required = _step_fields(cls)
    unknown = set(data) - names
    if unknown:
        raise ScheduleError(f"step '{kind}': unknown field(s) {', '.join(sorted(unknown))}")
    missing = [name for name in required if name not in data]
    if missing:
        raise ScheduleError(f"step '{kind}': missing field(s) {', '.join(missing)}")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


@dataclass(frozen=True)
class Schedule:
    """An ordered tuple of steps."""

    steps: tuple = ()

    def apply(self, info):
        """The ScheduleState of the analysed computation after every step."""
        state = ScheduleState(info)
        for number, step in enumerate(self.steps, 1):
            try:
                state.apply(step)
            except ScheduleError as err:
                raise ScheduleError(f"step {number} ({err})") from None
        return state

    def to_json(self):
        return json.dumps([step.to_dict() for step in self.steps])

    @classmethod
    def from_json(cls, text):
        return cls(tuple(step_from_dict(item) for item in json.loads(text)))

    def __add__(self, other):
        return Schedule(self.steps + tuple(other.steps if isinstance(other, Schedule) else other))


def with_blocked_interface(schedule, tensors):
    """The schedule with the named inputs or outputs passed blocked by the caller (their Layout
    steps at the interface), as an inference engine passes weights it packed once ahead of time."""
    tensors = set(tensors)
    return Schedule(tuple(replace(step, interface=True) if isinstance(step, Layout) and step.tensor in tensors
                          else step for step in schedule.steps))


def step_kinds():
    return tuple(sorted(_STEP_KINDS))
