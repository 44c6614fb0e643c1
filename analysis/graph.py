"""The mini-graph of a computation: tensors as nodes, data flowing along edges (networkx)."""

import networkx as nx

from flexsched.errors import DefinitionError


def mini_graph(outputs):
    """DiGraph of every tensor the outputs depend on; edge producer -> consumer.

    Each graph node is a tensor name with attributes `tensor` (the Tensor) and `kind`
    ("placeholder" or "compute").
    """
    graph = nx.DiGraph()
    stack = list(outputs)
    while stack:
        tensor = stack.pop()
        if tensor.name in graph:
            if graph.nodes[tensor.name]["tensor"] is not tensor:
                raise DefinitionError(f"two different tensors are named '{tensor.name}'; give each a "
                                      "distinct name=")
            continue
        graph.add_node(tensor.name, tensor=tensor, kind="placeholder" if tensor.is_placeholder else "compute")
        for producer in tensor.inputs:
            stack.append(producer)
    for name, data in graph.nodes(data=True):
        for producer in data["tensor"].inputs:
            graph.add_edge(producer.name, name)
    if not nx.is_directed_acyclic_graph(graph):
        raise DefinitionError("the computation's graph has a cycle")
    return graph


def post_order(graph, outputs):
    """Tensor names in post-order from the outputs: every producer before its consumers."""
    reverse = graph.reverse(copy=False)
    order = []
    for out in outputs:
        for name in nx.dfs_postorder_nodes(reverse, source=out.name):
            if name not in order:
                order.append(name)
    return order
