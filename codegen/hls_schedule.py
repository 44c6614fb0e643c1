"""An FPGA schedule restated with caches, so the ordinary lowering builds its on-chip buffers.

The FPGA space says what to hold on chip with Buffer steps (tensor, loop). The lowering already
knows how to place a copy of a tensor inside a loop, sized by the region the inner loops read
(cache_read + compute_at), and an accumulator tile that is copied out (cache_write +
compute_at). This module rewrites each accelerator that way:

    node.local   the compute stage: the PE array's loops, accumulating into an on-chip tile,
                 computed at the node's write anchor (its last outer spatial loop);
    node         the write stage: copies the finished tile to DDR;
    T.local      the read stage of each buffered input T: computed at the read anchor.

It also collects what the loop IR cannot carry (pipelined loops, partitions) for the printer.
"""

from __future__ import annotations

from dataclasses import dataclass

from flexsched.errors import FlexschedError
from flexsched.schedule import (Buffer, CacheRead, CacheWrite, ComputeAt, ComputeInline, Partition, Pipeline,
                                Reorder, Schedule, Split, Unroll, cache_stage_name)


class HlsScheduleError(FlexschedError, ValueError):
    """An FPGA schedule this translation does not cover (it names the node and the step)."""


@dataclass(frozen=True)
class HlsPlan:
    """The lowering schedule plus the HLS directives the loop IR does not hold."""

    schedule: Schedule
    pipelined: tuple    # ((stage, loop, II), ...)
    partitions: tuple   # ((buffer stage, dim, factor), ...): cyclic array partitions
    stages: tuple       # ((node, compute stage, {tensor: cache stage}), ...) per accelerator


def _steps_by_node(schedule):
    by_node, inlined = {}, []
    for step in schedule.steps:
        if isinstance(step, ComputeInline):
            inlined.append(step)
        else:
            by_node.setdefault(step.node, []).append(step)
    return inlined, by_node


def hls_plan(info, schedule):
    """The HlsPlan of an FPGA schedule (Split, Reorder, Buffer, Pipeline, Unroll, Partition steps)."""
    inlined, by_node = _steps_by_node(schedule)
    steps, pipelined, partitions, stages, taken = list(inlined), [], [], [], set(info.inputs)
    taken |= {node.name for node in info.nodes}
    for node in info.nodes:
        node_steps = by_node.get(node.name, [])
        if not node_steps:
            continue
        spatial = {loop.name for loop in node.spatial}
        splits = [s for s in node_steps if isinstance(s, Split)]
        order = next((s.order for s in node_steps if isinstance(s, Reorder)), ())
        buffers = [s for s in node_steps if isinstance(s, Buffer)]
        write_anchor = next((s.loop for s in buffers if s.tensor == node.name), None)
        spatial_loops = {f"{s.loop}.{k}" for s in splits if s.loop in spatial for k in range(len(s.factors))}
        spatial_loops |= {loop.name for loop in node.spatial}
        if write_anchor is None or write_anchor not in spatial_loops:
            raise HlsScheduleError(f"node '{node.name}': the output buffer must sit at a spatial loop, "
                                   f"got {write_anchor!r}")
        compute = f"{node.name}.local"
        taken.add(compute)
        steps.append(CacheWrite(node.name, "local"))
        steps += [s for s in splits if s.loop in spatial]
        spatial_order = tuple(name for name in order if name in spatial_loops)
        if len(spatial_order) > 1:
            steps.append(Reorder(node.name, spatial_order))
        # The compute stage keeps every split; its outer spatial loops run once (the region
        # at the write anchor is one tile), which keeps the level structure of the design.
        steps += [Split(compute, s.loop, s.factors) for s in splits]
        if len(order) > 1:
            steps.append(Reorder(compute, order))
        for step in node_steps:
            if isinstance(step, Unroll):
                steps.append(Unroll(compute, step.loop))
            elif isinstance(step, Pipeline):
                steps.append(Pipeline(compute, step.loop, step.initiation_interval))
                pipelined.append((compute, step.loop, step.initiation_interval))
        steps.append(ComputeAt(compute, node.name, write_anchor))
        caches = {}
        for buffer in buffers:
            if buffer.tensor == node.name:
                continue
            cache = cache_stage_name(buffer.tensor, "local", taken)
            taken.add(cache)
            caches[buffer.tensor] = cache
            steps.append(CacheRead(buffer.tensor, "local", (compute,)))
            # An anchor outside the compute stage (an outer spatial loop) holds the whole tile:
            # the same as the compute stage's own copy of that loop, which runs once.
            steps.append(ComputeAt(cache, compute, buffer.loop))
        for step in node_steps:
            if isinstance(step, Partition) and step.tensor in caches:
                partitions.append((caches[step.tensor], step.dim, step.factor))
        stages.append((node.name, compute, tuple(caches.items())))
    return HlsPlan(Schedule(tuple(steps)), tuple(pipelined), tuple(partitions), tuple(stages))
