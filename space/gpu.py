"""GPU spaces: spatial loops tiled as block / virtual thread / thread / inner, outer loops bound
to blocks and inner ones to threads, inputs staged in shared memory per reduction chunk and
the output kept in a register tile (the paper's fixed GPU decisions).

Threads per block and shared memory per block are hard limits: they become per-loop caps
on the thread and tile factors, checked at the largest tiles, so every point launches.
"""

from __future__ import annotations

import math

from flexsched.schedule import Bind, CacheRead, CacheWrite, ComputeAt, Fuse, Schedule, cache_stage_name

from .budget import grow_caps, largest_power_of_two
from .footprint import reads_footprint
from .knobs import ChoiceKnob
from .nest import (ATTACH_ROOT, attach_knob, attachment, effective_inputs, inline_steps, knob_name, level, level_extents,
                   reorder_step, split_knobs, split_loops, split_steps, trivial_loops, unroll_steps)

SPATIAL_LEVELS, REDUCE_LEVELS = 4, 3     # block, vthread, thread, inner / outer, middle, inner
BLOCK, VTHREAD, THREAD, INNER = range(4)
# Reduce levels against the register tile: all reduce loops outside it, or the innermost inside.
LEVEL_ORDERS = (("R0", "R1", "R2", "U"), ("R0", "R1", "U", "R2"))
# The unroll knob bounds the statements an unrolled reduction body holds: the register tile's
# accumulations times the unrolled reduction steps (a 64-accumulator tile unrolled 512 steps
# deep was 4,300 PTX instructions and 2 s of nvcc).
UNROLL_LIMITS = (0, 64, 256, 1024)
FLOAT_BYTES = 4


