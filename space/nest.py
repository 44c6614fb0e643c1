"""Pieces every target's rules share: which loops get split knobs, where producers go,
and the steps that turn chosen factors into an ordered loop nest."""

from __future__ import annotations

from flexsched.schedule import ComputeAt, ComputeInline, Reorder, Split, Unroll

from .knobs import ChoiceKnob, SplitKnob

ATTACH_INLINE, ATTACH_ROOT, ATTACH_AT = "inline", "root", "at"


def split_loops(loops):
    """Loops worth a split knob: a trip count of 1 has only one split."""
    return [loop for loop in loops if loop.extent > 1]


def trivial_loops(loops):
    return [loop for loop in loops if loop.extent == 1]


def knob_name(node, what, loop=None):
    return f"{node.name}.{what}" + (f".{loop.name}" if loop is not None else "")


def attach_values(node, allow_at, inline_guarded=True):
    """Where a non-output node may be computed: inlined (elementwise only; a guarded one only
    where inline_guarded), at root, or inside its single consumer's outer loop."""
    if not node.consumers:
        return (ATTACH_ROOT,)
    values = [] if node.reduce or (node.guarded and not inline_guarded) else [ATTACH_INLINE]
    values.append(ATTACH_ROOT)
    if allow_at and len(node.consumers) == 1:
        values.append(ATTACH_AT)
    return tuple(values)


def attach_knob(info, node, allow_at, inline_guarded=True):
    """The attach knob of a producer, or None for outputs and nodes with one choice."""
    if node.name in info.outputs:
        return None
    values = attach_values(node, allow_at, inline_guarded)
    return ChoiceKnob(knob_name(node, "attach"), "attach", values, ordered=False) if len(values) > 1 else None


def split_knobs(node, loops, parts, caps_of=None, floors_of=None, padded_inner_of=None):
    """A SplitKnob per loop with extent > 1; caps_of(loop) / floors_of(loop) give the per-part
    largest / smallest factors, or None; padded_inner_of(loop) whether its innermost factor may
    leave a remainder tile (SplitKnob's padded_inner)."""
    return [SplitKnob(knob_name(node, "split", loop), loop.extent, parts, caps=caps_of(loop) if caps_of else None,
                      floors=floors_of(loop) if floors_of else None,
                      padded_inner=bool(padded_inner_of and padded_inner_of(loop))) for loop in split_loops(loops)]


def attachment(info, config, node):
    """The attach decision of a node under a config; nodes without an attach knob are at root.

    'at' needs one consumer; when that consumer is inlined into several, the node is computed
    at root instead (the knob cannot know, since inlining is a decision of the same config)."""
    value = config.get(knob_name(node, "attach"), ATTACH_ROOT)
    if value == ATTACH_AT and len(scheduled_consumers(info, config, node)) != 1:
        return ATTACH_ROOT
    return value


def scheduled_consumers(info, config, node):
    """The scheduled (not inlined) nodes that read a node, directly or through inlined ones."""
    result = []
    for name in node.consumers:
        consumer = info.node(name)
        if attachment(info, config, consumer) == ATTACH_INLINE:
            found = scheduled_consumers(info, config, consumer)
        else:
            found = [consumer]
        result += [c for c in found if all(c.name != r.name for r in result)]
    return result


def producer_attachment(info, config, name):
    """Where the node producing tensor `name` is computed; None for an input."""
    producer = next((n for n in info.nodes if n.name == name), None)
    return None if producer is None else attachment(info, config, producer)


def effective_inputs(info, config, node):
    """The tensors a node reads once inlined producers are substituted by what they read."""
    result = []
    for name in node.inputs:
        if producer_attachment(info, config, name) == ATTACH_INLINE:
            result += [t for t in effective_inputs(info, config, info.node(name)) if t not in result]
        elif name not in result:
            result.append(name)
    return result


def inline_steps(info, config):
    """ComputeInline for every node the config inlines (these come before any other step)."""
    return [ComputeInline(node.name) for node in info.nodes if attachment(info, config, node) == ATTACH_INLINE]


def scheduled_consumer(info, config, node):
    """The consumer a node attached 'at' is computed inside (its only scheduled consumer)."""
    return scheduled_consumers(info, config, node)[0]


def compute_at_steps(info, config, anchors):
    """ComputeAt for nodes attached 'at': inside their consumer's anchor, which anchors maps
    to (the stage that reads the node, e.g. the consumer's write cache, and its loop)."""
    steps = []
    for node in info.nodes:
        if attachment(info, config, node) == ATTACH_AT:
            stage, loop = anchors[scheduled_consumer(info, config, node).name]
            steps.append(ComputeAt(node.name, stage, loop))
    return steps


def split_steps(stage_name, node, loops, config, levels):
    """Split each knobbed loop; returns (steps, {loop name: [level loop names]}).

    Loops without a knob keep their own name at every level's place (they are length 1
    and stay outermost)."""
    steps, level_names = [], {}
    for loop in split_loops(loops):
        factors = tuple(config[knob_name(node, "split", loop)])
        steps.append(Split(stage_name, loop.name, factors))
        level_names[loop.name] = [f"{loop.name}.{level}" for level in range(levels)]
    return steps, level_names


def level_extents(node, config, level_names):
    """{loop name: trip count} for a node's original loops and their split levels."""
    extents = {loop.name: loop.extent for loop in node.loops}
    for loop in node.loops:
        if loop.name in level_names:
            factors = config[knob_name(node, "split", loop)]
            extents.update(zip(level_names[loop.name], factors))
    return extents


def level(level_names, loops, index):
    """The loop names at one tiling level, in the node's loop order."""
    return [level_names[loop.name][index] for loop in split_loops(loops)]


def reorder_step(stage_name, order):
    return [Reorder(stage_name, tuple(order))] if len(order) > 1 else []


def unroll_steps(stage_name, nest, extents, limit, stop_at):
    """Unroll the innermost unannotated loops while the product of their extents stays within
    limit; nest is the loop order, stop_at the loops that must not be unrolled."""
    steps, product = [], 1
    for name in reversed(nest):
        if name in stop_at:
            break
        if product * extents[name] > limit:
            break
        product *= extents[name]
        steps.append(Unroll(stage_name, name))
    return steps
