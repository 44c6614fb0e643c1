"""CPU spaces: multi-level tiling, a few loop-level orders, the outer fused loop in parallel,
the innermost loop vectorised (the paper's fixed CPU decisions), explicit unrolling."""

from __future__ import annotations

import math

from flexsched.schedule import (MAX_VECTOR_LANES, CacheRead, ComputeAt, Fuse, Parallel, Schedule, Vectorize,
                                cache_stage_name)

from .knobs import ChoiceKnob
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
# is copied, so strided rows become one dense panel.
PACK_LEVELS = ("none", "R0", "S1", "S2")


def _is_main(info, node):
    """Outputs and reductions get the full tiling; copy-like producers two levels."""
    return node.name in info.outputs or bool(node.reduce)


def _caps(levels):
    # The innermost factor becomes a vector: keep it within the widest vector the IR takes.
    return lambda loop: (None,) * (levels - 1) + (MAX_VECTOR_LANES,)


def knobs(info, target):
    result = []
    for node in info.nodes:
        spatial = split_loops(node.spatial)
        levels = SPATIAL_LEVELS if _is_main(info, node) else PRODUCER_LEVELS
        result += split_knobs(node, node.spatial, levels, _caps(levels))
        if _is_main(info, node):
            result += split_knobs(node, node.reduce, REDUCE_LEVELS)
            if split_loops(node.reduce):
                result.append(ChoiceKnob(knob_name(node, "order"), "reorder", tuple(range(len(LEVEL_ORDERS)))))
        if len(spatial) > 1:
            result.append(ChoiceKnob(knob_name(node, "inner"), "reorder", tuple(loop.name for loop in spatial)))
            result.append(ChoiceKnob(knob_name(node, "fuse"), "fuse", tuple(range(1, len(spatial) + 1))))
        if _is_main(info, node):
            result.append(ChoiceKnob(knob_name(node, "unroll"), "unroll", UNROLL_LIMITS))
        if node.reduce:
            result += [ChoiceKnob(f"{node.name}.pack.{tensor}", "cache_read", PACK_LEVELS)
                       for tensor in node.inputs]
        result.append(ChoiceKnob(knob_name(node, "vectorize"), "vectorize", (1, 0)))
        knob = attach_knob(info, node, allow_at=True)
        if knob:
            result.append(knob)
    return result


def _pack_steps(info, node, config, tokens, caches):
    """(cache_read steps, compute_at steps) for the inputs the config packs."""
    reads, places = [], []
    for tensor in node.inputs if node.reduce else ():
        level = config[f"{node.name}.pack.{tensor}"]
        if level == "none" or not tokens.get(level):
            continue
        inlined = producer_attachment(info, config, tensor) == ATTACH_INLINE
        sources = effective_inputs(info, config, info.node(tensor)) if inlined else [tensor]
        for source in sources:
            if producer_attachment(info, config, source) == ATTACH_AT:
                continue  # a producer computed at this node is local already
            cache = cache_stage_name(source, "local", caches)
            caches.add(cache)
            reads.append(CacheRead(source, "local", (node.name,)))
            places.append(ComputeAt(cache, node.name, tokens[level][-1]))
    return reads, places


def _node_steps(info, node, config, caches):
    """Steps for one node computed at root or at a consumer; returns (steps, parallel loop)."""
    main = _is_main(info, node)  # producers are elementwise: they have no reduce loops
    s_levels = SPATIAL_LEVELS if main else PRODUCER_LEVELS
    steps, names = split_steps(node.name, node, node.spatial, config, s_levels)
    reduce_steps, reduce_names = split_steps(node.name, node, node.reduce, config, REDUCE_LEVELS)
    steps += reduce_steps
    extents = level_extents(node, config, {**names, **reduce_names})

    tokens = {f"S{k}": level(names, node.spatial, k) for k in range(s_levels)}
    tokens.update({f"R{k}": level(reduce_names, node.reduce, k) for k in range(REDUCE_LEVELS)})
    innermost = f"S{s_levels - 1}"
    inner = config.get(knob_name(node, "inner"))
    if inner is not None:  # the chosen axis goes last in the innermost level: it is vectorised
        tokens[innermost].sort(key=lambda name: name.rsplit(".", 1)[0] == inner)
    pattern = LEVEL_ORDERS[config[knob_name(node, "order")]] if reduce_names else \
        [f"S{k}" for k in range(s_levels)]
    # Length-1 loops stay out of the tiling: spatial ones outermost (fused into the parallel
    # loop), reduce ones just inside it.
    outer = [loop.name for loop in trivial_loops(node.spatial)]
    nest = (outer + tokens["S0"] + [loop.name for loop in trivial_loops(node.reduce)]
            + [name for token in pattern[1:] for name in tokens[token]])
    steps += reorder_step(node.name, nest)

    fused = outer + tokens["S0"][:config.get(knob_name(node, "fuse"), 1)]
    parallel = fused[0] if fused else None
    if len(fused) > 1:
        parallel = "+".join(fused)
        steps.append(Fuse(node.name, tuple(fused)))
        extents[parallel] = math.prod(extents[name] for name in fused)
        nest = [parallel] + nest[len(fused):]
    if parallel:
        steps.append(Parallel(node.name, parallel))
    vectorized = tokens[innermost][-1:] if config[knob_name(node, "vectorize")] else []
    if vectorized and extents[vectorized[0]] > 1:
        steps.append(Vectorize(node.name, vectorized[0]))
    else:
        vectorized = []
    if main:
        steps += unroll_steps(node.name, [name for name in nest if name not in vectorized], extents,
                              config[knob_name(node, "unroll")], stop_at={parallel, *tokens["S0"]})
    reads, places = _pack_steps(info, node, config, tokens, caches)
    return reads + steps + places, parallel or nest[0]


def emit(info, target, config):
    """The Schedule of a CPU config: inlines, then each node's nest, then compute_at."""
    steps = inline_steps(info, config)
    anchors, caches = {}, set()
    for node in info.nodes:
        if attachment(info, config, node) in (ATTACH_ROOT, ATTACH_AT):
            node_steps, anchors[node.name] = _node_steps(info, node, config, caches)
            steps += node_steps
    steps += compute_at_steps(info, config, anchors)
    return Schedule(tuple(steps))
