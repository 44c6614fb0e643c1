"""Where a template puts an operator's producer nodes (padding, expansion): the one rule all
CPU templates share."""

from flexsched.schedule import ComputeInline, Fuse, Parallel


def producer_steps(info):
    """Inline plain-copy producers; compute guarded (select) producers at root, in parallel.

    A guarded producer inlined into the main node would re-evaluate its select in the innermost
    loop, once per multiply-add, and block plain vector loads; computed at root it costs one
    parallel pass over the input, small beside the reduction. A guarded producer that feeds only
    root producers (expand feeding pad) is inlined there: it then also runs once per element."""
    nodes = [node for node in info.nodes if node.consumers]
    placement = {}
    for node in reversed(nodes):  # consumers first
        feeds_root_only = all(placement.get(consumer) == "root" for consumer in node.consumers)
        placement[node.name] = "inline" if not node.guarded or feeds_root_only else "root"
    steps = [ComputeInline(node.name) for node in nodes if placement[node.name] == "inline"]
    for node in nodes:
        if placement[node.name] == "root" and len(node.spatial) > 1:
            outer = tuple(loop.name for loop in node.spatial[:-1])
            fused = "+".join(outer)
            steps += ([Fuse(node.name, outer)] if len(outer) > 1 else []) + [Parallel(node.name, fused)]
    return steps
