"""The static analyzer: Table 3 of the paper, loops, accesses, the mini-graph, JSON."""

import json

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flexsched as fs
from analysis import analyze, mini_graph, post_order
from analysis.access import affine_form
from flexsched.numpy_expr import eval_expr
from flexsched.registry import get_task

# Table 3 of the FlexTensor paper: (#spatial loops, #reduce loops, #nodes) over the mini-graph.
TABLE_3 = {
    "GMV": ((256, 512), (1, 1, 1)),
    "GMM": ((64, 32, 48), (2, 1, 1)),
    "BIL": ((8, 16, 12, 4), (2, 2, 1)),
    "C1D": ((1, 16, 50, 8, 3, 1, 1), (6, 2, 2)),
    "T1D": ((1, 16, 25, 8, 3, 2, 1), (9, 2, 3)),
    "C2D": ((1, 64, 112, 112, 192, 3, 1, 1), (8, 3, 2)),
    "T2D": ((1, 16, 14, 14, 8, 2, 2, 0), (12, 3, 3)),
    "C3D": ((1, 8, 4, 14, 14, 8, 3, 1, 1), (10, 4, 2)),
    "T3D": ((1, 8, 4, 7, 7, 8, 3, 2, 1), (15, 4, 3)),
}


@pytest.mark.parametrize("name", sorted(TABLE_3))
def test_table_3_loop_and_node_counts(name):
    args, expected = TABLE_3[name]
    info = analyze(get_task(name, *args))
    assert (info.num_spatial, info.num_reduce, info.num_nodes) == expected


def test_gmm_loops_order_inputs_and_flops():
    info = analyze(get_task("GMM", 64, 32, 48))
    (node,) = info.nodes
    assert [(l.name, l.extent) for l in node.spatial] == [("i", 64), ("j", 48)]
    assert [(l.name, l.extent) for l in node.reduce] == [("rk", 32)]
    assert node.order == ("i", "j", "rk")
    assert node.inputs == ("A", "B") and node.num_outputs == 1 and node.consumers == ()
    assert node.reduction == "sum"
    assert info.flops == 2 * 64 * 32 * 48  # a multiply-add counts 2
    assert info.inputs == ("A", "B") and info.outputs == ("O",)


def test_conv_nodes_in_post_order_with_consumers():
    info = analyze(get_task("T2D", 1, 4, 5, 5, 3, 3, 2, 1))
    assert [n.name for n in info.nodes] == ["expand", "pad", "O"]
    assert info.node("expand").consumers == ("pad",)
    assert info.node("pad").consumers == ("O",)
    assert info.node("expand").reduction is None and info.node("expand").flops == 0
    assert set(info.node("O").inputs) == {"pad", "W"}
    assert {t.name: t.role for t in info.tensors} == {
        "I": "input", "W": "input", "expand": "intermediate", "pad": "intermediate", "O": "output"}


def test_strided_conv_access_coefficients():
    info = analyze(get_task("C2D", 1, 4, 9, 9, 2, 3, 2, 1, 2))
    read = next(a for a in info.node("O").reads if a.tensor == "pad")
    h_index = read.indices[2]
    assert h_index.affine and h_index.loops == ("h", "rh")
    assert h_index.coefficient("h") == 2 and h_index.coefficient("rh") == 2 and h_index.offset == 0
    pad_read = info.node("pad").reads[0]
    assert pad_read.tensor == "I" and pad_read.indices[2].offset == -1


def test_quasi_affine_index_is_flagged():
    info = analyze(get_task("BCM", 16, 8, 4))
    read_w = next(a for a in info.node("O").reads if a.tensor == "W")
    assert [index.affine for index in read_w.indices] == [False, False, False]
    assert read_w.indices[2].loops == ("i", "rk")


def test_graph_is_networkx_with_data_flow_edges():
    info = analyze(get_task("C1D", 1, 4, 10, 2, 3))
    graph = info.graph()
    assert isinstance(graph, nx.DiGraph)
    assert set(graph.edges) == {("I", "pad"), ("pad", "O"), ("W", "O")}
    assert graph.nodes["pad"]["kind"] == "compute" and graph.nodes["W"]["kind"] == "placeholder"


def test_post_order_of_a_diamond():
    X = fs.placeholder((4,), name="X")
    left = fs.compute((4,), lambda i: X[i] * 2.0, name="left")
    right = fs.compute((4,), lambda i: X[i] + 1.0, name="right")
    out = fs.compute((4,), lambda i: left[i] + right[i], name="out")
    order = post_order(mini_graph([out]), [out])
    assert order.index("X") < order.index("left") < order.index("out")
    assert order.index("right") < order.index("out") and len(order) == 4
    info = analyze(out)
    assert info.num_nodes == 3 and info.node("out").ops_per_point == 1
    assert info.node("left").consumers == ("out",)


