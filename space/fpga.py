"""FPGA spaces: the paper's three-stage read / compute / write pipeline. Every loop is tiled
as outer / tile / PE: a tile of each tensor is held on chip, the PE factors are unrolled into
a processing-element array, and the array's inputs are partitioned to feed it.

DSP slices bound the PE array and BRAM the (double-buffered) tiles. Both are *joint* limits on
products of factors over all loops, and they are left to the model (fpga_model), which
rejects a design over either with the reason: the space only caps each loop's factors where
that loop alone, every other loop at 1, would already exceed a limit. Per-loop caps that made
every point fit (grown evenly, so their product stayed within the DSPs) boxed a 3x3
convolution's PE array at 768 lanes and forbade lopsided arrays (64 output x 16 input
channels = 1024 lanes); with necessary caps any array shape within the device is a point,
and about half of the random points of a YOLO layer fit.
"""

from __future__ import annotations

import math

from flexsched.schedule import Buffer, Partition, Pipeline, Schedule, Unroll

from .footprint import footprint, reads_footprint
from .nest import (ATTACH_ROOT, attach_knob, attachment, effective_inputs, inline_steps, knob_name, level, level_extents,
                   reorder_step, split_knobs, split_loops, split_steps, trivial_loops)

OUTER, TILE, PE = range(3)
LEVELS = 3
FLOAT_BYTES = 4
BRAM18K_BYTES = 18 * 1024 // 8
DOUBLE_BUFFERED = 2  # read, compute and write overlap: two copies of every tile


def _caps(info, node, target):
    """{loop: (caps per part)}: what a loop may not exceed even with every other loop at 1.

    The PE factor is capped by the DSP lanes and the tile x PE region by BRAM, one loop at a
    time; whether a whole point fits is the model's decision (the space holds designs it
    rejects, each with a DSP or BRAM reason)."""
    extents = {loop.name: loop.extent for loop in split_loops(node.loops)}
    pe_limit = max(1, target.dsp_slices // max(1, target.dsps_per_fma))
    bram_limit = target.bram18k_blocks * BRAM18K_BYTES // (FLOAT_BYTES * DOUBLE_BUFFERED)
    caps = {}
    for name, extent in extents.items():
        def fits(size, name=name):
            return _on_chip_elements(info, node, {name: size}) <= bram_limit

        # A loop whose whole extent fits is left uncapped, so its guarded (padded) tiles stay.
        region = None if fits(extent) else _largest_region(extent, fits)
        caps[name] = (None, region, pe_limit if region is None else min(region, pe_limit))
    return caps


def _largest_region(extent, fits):
    """The largest trip count in [1, extent) that fits (footprints only grow with it); 1 at least."""
    low, high = 1, extent
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _on_chip_elements(info, node, region):
    """Elements of all tiles (inputs and output) when each loop covers region[loop] values."""
    return reads_footprint(info, node, region) + footprint(node.write, region, node.shape)


def knobs(info, target):
    result = []
    for node in info.nodes:
        caps = _caps(info, node, target)
        result += split_knobs(node, node.loops, LEVELS, lambda loop: caps[loop.name])
        knob = attach_knob(info, node, allow_at=False)
        if knob:
            result.append(knob)
    return result


def _partitions(info, node, pe_factors, inputs):
    """Partition each on-chip input dimension by the PE factors that index it (reads through an
    inlined producer are left whole: their indices go through the producer's)."""
    steps = []
    for access in (a for a in node.reads if a.tensor in inputs):
        shape = info.tensor(access.tensor).shape
        for dim, index in enumerate(access.indices):
            factor = math.prod(pe_factors.get(loop, 1) for loop in index.loops)
            if factor > 1:
                steps.append(Partition(node.name, access.tensor, dim, min(factor, shape[dim])))
    return steps


def _node_steps(info, node, config):
    steps, names = split_steps(node.name, node, node.loops, config, LEVELS)
    extents = level_extents(node, config, names)
    trivial = [loop.name for loop in trivial_loops(node.loops)]
    outer_spatial = level(names, node.spatial, OUTER)
    outer_reduce = level(names, node.reduce, OUTER)
    # Reduce tiles outside spatial ones: the pipelined (innermost tile) loop then walks
    # different outputs, so consecutive iterations do not wait on one accumulator's adder.
    tiles = level(names, node.reduce, TILE) + level(names, node.spatial, TILE)
    pes = level(names, node.spatial, PE) + level(names, node.reduce, PE)
    nest = trivial + outer_spatial + outer_reduce + tiles + pes
    steps += reorder_step(node.name, nest)
    # Read stage: input tiles load once per outer iteration; write stage: the output tile
    # leaves once its reduction is done.
    read_anchor = (outer_reduce or outer_spatial or trivial or nest)[-1]
    # A spatial loop: a reduction of one step is trivial too, but the output cannot leave inside it.
    trivial_spatial = [loop.name for loop in trivial_loops(node.spatial)]
    write_anchor = (outer_spatial or trivial_spatial or nest)[-1]
    inputs = effective_inputs(info, config, node)
    for tensor in inputs:
        steps.append(Buffer(node.name, tensor, read_anchor))
    steps.append(Buffer(node.name, node.name, write_anchor))
    pipelined = (tiles or [read_anchor])[-1]
    steps.append(Pipeline(node.name, pipelined, 1))
    steps += [Unroll(node.name, name) for name in pes if extents[name] > 1]
    pe_factors = {loop.name: extents[names[loop.name][PE]] for loop in split_loops(node.loops)}
    steps += _partitions(info, node, pe_factors, inputs)
    return steps


def emit(info, target, config):
    """The Schedule of an FPGA config: inlines, then one pipelined accelerator per root node."""
    steps = inline_steps(info, config)
    for node in info.nodes:
        if attachment(info, config, node) == ATTACH_ROOT:
            steps += _node_steps(info, node, config)
    return Schedule(tuple(steps))
