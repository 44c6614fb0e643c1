"""CPU spaces: multi-level tiling, a few loop-level orders, the outer fused loop in parallel,
the innermost loop vectorised (the paper's fixed CPU decisions), explicit unrolling, and
where a reduction accumulates: in memory, or in a register tile.

The vectorised loop is always the last spatial one, along which the output is contiguous;
other choices store with a stride. A producer that selects by a condition (padding) is never
inlined: its test would run at every use in the consumer's innermost loop. (Measured on YOLO
C2 with 24 random points each: these choices halved the median GFLOPS and lowered the best.)

A register tile is the innermost spatial tile (level S3) of a reducing node, computed into
a local buffer over the whole reduction and copied out after: fully unrolled, its elements
become SSA values that LLVM keeps in vector registers. Accumulating in the output instead
loads and stores every element at every reduction step, because LLVM cannot prove that
neighbouring output rows do not alias the other tensors' loads. The register file bounds
the S3 factors (checked at the largest tile, so the space stays a product), and a search
proposes only tiles whose accumulators fit in three quarters of it, at most 16 (`fits`).
"""

from __future__ import annotations

import math

from flexsched.schedule import (MAX_VECTOR_LANES, CacheRead, CacheWrite, ComputeAt, Deinterleave, Fuse, Layout,
                                Parallel, Reorder, Schedule, Split, Unroll, Vectorize, cache_stage_name,
                                copy_axis_name)

from .budget import grow_caps
from .knobs import GUARD_SLACK_PERCENT, ChoiceKnob
from .nest import (ATTACH_AT, ATTACH_INLINE, ATTACH_ROOT, attach_knob, attachment, compute_at_steps,
                   effective_inputs, inline_steps, knob_name, level, level_extents, producer_attachment,
                   reorder_step, split_knobs, split_loops, split_steps, trivial_loops, unroll_steps)

SPATIAL_LEVELS, REDUCE_LEVELS, PRODUCER_LEVELS = 4, 3, 2
# Orders of tiling levels for nodes with reduce loops (S: spatial level, R: reduce level).
# Each starts with S0, which is fused and parallelised, and ends with S3, which is vectorised.
LEVEL_ORDERS = (
    ("S0", "S1", "R0", "S2", "R1", "R2", "S3"),
    ("S0", "S1", "R0", "R1", "S2", "R2", "S3"),
    ("S0", "R0", "S1", "R1", "S2", "R2", "S3"),
    ("S0", "S1", "S2", "R0", "R1", "R2", "S3"),
)
UNROLL_LIMITS = (0, 8, 32, 128, 512)
# Where a reducing node may copy an input into a contiguous local buffer ("packing", as BLAS
# libraries do): at the end of one of these tiling levels; the region the loops inside read
# is copied, so strided rows become one dense panel. With a register tile, an S0, S1 or S2 panel
# is made outside the tile and feeds every tile inside that level; an S0 panel is made once per
# iteration of the parallel loop, for every tile of it (YOLO C3 on AVX2: an input panel shared by
# all 32 tiles along the output channels ran at 0.92-0.99x oneDNN, against 0.65-0.70x unpacked).
PACK_LEVELS = ("none", "R0", "S0", "S1", "S2")
# How a tile vectorised along another axis than the output's last (k of NCHW: each input element
# is broadcast to the lanes) stores an input one of its reduce loops indexes alone: as given, or
# blocked along that dimension by the loop's innermost factor, so successive reduction steps read
# neighbouring elements. As given, a 1x1 convolution's input moves a whole channel plane per step,
# often a new page (a YOLO C3 tile reading its input so ran 1.2-1.6x faster with the input on 2 MB
# pages); blocked, conversion included, the tile ran 1.07x faster (AVX2).
REDUCE_BLOCKING = ("none", "blocked")
# Where a reducing node accumulates: into its output (the reduce levels interleave with the
# spatial ones, per LEVEL_ORDERS), or into a register tile of its S3 loops, copied out once.
ACCUMULATE = ("memory", "registers")
# The widest innermost (vectorised) tile, in vectors; the other S3 loops share the rest of
# the register file, so the largest register tile just fills it. (Measured on YOLO C2: a
# 4x1x16 tile, 8 accumulators, ran at 140 GFLOPS; 4x2x16, 16 of them plus operands, at 55.)
VECTORS_PER_ROW = 2
# The share of the vector registers a register tile's accumulators may take, and at most
# MAX_ACCUMULATORS of them; the rest hold the operands each reduction step loads and broadcasts.
# Two FMA pipes of 4-cycle latency keep 8 multiply-adds in flight, so 8 accumulators leave no slack:
# with AVX2 code (16 registers), GMM's 6 x 2-vector tile ran at 1.09-1.12x oneDNN side by side
# against the searched 4 x 2's 1.00-1.01. Twice that is enough: in AVX-512 searches (32 registers),
# 24 accumulators ran no faster than 16, and 3 x 3 tiles of 32 at 0.05-0.18 of each layer's best
# (they spill). Past the share, the operands spill: 14-16 AVX2 accumulators two vectors wide ran
# at 0.40-0.50x.
ACCUMULATOR_SHARE = 0.75
MAX_ACCUMULATORS = 16
# A tile one vector wide needs two operand registers a reduction step (its loaded vector and one
# broadcast), so its accumulators may take the rest. With AVX2 code (16 registers), YOLO C12's
# channel tile of 14 columns by 8 channels ran at 0.92 of oneDNN (1.05 with its weights packed
# ahead), where its 7-column tiles ran at 0.82 (experiments/points/c12_avx2_channel_tiles.json).
ONE_VECTOR_OPERANDS = 2