def accumulator_budget(target):
    """Accumulators a thread's register tile may hold: a third of its registers (operands and
    addresses need the rest), as a power of two."""
    return largest_power_of_two(target.max_registers_per_thread // 3)


def _caps(info, node, target):
    """({loop: (caps per spatial part)}, {loop: (caps per reduce part)}) within the target's limits.

    A thread factor is capped by `threads`; the vthread and inner factors make up the register
    tile together, so their caps' product over all loops stays within the accumulator budget
    (pruning: more accumulators would spill); the two inner reduce factors are capped by `chunk`
    (the reduction points staged per shared-memory refill)."""
    spatial = {loop.name: loop.extent for loop in split_loops(node.spatial)}
    reduce = {loop.name: loop.extent for loop in split_loops(node.reduce)}
    accumulators = accumulator_budget(target)
    shared_limit = target.max_shared_memory_bytes // FLOAT_BYTES

    def fits(caps):
        if math.prod(caps["threads"].values()) > target.max_threads_per_block:
            return False
        if math.prod(caps["vthreads"].values()) * math.prod(caps["inner"].values()) > accumulators:
            return False
        return not node.reduce or _shared_elements(info, node, caps) <= shared_limit

    caps = grow_caps({"threads": spatial, "vthreads": spatial, "inner": spatial, "chunk": reduce}, fits)
    threads, vthreads, inner, chunk = caps["threads"], caps["vthreads"], caps["inner"], caps["chunk"]
    spatial_caps = {name: (None, vthreads[name], threads[name], inner[name]) for name in spatial}
    reduce_caps = {name: (None, chunk[name], chunk[name]) for name in reduce}
    return spatial_caps, reduce_caps


def _shared_elements(info, node, caps):
    """Shared memory a block needs at the largest tiles the caps allow (footprints only grow
    with tiles, so this bounds every point)."""
    tiles = {name: caps["threads"][name] * caps["vthreads"][name] * caps["inner"][name] for name in caps["threads"]}
    tiles.update({name: cap ** 2 for name, cap in caps["chunk"].items()})
    return reads_footprint(info, node, tiles)


def knobs(info, target):
    result = []
    for node in info.nodes:
        spatial_caps, reduce_caps = _caps(info, node, target)
        result += split_knobs(node, node.spatial, SPATIAL_LEVELS, lambda loop: spatial_caps[loop.name])
        result += split_knobs(node, node.reduce, REDUCE_LEVELS, lambda loop: reduce_caps[loop.name])
        if split_loops(node.reduce):
            result.append(ChoiceKnob(knob_name(node, "order"), "reorder", tuple(range(len(LEVEL_ORDERS))),
                                     ordered=False))
        if node.reduce:
            result.append(ChoiceKnob(knob_name(node, "cache"), "cache_shared", (1, 0)))
        result.append(ChoiceKnob(knob_name(node, "unroll"), "unroll", UNROLL_LIMITS))
        knob = attach_knob(info, node, allow_at=False)
        if knob:
            result.append(knob)
    return result


def _bind_level(stage, loops, axis):
    """Fuse a level's loops into one and bind it; returns (steps, bound loop name)."""
    if not loops:
        return [], None
    steps = []
    if len(loops) > 1:
        steps.append(Fuse(stage, tuple(loops)))
    name = "+".join(loops)
    return steps + [Bind(stage, name, axis)], name


def _node_steps(info, node, config, caches):
    """Steps of one kernel; caches holds the cache stage names taken so far."""
    steps, names = [], {}
    compute_stage = node.name
    cached = bool(node.reduce) and config[knob_name(node, "cache")]
    if node.reduce:  # the output tile accumulates in registers, then is copied out
        compute_stage = f"{node.name}.local"
        steps.append(CacheWrite(node.name, "local"))
    split, names = split_steps(node.name, node, node.spatial, config, SPATIAL_LEVELS)
    steps += split
    outer = [loop.name for loop in trivial_loops(node.spatial)]
    blocks = outer + level(names, node.spatial, BLOCK)
    vthreads = level(names, node.spatial, VTHREAD)
    threads = level(names, node.spatial, THREAD)
    inner = level(names, node.spatial, INNER)
    steps += reorder_step(node.name, blocks + vthreads + threads + inner)
    bind_steps, block_loop = _bind_level(node.name, blocks, "blockIdx.x")
    steps += bind_steps
    steps += [Bind(node.name, name, "vthread") for name in vthreads]
    thread_steps, thread_loop = _bind_level(node.name, threads, "threadIdx.x")
    steps += thread_steps
    extents = level_extents(node, config, names)
    if not node.reduce:
        steps += unroll_steps(node.name, inner, extents, config[knob_name(node, "unroll")], stop_at=set())
        return steps

    reduce_steps, reduce_names = split_steps(compute_stage, node, node.reduce, config, REDUCE_LEVELS)
    steps += reduce_steps
    tokens = {f"R{k}": level(reduce_names, node.reduce, k) for k in range(REDUCE_LEVELS)}
    tokens["U"] = [loop.name for loop in node.spatial]  # the register tile, bounded when computed at
    pattern = LEVEL_ORDERS[config[knob_name(node, "order")]] if reduce_names else ("U",)
    trivial_reduce = [loop.name for loop in trivial_loops(node.reduce)]
    nest = trivial_reduce + [name for token in pattern for name in tokens[token]]
    steps += reorder_step(compute_stage, nest)
    anchor_loop = thread_loop or (vthreads[-1] if vthreads else block_loop)
    if anchor_loop:
        steps.append(ComputeAt(compute_stage, node.name, anchor_loop))
    if cached:
        refill = (tokens["R0"] or trivial_reduce or nest)[-1]  # inputs are reloaded once per outer chunk
        for tensor in effective_inputs(info, config, node):
            cache = cache_stage_name(tensor, "shared", caches)
            caches.add(cache)
            steps.append(CacheRead(tensor, "shared", (compute_stage,)))
            steps.append(ComputeAt(cache, compute_stage, refill))
    # The register tile's loops get their extents only when lowering infers bounds (the GPU
    # passes unroll them); the unroll knob covers the reduce loops inside each chunk, counting
    # each step as the tile's accumulations.
    extents.update(level_extents(node, config, reduce_names))
    reduce_nest = [name for name in nest if name not in tokens["U"]]
    tile = math.prod(extents[name] for name in vthreads + inner)
    steps += unroll_steps(compute_stage, reduce_nest, extents, config[knob_name(node, "unroll")] // tile,
                          stop_at=set(tokens["R0"]))
    return steps


def emit(info, target, config):
    """The Schedule of a GPU config: inlines, then one kernel per node at root."""
    steps, caches = inline_steps(info, config), set()
    for node in info.nodes:
        if attachment(info, config, node) == ATTACH_ROOT:
            steps += _node_steps(info, node, config, caches)
    return Schedule(tuple(steps))