def test_same_name_for_two_tensors_is_an_error():
    X1, X2 = fs.placeholder((4,), name="X"), fs.placeholder((4,), name="X")
    out = fs.compute((4,), lambda i: X1[i] + X2[i], name="out")
    with pytest.raises(fs.DefinitionError, match="two different tensors are named 'X'"):
        analyze(out)


def test_flops_count_math_and_selects_but_not_index_arithmetic():
    X = fs.placeholder((8,), name="X")
    k = fs.reduce_axis(3, "k")
    out = fs.compute((6,), lambda i: fs.max(fs.exp(X[i + k]) * 2.0, axis=k), name="out")
    info = analyze(out)
    assert info.node("out").ops_per_point == 3  # exp, *, max-combine
    assert info.flops == 6 * 3 * 3


def test_json_has_the_documented_fields():
    data = json.loads(json.dumps(analyze(get_task("C2D", 1, 3, 8, 8, 4, 3, 1, 1)).to_dict()))
    assert {"nodes", "num_spatial", "num_reduce", "num_nodes"} <= set(data)
    assert (data["num_spatial"], data["num_reduce"], data["num_nodes"]) == (8, 3, 2)
    conv = data["nodes"][1]
    assert conv["name"] == "O" and conv["consumers"] == [] and set(conv["inputs"]) == {"pad", "W"}
    assert conv["spatial"][2] == {"name": "h", "extent": 8}
    assert [r["name"] for r in conv["reduce"]] == ["rc", "rh", "rw"]


# Random affine index expressions: the extracted form must evaluate to the same numbers.
_VARS = [fs.IterVar(name, 5, "spatial") for name in ("a", "b", "c")]


@st.composite
def affine_exprs(draw, depth=3):
    if depth == 0 or draw(st.booleans()):
        if draw(st.booleans()):
            return draw(st.sampled_from(_VARS))
        return fs.const(draw(st.integers(-7, 7)), "int32")
    op = draw(st.sampled_from(["+", "-", "*"]))
    left = draw(affine_exprs(depth=depth - 1))
    if op == "*":
        return left * draw(st.integers(-4, 4))
    right = draw(affine_exprs(depth=depth - 1))
    return left + right if op == "+" else left - right


@settings(max_examples=200, deadline=None)
@given(affine_exprs(), st.lists(st.integers(0, 4), min_size=3, max_size=3))
def test_affine_form_agrees_with_evaluation(expr, point):
    coefficients, offset = affine_form(expr)
    env = {id(var): value for var, value in zip(_VARS, point)}
    expected = int(eval_expr(expr, env, None))
    assert sum(coefficients.get(v.name, 0) * x for v, x in zip(_VARS, point)) + offset == expected


def test_a_body_that_selects_by_a_condition_is_guarded():
    padded = {node.name: node.guarded for node in analyze(get_task("C2D", 1, 8, 14, 14, 32, 3, 1, 1)).nodes}
    unpadded = {node.name: node.guarded for node in analyze(get_task("C2D", 1, 8, 14, 14, 32, 1, 1, 0)).nodes}
    assert padded == {"pad": True, "O": False} and unpadded == {"pad": False, "O": False}


def test_gmm_and_a_1x1_convolution_correspond_by_role():
    from analysis.roles import corresponding_names

    gmm, pointwise = analyze(get_task("GMM", 64, 32, 128)), analyze(get_task("C2D", 1, 128, 8, 8, 64, 1, 1, 0))
    # O[b, k, hw] = sum_rc pad[b, rc, hw] W[k, rc, 0, 0]: rows k, columns hw, reduction rc.
    assert corresponding_names(gmm, pointwise) == {"O": ("O", {"i": "k", "j": "hw", "rk": "rc", "A": "W", "B": "pad"})}
    assert corresponding_names(pointwise, gmm) == {"O": ("O", {"k": "i", "hw": "j", "rc": "rk", "W": "A", "pad": "B"})}


def test_computations_of_other_roles_do_not_correspond():
    from analysis.roles import corresponding_names

    gmm = analyze(get_task("GMM", 64, 32, 128))
    windowed = analyze(get_task("C2D", 1, 128, 8, 8, 64, 3, 1, 1))   # rows and columns apart, three reductions
    A, B = fs.placeholder((16, 16), name="A"), fs.placeholder((16, 16), name="B")
    k = fs.reduce_axis(16, "k")
    # Both inputs indexed by the same loops: which is which cannot be told by role.
    alike = analyze(fs.compute((16, 16), lambda i, j: fs.sum(A[i, k] * B[i, k], axis=k), name="O"))
    elementwise = analyze(fs.compute((16, 16), lambda i, j: A[i, j] + B[j, i], name="S"))   # nothing reduces
    assert corresponding_names(gmm, windowed) is None and corresponding_names(windowed, gmm) is None
    assert corresponding_names(gmm, alike) is None and corresponding_names(alike, alike) is None
    assert corresponding_names(gmm, elementwise) is None
    assert corresponding_names(windowed, analyze(get_task("C2D", 1, 4, 16, 16, 8, 3, 1, 1)))["O"][0] == "O"