def _is_main(info, node):
    """Outputs and reductions get the full tiling; copy-like producers two levels."""
    return node.name in info.outputs or bool(node.reduce)


def _innermost_bounds(node, levels, target):
    """(caps_of, floors_of) for the spatial split knobs: the innermost (S3) factors within the
    register file.

    The last spatial loop is usually the output's contiguous one: its factor fills at least one
    vector (when its extent allows), so a vectorised tile never runs on a fraction of the lanes,
    and at most VECTORS_PER_ROW; the other S3 factors share the remaining vector registers."""
    loops = split_loops(node.spatial)
    lanes = max(1, target.vector_lanes)
    caps, floors = {}, {}
    if loops:
        last = loops[-1]
        caps[last.name] = min(MAX_VECTOR_LANES, VECTORS_PER_ROW * lanes)
        floors[last.name] = min(lanes, last.extent)
        rows = max(1, (target.vector_registers or 16) // VECTORS_PER_ROW)
        others = {loop.name: loop.extent for loop in loops[:-1]}
        caps.update(grow_caps({"rows": others}, lambda grown: math.prod(grown["rows"].values()) <= rows)["rows"])
    outer = (None,) * (levels - 1)
    return (lambda loop: outer + (caps.get(loop.name, MAX_VECTOR_LANES),),
            lambda loop: outer + (floors.get(loop.name),))


def _tile_shape(node, target, config):
    """(vectorised loop, rows, vectors per row) of a node's register tile, as the tile really takes it."""
    axis, tiled = _vector_axis(node, target, config)
    inner = {loop.name: tiled[knob_name(node, "split", loop)][-1] for loop in split_loops(node.spatial)}
    vectors = -(-inner.pop(axis, 1) // max(1, target.vector_lanes))
    return axis, math.prod(inner.values()), vectors


def _register_tiled(info, config):
    """The reducing nodes a config accumulates in a register tile."""
    return [node for node in info.nodes if node.reduce and config.get(knob_name(node, "accumulate")) == "registers"]


def fits(info, target, config):
    """Whether every register tile of a config holds no more accumulators (its rows times its vectors
    per row) than its budget (_accumulator_budget)."""
    return all(rows * vectors <= _accumulator_budget(target, vectors)
               for _, rows, vectors in (_tile_shape(node, target, config) for node in _register_tiled(info, config)))


def _accumulator_budget(target, vectors_per_row):
    """The accumulators a register tile may hold: ACCUMULATOR_SHARE of the registers, or all but
    ONE_VECTOR_OPERANDS of them for a tile one vector wide; MAX_ACCUMULATORS at most."""
    registers = target.vector_registers or 16
    share = int(registers * ACCUMULATOR_SHARE)
    if vectors_per_row == 1:
        share = max(share, registers - ONE_VECTOR_OPERANDS)
    return max(1, min(MAX_ACCUMULATORS, share))


def _register_rows(node):
    """Which spatial loops of a reducing node may take a register tile's row count that does not
    divide their extent (6 rows of 16 lanes over 1024: 12 accumulators, where the divisors offer
    8 or 16; the last tile is guarded, and the lowering peels it off): all but the last, whose
    remainder the vector lanes mask."""
    loops = split_loops(node.spatial)
    return lambda loop: loop is not loops[-1]


def knobs(info, target):
    result = []
    for node in info.nodes:
        spatial = split_loops(node.spatial)
        levels = SPATIAL_LEVELS if _is_main(info, node) else PRODUCER_LEVELS
        result += split_knobs(node, node.spatial, levels, *_innermost_bounds(node, levels, target),
                              padded_inner_of=_register_rows(node) if node.reduce else None)
        if _is_main(info, node):
            result += split_knobs(node, node.reduce, REDUCE_LEVELS)
            if split_loops(node.reduce):
                result.append(ChoiceKnob(knob_name(node, "order"), "reorder", tuple(range(len(LEVEL_ORDERS))),
                                     ordered=False))
        if node.reduce:
            result.append(ChoiceKnob(knob_name(node, "accumulate"), "cache_write", ACCUMULATE, ordered=False))
            axes = vector_axes(node, target)
            if len(axes) > 1:
                result.append(ChoiceKnob(knob_name(node, "vector"), "layout", axes, ordered=False))
                result += [ChoiceKnob(f"{node.name}.block.{tensor}", "layout", REDUCE_BLOCKING, ordered=False)
                           for tensor in reduce_blockable(info, node) if _broadcast_by_some(node, tensor, axes[1:])]
        if len(spatial) > 1:
            result.append(ChoiceKnob(knob_name(node, "fuse"), "fuse", tuple(range(1, len(spatial) + 1))))
        if _is_main(info, node):
            result.append(ChoiceKnob(knob_name(node, "unroll"), "unroll", UNROLL_LIMITS))
        if node.reduce:
            result += [ChoiceKnob(f"{node.name}.pack.{tensor}", "cache_read", PACK_LEVELS, ordered=False)
                       for tensor in node.inputs]
        knob = attach_knob(info, node, allow_at=True, inline_guarded=False)
        if knob:
            result.append(knob)
    return result


def vector_axes(node, target):
    """The spatial loops a register tile may vectorise: the last (the output's contiguous one) and
    any other whose extent is a multiple of the vector width; vectorising one of those stores the
    output, and the inputs that loop indexes, blocked by it (NCHW as NCHW[k]k, KCRS as K/k CRS k)."""
    loops = split_loops(node.spatial)
    lanes = max(1, target.vector_lanes)
    if not loops or lanes < 2:
        return tuple(loop.name for loop in loops[-1:])
    return tuple([loops[-1].name] + [loop.name for loop in loops[:-1] if loop.extent % lanes == 0])


def _vector_axis(node, target, config):
    """(loop vectorised by the register tile, config with its tile factors in place): another axis
    than the last takes the last one's innermost factor (a multiple of the vector width that
    divides its extent) and gives it its own, so the tile keeps its shape and the register budget
    holds. Where the last one's factor fills no whole vectors (14 columns of a 14-wide map), the
    other axis takes one vector and the last keeps its factor as the tile's rows, if they fit the
    budget; else the last axis stays vectorised. The outer factors are recomputed around them."""
    loops = split_loops(node.spatial)
    chosen = config.get(knob_name(node, "vector"), loops[-1].name if loops else None)
    if not loops or chosen == loops[-1].name:
        return chosen, config
    axis = next(loop for loop in loops if loop.name == chosen)
    last = loops[-1]
    lanes = max(1, target.vector_lanes)
    axis_factors = config[knob_name(node, "split", axis)]
    last_factors = config[knob_name(node, "split", last)]
    width = last_factors[-1]
    if width % lanes == 0 and axis.extent % width == 0:
        changes = ((axis, axis_factors, width), (last, last_factors, axis_factors[-1]))
    elif width % lanes and axis.extent % lanes == 0 and _rows_fit(node, target, config, axis):
        # Left with the last axis vectorised, such a point repeated one of the last axis's own. A
        # channel tile of YOLO C12 (AVX-512, 14 columns of 16 channels) ran 1.15x as fast as the
        # searched best that kept its 14 columns in 16 lanes (experiments/points/c12_channel_tiles.json).
        changes = ((axis, axis_factors, lanes),)
    else:
        return last.name, config
    swapped = dict(config.to_dict() if hasattr(config, "to_dict") else config)
    for loop, factors, inner in changes:
        # The innermost middle factor absorbs the change, so the loops inside the outermost
        # level cover about as much as before (exactly where the factors divide).
        middle = list(factors[1:-1])
        if middle:
            middle[-1] = max(1, middle[-1] * factors[-1] // inner)
        # Never past the extent: middle factors too large for the new width shrink, innermost first.
        # (Left as they were, 54% of YOLO C2's random channel tiles covered 1.1-32 times its 192
        # channels, every tile past them masked off.)
        while math.prod(middle) * inner > loop.extent and any(factor > 1 for factor in middle):
            position = max(n for n, factor in enumerate(middle) if factor > 1)
            middle[position] = max(1, middle[position] * loop.extent // (math.prod(middle) * inner))
        if middle:
            middle[-1] = _least_padding(loop.extent, math.prod(middle[:-1]) * inner, middle[-1])
        swapped[knob_name(node, "split", loop)] = (-(-loop.extent // (math.prod(middle) * inner)), *middle, inner)
    return chosen, swapped


def _rows_fit(node, target, config, axis):
    """Whether a one-vector tile along `axis` fits the accumulator budget, its rows the innermost
    factors of the other spatial loops."""
    rows = math.prod(config[knob_name(node, "split", loop)][-1] for loop in split_loops(node.spatial)
                     if loop.name != axis.name)
    return rows <= _accumulator_budget(target, 1)


def _least_padding(extent, within, factor):
    """The factor nearest `factor` (by ratio, at most it) whose tiles of factor x `within` cover the
    extent padded by at most GUARD_SLACK_PERCENT; `factor` itself where none does. (Tiles of 3 pixels
    over YOLO C4's 56-wide rows, the width's middle factors 4 x 2 kept, covered 72 pixels, 22% of
    them guarded off; as 4 x 1, 60.)"""
    for candidate in range(factor, 0, -1):
        if -(-extent // (candidate * within)) * candidate * within * 100 <= GUARD_SLACK_PERCENT * extent:
            return candidate
    return factor


def _layout_steps(info, node, axis, width, packed):
    """Layout steps storing blocked by `width` along `axis`: the register tile, the node itself unless
    it is an output of the computation, and the inputs whose dimension that loop alone indexes, or
    in their stead the packed copies of those the config packs (packed: source -> its copy)."""
    dim = [loop.name for loop in node.spatial].index(axis)
    steps = [Layout(f"{node.name}.local", dim, width)]
    # An output stays in the caller's layout: the tile's copy-out writes it through transposes in
    # registers. Stored blocked, it cost a whole-tensor workspace and a second pass over it; on the
    # searched bests of YOLO C1, C6, C10 and C11 (AVX-512, 7-9 alternating rounds against oneDNN) the
    # caller's layout ran 1.00-1.13x as fast, and GMM's at 0.99x.
    if node.name not in info.outputs:
        steps.insert(0, Layout(node.name, dim, width))
    stored_inputs = set(info.inputs)
    for access in node.reads:
        if access.tensor not in stored_inputs:
            continue
        for position, index in enumerate(access.indices):
            if index.affine and index.coefficients == ((axis, 1),) and index.offset == 0:
                copy = packed.get(access.tensor)
                steps += _converting_copy(copy, position, width, len(access.indices), info.tensor(
                    access.tensor).shape[position]) if copy else [Layout(access.tensor, position, width)]
                break
    return steps


def _converting_copy(copy, position, width, rank, extent):
    """Steps making a packed copy blocked by `width` along dimension `position` from its source in
    the caller's layout: the block's loop innermost and vectorised, so the copy converts a vector at
    a time. (A searched best of YOLO C12 with its weights so packed per chunk of output channels ran at
    1.03 of oneDNN on AVX-512 and 0.98 with AVX2 code, against 0.95 and 0.88 converted whole ahead of
    the convolution: experiments/points/c12{,_avx2}_weight_panels.json.)"""
    loops = [copy_axis_name(copy, dim) for dim in range(rank)]
    block = f"{loops[position]}.1"
    order = [f"{name}.0" if dim == position else name for dim, name in enumerate(loops)] + [block]
    return [Layout(copy, position, width), Split(copy, loops[position], (extent // width, width)),
            Reorder(copy, tuple(order)), Vectorize(copy, block)]


def _deinterleave_steps(info, config, node, axis, packed):
    """Deinterleave steps for what a node's vectorised loop reads every k-th element of (a stride-k
    convolution's padded input): the packed copy it reads (packed: source -> cache), else the producer
    itself, stored in k phases along that dimension, so a vector of the loop's lanes is one load.
    (On YOLO C14, 3 x 3, stride 2, its searched best ran 1.29-1.41x as fast with its padded input in
    phases, AVX-512 and AVX2 code alike, the strided vectors having cost a wide load and three
    shuffles each.) An input read unpacked keeps the caller's layout, and an inlined producer is
    never stored."""
    steps, done = [], set()
    for access in node.reads:
        stored = packed.get(access.tensor)
        if stored is None and producer_attachment(info, config, access.tensor) in (ATTACH_ROOT, ATTACH_AT):
            stored = access.tensor
        if stored is None or stored in done:
            continue
        for position, index in enumerate(access.indices):
            stride = index.coefficient(axis) if index.affine else 0
            if stride > 1:
                steps.append(Deinterleave(stored, position, stride))
                done.add(stored)
                break
    return steps


def reduce_blockable(info, node):
    """{tensor: (dimension, reduce loop)} of the tensors a node reads whose dimension one of its split
    reduce loops indexes alone: inputs, and producers that copy an input's dimension through (padding),
    which may be stored themselves or inlined into the node."""
    reduce_loops = {loop.name: loop for loop in split_loops(node.reduce)}
    result = {}
    for access in node.reads:
        for position, index in enumerate(access.indices):
            reducing = reduce_loops.get(index.coefficients[0][0]) if len(index.coefficients) == 1 else None
            if index.affine and reducing and index.coefficients[0][1] == 1 and index.offset == 0:
                if _copied_input(info, access.tensor, position) is not None:
                    result.setdefault(access.tensor, (position, reducing))
                break
    return result


def _broadcast_by_some(node, tensor, axes):
    """Whether some of these vectorised axes leaves `tensor` unindexed, so a tile broadcasts it (one
    that every such axis indexes is blocked along that axis instead: its block knob would be idle)."""
    indexing = {name for access in node.reads if access.tensor == tensor
                for index in access.indices for name, _ in index.coefficients}
    return any(axis not in indexing for axis in axes)


def _copied_input(info, tensor, position):
    """The input a tensor's dimension comes from unchanged: the tensor itself if it is an input, the
    input a single-read producer copies that dimension from; None otherwise."""
    if tensor in info.inputs:
        return tensor
    producer = next((n for n in info.nodes if n.name == tensor), None)   # None: not computed here
    if producer is None or producer.reduce or len(producer.reads) != 1:
        return None
    (access,) = producer.reads
    index = access.indices[position] if position < len(access.indices) else None
    own = producer.spatial[position].name if position < len(producer.spatial) else None
    if access.tensor in info.inputs and index is not None and index.affine and index.coefficients == ((own, 1),) \
            and len(access.indices) == len(producer.spatial):
        return access.tensor
    return None


def _reduce_block_steps(info, node, config, blocked):
    """Layout steps for the tensors the config blocks along a reduce loop (by that loop's innermost
    factor, where it divides the dimension), skipping those blocked already; a producer inlined into
    the node passes the blocking on to the input it copies."""
    steps = []
    for tensor, (position, loop) in reduce_blockable(info, node).items():
        if config.get(f"{node.name}.block.{tensor}") != "blocked":
            continue
        factors = config[knob_name(node, "split", loop)]
        width = factors[-1]
        attached = producer_attachment(info, config, tensor)
        stored = _copied_input(info, tensor, position) if attached == ATTACH_INLINE else tensor
        if attached == ATTACH_AT or stored in blocked or width < 2 or math.prod(factors) != loop.extent:
            continue
        if info.tensor(stored).shape[position] % width == 0:
            steps.append(Layout(stored, position, width))
    return steps


def _packed_copies(reads, places):
    """{source tensor: its packed copy} of _pack_steps' steps."""
    return {read.tensor: place.node for read, place in zip(reads, places)}


def _pack_steps(info, node, config, tokens, caches, reader, levels):
    """(cache_read steps, compute_at steps) for the inputs the config packs.

    reader is the stage that reads the inputs; levels maps a pack level to (stage, loops): the
    level's loops, outermost first, down to the one closing it (levels the nest lacks are left out:
    the input is not packed). The copy is made at the innermost of them its tensor varies with: one
    that does not change it would only make the same panel again (a weight panel, at every row of
    pixels)."""
    reads, places = [], []
    for tensor in node.inputs if node.reduce else ():
        level = config[f"{node.name}.pack.{tensor}"]
        if level not in levels or not levels[level][1]:
            continue
        stage, loops = levels[level]
        inlined = producer_attachment(info, config, tensor) == ATTACH_INLINE
        sources = effective_inputs(info, config, info.node(tensor)) if inlined else [tensor]
        for source in sources:
            if producer_attachment(info, config, source) == ATTACH_AT:
                continue  # a producer computed at this node is local already
            cache = cache_stage_name(source, "local", caches)
            caches.add(cache)
            reads.append(CacheRead(source, "local", (reader,)))
            places.append(ComputeAt(cache, stage, _innermost_varying(loops, _indexing_loops(node, tensor))))
    return reads, places


def _indexing_loops(node, tensor):
    """The names of the node's loops that index its reads of tensor."""
    return {name for access in node.reads if access.tensor == tensor for index in access.indices
            for name in index.loops}


def _innermost_varying(loops, indexing):
    """The innermost of loops (split or fused loop names) that one of the `indexing` loops is part of;
    the outermost where none is."""
    varying = [name for name in loops if any(part.rsplit(".", 1)[0] in indexing for part in name.split("+"))]
    return varying[-1] if varying else loops[0]


def _level_names(info, node, config, stage, s_levels):
    """(split steps, tokens {S0.., R0..: loop names}, extents) of a node's tiling levels; the
    spatial loops split on the node, the reduce loops on `stage` (its write cache, if any)."""
    steps, names = split_steps(node.name, node, node.spatial, config, s_levels)
    reduce_steps, reduce_names = split_steps(stage, node, node.reduce, config, REDUCE_LEVELS)
    extents = level_extents(node, config, {**names, **reduce_names})
    tokens = {f"S{k}": level(names, node.spatial, k) for k in range(s_levels)}
    tokens.update({f"R{k}": level(reduce_names, node.reduce, k) for k in range(REDUCE_LEVELS)})
    return steps + reduce_steps, tokens, extents


def _parallel_outer(node, config, nest, extents, outer, tokens):
    """Fuse the outer loops the config asks for and run them in parallel; returns (steps, nest, loop)."""
    steps = []
    fused = outer + tokens["S0"][:config.get(knob_name(node, "fuse"), 1)]
    parallel = fused[0] if fused else None
    if len(fused) > 1:
        parallel = "+".join(fused)
        steps.append(Fuse(node.name, tuple(fused)))
        extents[parallel] = math.prod(extents[name] for name in fused)
        nest = [parallel] + nest[len(fused):]
    if parallel:
        steps.append(Parallel(node.name, parallel))
    return steps, nest, parallel


def _outer_level_loops(nest, tokens, parallel):
    """The S0 level's loops in the nest, outermost first: the parallel loop (which may have fused some
    of them) and those it did not fuse; [] when the level has no loop."""
    return [name for name in nest if name == parallel or name in tokens["S0"]]


def _vectorize(stage, loop, extent):
    """The Vectorize step of the innermost loop, if it has lanes."""
    return [Vectorize(stage, loop)] if extent > 1 else []


def _node_steps(info, target, node, config, caches):
    """Steps for one node computed at root; returns (steps, (stage, loop) its producers attach at)."""
    if node.reduce and config[knob_name(node, "accumulate")] == "registers":
        return _register_tile_steps(info, target, node, config, caches)
    main = _is_main(info, node)  # producers are elementwise: they have no reduce loops
    s_levels = SPATIAL_LEVELS if main else PRODUCER_LEVELS
    steps, tokens, extents = _level_names(info, node, config, node.name, s_levels)
    innermost = f"S{s_levels - 1}"
    has_reduce_levels = any(tokens[f"R{k}"] for k in range(REDUCE_LEVELS))
    pattern = LEVEL_ORDERS[config[knob_name(node, "order")]] if has_reduce_levels else \
        [f"S{k}" for k in range(s_levels)]
    # Length-1 loops stay out of the tiling: spatial ones outermost (fused into the parallel
    # loop), reduce ones just inside it.
    outer = [loop.name for loop in trivial_loops(node.spatial)]
    nest = (outer + tokens["S0"] + [loop.name for loop in trivial_loops(node.reduce)]
            + [name for token in pattern[1:] for name in tokens[token]])
    steps += reorder_step(node.name, nest)
    parallel_steps, nest, parallel = _parallel_outer(node, config, nest, extents, outer, tokens)
    steps += parallel_steps
    vectorized = tokens[innermost][-1:]
    vector_steps = _vectorize(node.name, vectorized[0], extents[vectorized[0]]) if vectorized else []
    steps += vector_steps
    vectorized = vectorized if vector_steps else []
    if main:
        steps += unroll_steps(node.name, [name for name in nest if name not in vectorized], extents,
                              config[knob_name(node, "unroll")], stop_at={parallel, *tokens["S0"]})
    levels = {name: (node.name, tokens[name]) for name in PACK_LEVELS[1:] if name in tokens}
    levels["S0"] = (node.name, _outer_level_loops(nest, tokens, parallel))
    reads, places = _pack_steps(info, node, config, tokens, caches, node.name, levels)
    if vectorized and node.reduce:
        places += _deinterleave_steps(info, config, node, vectorized[0].rsplit(".", 1)[0],
                                      _packed_copies(reads, places))
    return reads + steps + places, (node.name, parallel or nest[0])


def _register_tile_steps(info, target, node, config, caches):
    """A reducing node that accumulates its S3 tile in a local buffer over the whole reduction:
    the node keeps the spatial tiling and copies the tile out; its write cache holds the
    reduce levels, outermost first, then the tile's loops, unrolled, the chosen axis vectorised."""
    tile_stage = f"{node.name}.local"  # the name CacheWrite gives; later read caches avoid it
    caches.add(tile_stage)
    axis, config = _vector_axis(node, target, config)
    steps, tokens, extents = _level_names(info, node, config, tile_stage, SPATIAL_LEVELS)
    last_axis = split_loops(node.spatial)[-1].name if split_loops(node.spatial) else axis
    if axis != last_axis:  # the vectorised axis goes innermost in the copy-out and the tile
        tokens["S3"] = [name for name in tokens["S3"] if name != f"{axis}.3"] + [f"{axis}.3"]
    outer = [loop.name for loop in trivial_loops(node.spatial)]
    nest = outer + [name for k in range(SPATIAL_LEVELS) for name in tokens[f"S{k}"]]
    steps += reorder_step(node.name, nest)
    parallel_steps, nest, parallel = _parallel_outer(node, config, nest, extents, outer, tokens)
    steps += parallel_steps
    copy_out = tokens["S3"]
    vector_steps = _vectorize(node.name, copy_out[-1], extents[copy_out[-1]]) if copy_out else []
    # The copy-out indexes the tile by its loops: unrolled, every index is a constant and
    # the tile can stay in registers.
    steps += vector_steps + [Unroll(node.name, name) for name in copy_out[:-1 if vector_steps else None]
                             if extents[name] > 1]
    anchor = [name for name in nest if name not in tokens["S3"]][-1]

    # The tile's loops keep the node's loop names; compute_at bounds them to the S3 factors.
    # Length-1 loops go first, so the last split loop (the vectorised one) is innermost.
    tile = [loop.name for loop in trivial_loops(node.spatial)] + [loop.name for loop in split_loops(node.spatial)]
    if axis != last_axis:
        tile = [name for name in tile if name != axis] + [axis]
    tile_extent = {name.rsplit(".", 1)[0]: extents[name] for name in tokens["S3"]}
    reduce_nest = ([loop.name for loop in trivial_loops(node.reduce)]
                   + [name for k in range(REDUCE_LEVELS) for name in tokens[f"R{k}"]])
    steps += reorder_step(tile_stage, reduce_nest + tile)
    steps.append(ComputeAt(tile_stage, node.name, anchor))
    vector_steps = _vectorize(tile_stage, tile[-1], tile_extent.get(tile[-1], 1))
    unrolled = tile[:-1] if vector_steps else tile
    steps += vector_steps + [Unroll(tile_stage, name) for name in unrolled if tile_extent.get(name, 1) > 1]
    # The unroll knob bounds the whole unrolled body, in vector operations: tile rows times
    # vectors per row times reduce steps (a larger body only costs compile time).
    vectors = -(-tile_extent.get(tile[-1], 1) // max(1, target.vector_lanes)) if vector_steps else 1
    tile_points = math.prod(tile_extent.get(name, 1) for name in unrolled) * vectors
    steps += unroll_steps(tile_stage, reduce_nest, extents, config[knob_name(node, "unroll")] // tile_points,
                          stop_at=set(tokens["R0"]))
    # An R0 copy is made per reduction block inside the tile's nest; an S0, S1 or S2 copy at the
    # node's loop outside the tile, one packed panel shared by every register tile inside it.
    levels = {"R0": (tile_stage, tokens["R0"]), "S0": (node.name, _outer_level_loops(nest, tokens, parallel)),
              "S1": (node.name, tokens["S1"]), "S2": (node.name, tokens["S2"])}
    reads, places = _pack_steps(info, node, config, tokens, caches, tile_stage, levels)
    packed = _packed_copies(reads, places)
    if axis != last_axis:
        layouts = _layout_steps(info, node, axis, extents[f"{axis}.3"], packed)
        blocked = {step.tensor for step in layouts if isinstance(step, Layout)}
        blocked |= {source for source, copy in packed.items() if copy in blocked}   # converted by their copy
        places += layouts + _reduce_block_steps(info, node, config, blocked)
    elif vector_steps:
        places += _deinterleave_steps(info, config, node, axis, packed)
    # A producer attached 'at' this node is made once per iteration of its parallel loop, as for a node
    # accumulating in memory, not inside every tile: YOLO C1's padding, recomputed per 4-pixel tile with
    # its bound tests, took as many samples as the tile's FMAs (AVX2: 106 GFLOPS; made once per parallel
    # iteration, 158).
    return [CacheWrite(node.name, "local")] + reads + steps + places, (node.name, parallel or nest[0])


def family(info, target, config):
    """The kind of kernel a config makes: per reducing node, where it accumulates and, in a register
    tile, which axis it vectorises and in how many vectors per row: the axis the tile really takes, so a
    channel axis chosen where the pixels' width is no multiple of the vector width counts as the pixels'
    kind. (On the YOLO 3 x 3 layers, 200-trial searches measured 0-4 channel-vectorised tiles when they
    started elsewhere, and 59-172 when one was among the starts. Two AVX2 searches of YOLO C4 measured
    one channel tile two vectors wide, a start, where 4 pixels by 2 vectors ran at 0.84-0.86x oneDNN
    side by side against their one-vector best's 0.78.)"""
    return _kinds(info, target, config, widths=True)


def broad_family(info, target, config):
    """The family without the tiles' widths: a search's starts go round these, so a tile width adds
    no turn of its own. (With a turn per width, AVX-512 searches of YOLO C10 gave its one-vector channel
    tiles 14 trials of 200, against 84 and 148 with a turn per axis, and the 3 x 3 layers fell from
    0.99x oneDNN to 0.93-0.95.)"""
    return _kinds(info, target, config, widths=False)


def register_tiles(info, target, config):
    """{node name: (vectorised loop, rows, vectors per row)} of a config's register tiles, as they really
    take them (a tile's accumulators are its rows times its vectors per row)."""
    return {node.name: _tile_shape(node, target, config) for node in _register_tiled(info, config)}


def _kinds(info, target, config, widths):
    """Per node, (name, where it accumulates[, tile axis[, vectors per row]])."""
    tiled = register_tiles(info, target, config)
    kinds = []
    for node in info.nodes:
        accumulate = config.get(knob_name(node, "accumulate"))
        if node.name in tiled:
            axis, _, vectors = tiled[node.name]
            kinds.append((node.name, accumulate, axis, vectors) if widths else (node.name, accumulate, axis))
        elif accumulate is not None:
            kinds.append((node.name, accumulate, None))
    return tuple(kinds)


def emit(info, target, config):
    """The Schedule of a CPU config: inlines, then each node's nest, then compute_at."""
    steps = inline_steps(info, config)
    anchors, caches = {}, set()
    for node in info.nodes:
        if attachment(info, config, node) in (ATTACH_ROOT, ATTACH_AT):
            node_steps, anchors[node.name] = _node_steps(info, target, node, config, caches)
            steps += node_steps
    steps += compute_at_steps(info, config, anchors)
    return Schedule(tuple(steps))
