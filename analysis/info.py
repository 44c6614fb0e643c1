"""The frozen, JSON-friendly results of the static analysis."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import networkx as nx

_ITEM_BYTES = {"float16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "bool": 1}


@dataclass(frozen=True)
class Loop:
    """One loop of a node's natural nest."""

    name: str
    extent: int
    kind: str  # "spatial" or "reduce"


@dataclass(frozen=True)
class IndexAccess:
    """One dimension of a tensor access: coefficient * loop + ... + offset when affine."""

    expr: str
    loops: tuple          # names of the loops the index depends on
    affine: bool          # False when // or % appear (then coefficients is empty)
    coefficients: tuple = ()  # ((loop name, coefficient), ...)
    offset: int = 0

    def coefficient(self, loop):
        return dict(self.coefficients).get(loop, 0)


@dataclass(frozen=True)
class Access:
    """A read of a tensor inside a node's body (or the node's write of its output)."""

    tensor: str
    indices: tuple  # IndexAccess per dimension


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple
    dtype: str
    role: str  # "input", "intermediate" or "output"

    @property
    def bytes(self):
        return math.prod(self.shape) * _ITEM_BYTES.get(self.dtype, 4)


@dataclass(frozen=True)
class NodeInfo:
    """Statistical and structural facts about one compute node (one loop nest)."""

    name: str
    shape: tuple
    dtype: str
    spatial: tuple        # Loop, outermost first
    reduce: tuple         # Loop
    order: tuple          # loop names of the natural nest: spatial then reduce
    inputs: tuple         # names of the tensors read
    num_outputs: int
    consumers: tuple      # names of the nodes that read this node's output
    reads: tuple          # Access
    write: Access
    reduction: str | None  # "sum", "max", "min", or None for an elementwise node
    ops_per_point: int    # arithmetic operations per iteration of the nest
    body: str
    guarded: bool = False  # the body selects its value by a condition (padding, masks)

    @property
    def num_spatial(self):
        return len(self.spatial)

    @property
    def num_reduce(self):
        return len(self.reduce)

    @property
    def iterations(self):
        return math.prod(loop.extent for loop in (*self.spatial, *self.reduce))

    @property
    def flops(self):
        return self.iterations * self.ops_per_point

    @property
    def loops(self):
        return (*self.spatial, *self.reduce)


@dataclass(frozen=True)
class AnalysisInfo:
    """The mini-graph of a computation with per-node loop statistics, in post-order."""

    task: str
    nodes: tuple      # NodeInfo, producers before consumers (post-order from the outputs)
    tensors: tuple    # TensorInfo of every tensor, inputs first
    inputs: tuple     # names of the input tensors
    outputs: tuple    # names of the output tensors
    edges: tuple      # (producer tensor, consumer node) pairs

    @property
    def num_nodes(self):
        return len(self.nodes)

    @property
    def num_spatial(self):
        return sum(node.num_spatial for node in self.nodes)

    @property
    def num_reduce(self):
        return sum(node.num_reduce for node in self.nodes)

    @property
    def flops(self):
        return sum(node.flops for node in self.nodes)

    @property
    def compulsory_bytes(self):
        """Every input read once and every output written once: the least memory traffic any
        schedule can have, which GB/s figures divide by time."""
        return sum(t.bytes for t in self.tensors if t.role in ("input", "output"))

    def node(self, name):
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"no node named '{name}'; nodes: {', '.join(n.name for n in self.nodes)}")

    def tensor(self, name):
        for tensor in self.tensors:
            if tensor.name == name:
                return tensor
        raise KeyError(f"no tensor named '{name}'")

    def graph(self):
        """The mini-graph as a networkx DiGraph: tensors as nodes, data flow as edges."""
        graph = nx.DiGraph()
        computes = {node.name: node for node in self.nodes}
        for tensor in self.tensors:
            kind = "compute" if tensor.name in computes else "placeholder"
            graph.add_node(tensor.name, kind=kind, role=tensor.role, shape=tensor.shape)
        graph.add_edges_from(self.edges)
        return graph

    def to_dict(self):
        """A JSON-ready dict (the shape `flexsched analyze --json` prints)."""
        def node_dict(node):
            data = asdict(node)
            for key in ("spatial", "reduce"):
                data[key] = [{"name": loop.name, "extent": loop.extent} for loop in getattr(node, key)]
            data.update(num_spatial=node.num_spatial, num_reduce=node.num_reduce, flops=node.flops)
            for access in (*data["reads"], data["write"]):
                for index in access["indices"]:
                    index["coefficients"] = dict(index["coefficients"])
            return data

        return {
            "task": self.task,
            "nodes": [node_dict(node) for node in self.nodes],
            "tensors": [asdict(t) for t in self.tensors],
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "edges": [list(edge) for edge in self.edges],
            "num_spatial": self.num_spatial,
            "num_reduce": self.num_reduce,
            "num_nodes": self.num_nodes,
            "flops": self.flops,
            "compulsory_bytes": self.compulsory_bytes,
        }
