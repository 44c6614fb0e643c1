"""FPGA spaces: the paper's three-stage read / compute / write pipeline. Every loop is tiled
as outer / tile / PE: a tile of each tensor is held on chip, the PE factors are unrolled into
a processing-element array, and the array's inputs are partitioned to feed it.

DSP slices bound the PE array and BRAM the (double-buffered) tiles; both become per-loop
caps checked at the largest tiles, so every design fits the device.
"""

from __future__ import annotations

import math

from flexsched.schedule import Buffer, Partition, Pipeline, Schedule, Unroll

from .budget import grow_caps
from .footprint import footprint, reads_footprint
from .knobs import GUARD_MULTIPLES, GUARD_SLACK_PERCENT, _divisors
from .nest import (ATTACH_ROOT, attach_knob, attachment, effective_inputs, inline_steps, knob_name, level, level_extents,
                   reorder_step, split_knobs, split_loops, split_steps, trivial_loops)

OUTER, TILE, PE = range(3)
LEVELS = 3
FLOAT_BYTES = 4
BRAM18K_BYTES = 18 * 1024 // 8
DOUBLE_BUFFERED = 2  # read, compute and write overlap: two copies of every tile


def _caps(info, node, target):
    """{loop: (caps per part)}: the PE array within the DSPs, the tiles within BRAM."""
    extents = {loop.name: loop.extent for loop in split_loops(node.loops)}
    pe_limit = max(1, target.dsp_slices // max(1, target.dsps_per_fma))
    bram_limit = target.bram18k_blocks * BRAM18K_BYTES // (FLOAT_BYTES * DOUBLE_BUFFERED)

    def lanes_fit(caps):
        return math.prod(_usable_factor(extents[name], cap) for name, cap in caps["pe"].items()) <= pe_limit

    # The PE array first, to the DSP limit; then the tiles it works on, to the BRAM limit.
    # (Grown together, the largest-tile check let BRAM stop the array at a quarter of the DSPs.)
    pe = grow_caps({"pe": extents}, lanes_fit)["pe"]
    caps = grow_caps({"tile": extents}, lambda caps: _on_chip_elements(info, node, {**caps, "pe": pe}) <= bram_limit)
    caps["pe"] = pe
    return {name: (None, caps["tile"][name], caps["pe"][name]) for name in extents}


def _usable_factor(extent, cap):
    """The largest split factor of extent within cap: a cap of 2 on a loop of 3 buys no PE, so
    it must not use up the DSP budget that other loops could turn into lanes."""
    padded = (-(-extent // multiple) * multiple for multiple in GUARD_MULTIPLES)
    candidates = {extent, *(p for p in padded if p * 100 <= GUARD_SLACK_PERCENT * extent)}
    return max(d for number in candidates for d in _divisors(number) if d <= cap)


def _on_chip_elements(info, node, caps):
    """Elements of all tiles (inputs and output) at the largest tile x PE factors allowed."""
    tiles = {name: caps["tile"][name] * caps["pe"][name] for name in caps["tile"]}
    write = footprint(node.write, tiles, node.shape)
    return reads_footprint(info, node, tiles) + write


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
    write_anchor = (outer_spatial or trivial or nest)[-1]
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
