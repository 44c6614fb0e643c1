"""Names by role: which node, loop and tensor of one computation plays the part of which in another.

A reducing node's loops (those of extent above 1) have roles by position: its n-th spatial loop,
its n-th reduce loop. An input's role is the set of its reader's loop roles that index it. Two
computations correspond where their reducing nodes, taken in order, have as many loops of each kind
and inputs of the same distinct roles. GMM, C[i, j] = sum_rk A[i, rk] B[rk, j], and a 1x1
convolution once its rows and columns merge, O[b, k, hw] = sum_rc pad[b, rc, hw] W[k, rc, 0, 0],
correspond (i: k, j: hw, rk: rc, A: W, B: pad), so a schedule tuned for one is a start for the other.
Nodes that do not reduce (a padding copy, an elementwise epilogue) have no counterpart.
"""

from __future__ import annotations

from .info import AnalysisInfo


def _loop_roles(node):
    """{loop name: ("spatial" or "reduce", position)} for the node's loops of extent above 1."""
    roles = {}
    for kind, loops in (("spatial", node.spatial), ("reduce", node.reduce)):
        for position, loop in enumerate(loop for loop in loops if loop.extent > 1):
            roles[loop.name] = (kind, position)
    return roles


def _input_roles(node, loop_roles):
    """{input tensor: frozenset of the loop roles that index it}."""
    roles = {}
    for access in node.reads:
        used = {loop_roles[name] for index in access.indices for name in index.loops if name in loop_roles}
        roles[access.tensor] = roles.get(access.tensor, frozenset()) | used
    return roles


def _node_names(source_node, target_node):
    """{source name: target name} for the loops and inputs of two reducing nodes; None where their
    roles differ or an input's role is not its own alone."""
    source_loops, target_loops = _loop_roles(source_node), _loop_roles(target_node)
    if sorted(source_loops.values()) != sorted(target_loops.values()):
        return None
    source_inputs = _input_roles(source_node, source_loops)
    target_inputs = _input_roles(target_node, target_loops)
    by_role = {role: name for name, role in target_inputs.items()}
    if (len(by_role) != len(target_inputs) or len(set(source_inputs.values())) != len(source_inputs)
            or set(source_inputs.values()) != set(by_role)):
        return None
    loop_by_role = {role: name for name, role in target_loops.items()}
    names = {name: loop_by_role[role] for name, role in source_loops.items()}
    names.update({name: by_role[role] for name, role in source_inputs.items()})
    return names


def corresponding_names(source: AnalysisInfo, target: AnalysisInfo):
    """{source node: (target node, {source loop or input: target name})} for the reducing nodes of
    two computations that correspond by role; None where they do not (see the module's docstring)."""
    source_nodes = [node for node in source.nodes if node.reduce]
    target_nodes = [node for node in target.nodes if node.reduce]
    if not source_nodes or len(source_nodes) != len(target_nodes):
        return None
    result = {}
    for source_node, target_node in zip(source_nodes, target_nodes):
        names = _node_names(source_node, target_node)
        if names is None:
            return None
        result[source_node.name] = (target_node.name, names)
    return result
