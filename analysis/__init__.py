"""Static analysis: the mini-graph of a computation and each node's loops and accesses."""

from flexsched.merge_axes import merge_contiguous_axes
from flexsched.tensor import Tensor

from .access import read_accesses, write_access
from .graph import mini_graph, post_order
from .info import Access, AnalysisInfo, IndexAccess, Loop, NodeInfo, TensorInfo
from .statistics import has_select, loops_of, ops_per_point

__all__ = ["analyze", "mini_graph", "post_order", "AnalysisInfo", "NodeInfo", "Loop", "Access",
           "IndexAccess", "TensorInfo"]


def analyze(target):
    """AnalysisInfo of a registered Task, an output Tensor, or a sequence of output Tensors."""
    if isinstance(target, Tensor):
        outputs, label = (target,), target.name
    elif hasattr(target, "outputs") and hasattr(target, "inputs"):
        outputs, label = tuple(target.outputs), str(target)
    else:
        outputs = tuple(target)
        label = ", ".join(t.name for t in outputs)
    merged = merge_contiguous_axes(outputs)   # the computation as the schedules see it
    outputs = tuple(merged[t.name] for t in outputs)
    graph = mini_graph(outputs)
    order = post_order(graph, outputs)
    tensors = {name: graph.nodes[name]["tensor"] for name in order}
    output_names = tuple(t.name for t in outputs)
    nodes = tuple(_node_info(tensors[name], graph) for name in order if not tensors[name].is_placeholder)
    if hasattr(target, "inputs"):  # a task keeps its own argument order
        inputs = tuple(t.name for t in target.inputs)
    else:
        inputs = tuple(name for name in order if tensors[name].is_placeholder)

    def role(name):
        if name in output_names:
            return "output"
        return "input" if tensors[name].is_placeholder else "intermediate"

    infos = tuple(TensorInfo(name, tensors[name].shape, tensors[name].dtype, role(name))
                  for name in (*inputs, *(n for n in order if n not in inputs)))
    return AnalysisInfo(label, nodes, infos, inputs, output_names, tuple(graph.edges()))


def _node_info(tensor, graph):
    spatial, reduce = loops_of(tensor)
    body = tensor.body
    return NodeInfo(
        name=tensor.name,
        shape=tensor.shape,
        dtype=tensor.dtype,
        spatial=spatial,
        reduce=reduce,
        order=tuple(loop.name for loop in (*spatial, *reduce)),
        inputs=tuple(t.name for t in tensor.inputs),
        num_outputs=1,
        consumers=tuple(graph.successors(tensor.name)),
        reads=read_accesses(body),
        write=write_access(tensor),
        reduction=getattr(body, "combiner", None),
        ops_per_point=ops_per_point(body),
        body=str(body),
        guarded=has_select(body),
    )
