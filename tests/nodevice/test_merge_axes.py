"""Merging contiguous axes (flexsched.merge_axes): which dimensions merge, and that the lowered
kernel of the merged computation keeps the caller's shapes and computes the same."""

import numpy as np
import pytest

import flexsched as fs
from analysis import analyze
from cases import LocalTask
from codegen.interpret import run
from codegen.kernel import lower_for
from flexsched.merge_axes import merge_contiguous_axes
from flexsched.registry import get_task
from space import generate


def shapes(task):
    return {name: tensor.shape for name, tensor in merge_contiguous_axes(tuple(task.outputs)).items()}


def test_a_1x1_convolution_merges_its_rows_and_columns():
    task = get_task("C2D", 1, 8, 7, 5, 4, 1, 1, 0)
    assert shapes(task) == {"I": (1, 8, 35), "pad": (1, 8, 35), "W": (4, 8, 1, 1), "O": (1, 4, 35)}
    node = analyze(task).node("O")
    assert [loop.name for loop in node.spatial] == ["b", "k", "hw"]
    assert [loop.extent for loop in node.spatial] == [1, 4, 35]


@pytest.mark.parametrize("args", [
    (1, 8, 7, 5, 4, 3, 1, 1),   # a 3x3 window: h + rh
    (1, 8, 7, 5, 4, 1, 2, 0),   # stride 2: 2 h
])
def test_windows_and_strides_keep_the_dimensions_apart(args):
    task = get_task("C2D", *args)
    assert all(tensor.shape == shapes(task)[tensor.name] for tensor in task.tensors)


def test_a_matrix_product_keeps_its_dimensions():
    task = get_task("GMM", 6, 5, 4)
    assert shapes(task) == {"A": (6, 5), "B": (5, 4), "O": (6, 4)}


def test_an_elementwise_chain_merges_into_one_dimension():
    x = fs.placeholder((3, 4, 5), name="X")
    y = fs.compute((3, 4, 5), lambda i, j, k: x[i, j, k] * 2.0, name="Y")
    z = fs.compute((3, 4, 5), lambda i, j, k: y[i, j, k] + 1.0, name="Z")
    assert shapes(LocalTask("chain", [x], [z])) == {"X": (60,), "Y": (60,), "Z": (60,)}


def test_a_reversed_or_transposed_read_keeps_those_dimensions_apart_in_every_tensor():
    x = fs.placeholder((3, 4, 5), name="X")
    y = fs.compute((3, 4, 5), lambda i, j, k: x[i, j, k] * 2.0, name="Y")
    reversed_ = fs.compute((3, 4, 5), lambda i, j, k: y[i, j, 4 - k], name="R")
    assert shapes(LocalTask("reverse", [x], [reversed_])) == {"X": (12, 5), "Y": (12, 5), "R": (12, 5)}
    transposed = fs.compute((3, 5, 4), lambda i, k, j: y[i, j, k], name="T")
    assert shapes(LocalTask("transpose", [x], [transposed])) == {"X": (3, 4, 5), "Y": (3, 4, 5),
                                                                  "T": (3, 5, 4)}


def test_an_axis_used_in_a_condition_keeps_its_dimension():
    x = fs.placeholder((4, 6), name="X")
    y = fs.compute((4, 6), lambda i, j: fs.select(j > 2, x[i, j], 0.0), name="Y")
    assert shapes(LocalTask("masked", [x], [y])) == {"X": (4, 6), "Y": (4, 6)}


def test_the_lowered_kernel_takes_the_callers_shapes_and_matches_the_reference():
    task = get_task("C2D", 1, 8, 7, 5, 4, 1, 1, 0)
    space = generate(analyze(task), "llvm")
    rng = np.random.default_rng(4)
    inputs = task.random_inputs(seed=2)
    expected = task.evaluate(*inputs)[0]
    for _ in range(4):
        _, lowered = lower_for(task, space.schedule(space.random_point(rng)), "llvm")
        assert dict(lowered.views) == {"I": (1, 8, 7, 5), "O": (1, 4, 7, 5)}
        params = lowered.func.params
        arrays = [array.reshape(param.shape) for array, param in zip(inputs, params)]
        out = np.empty(params[2].shape, np.float32)
        run(lowered.func, [*arrays, out, *(np.empty(b.shape, b.dtype) for b in lowered.workspaces)])
        np.testing.assert_allclose(out.reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)
