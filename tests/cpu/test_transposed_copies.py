"""Layout conversions, and register tiles copied out across the output's contiguous axis, move square
tiles through registers: both sides are read and written a whole vector at a time, and outer
iterations past the last tile run lane by lane."""

import json

import numpy as np
import pytest

from analysis import analyze
from codegen.kernel import build
from flexsched.registry import get_task
from flexsched.schedule import Layout, Schedule
from flexsched.target import get_target
from space import generate
from space.config import Config


def _blocked_kernel(width):
    """A 1x1 convolution whose input and output are stored blocked by 8 channels inside the kernel."""
    task = get_task("C2D", 1, 16, width, width, 16, 1, 1, 0)
    return task, build(task, Schedule((Layout("I", 1, 8), Layout("O", 1, 8))))


@pytest.mark.parametrize("width", [16, 12])   # 12: whole tiles and a tail, on 8 and 16 lanes alike
def test_conversions_through_transposed_tiles_match_the_reference(width):
    task, kernel = _blocked_kernel(width)
    inputs = task.random_inputs(seed=3)
    (out,) = kernel.run(*inputs)
    np.testing.assert_allclose(out, task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)


def test_whole_tiles_are_shuffled_not_gathered_lane_by_lane():
    _, kernel = _blocked_kernel(16)
    text = kernel.compiled.unoptimized_ir   # what flexsched emitted, before LLVM's own vectorisers
    assert "shufflevector" in text
    # Nothing else in this kernel runs on vector lanes, so a conversion gathered or scattered lane by
    # lane would be the only source of per-lane inserts or extracts.
    assert "insertelement" not in text and "extractelement" not in text


def test_a_conversion_longer_than_a_strip_is_shuffled_strip_by_strip():
    """A 96-wide output row is copied back in strips, each through square tiles, and matches."""
    task = get_task("C2D", 1, 16, 4, 96, 16, 1, 1, 0)
    kernel = build(task, Schedule((Layout("O", 1, 8),)))
    inputs = task.random_inputs(seed=3)
    (out,) = kernel.run(*inputs)
    np.testing.assert_allclose(out, task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)
    text = kernel.compiled.unoptimized_ir
    assert "shufflevector" in text and "insertelement" not in text and "extractelement" not in text


def test_a_register_tile_vectorised_along_the_channels_is_copied_out_through_transposed_tiles():
    """A tile of 4 pixels x one vector of output channels writes the caller's NCHW output as 4 x 4
    squares, each stored 4 pixels at a time, rather than scattering every lane to its own channel."""
    task = get_task("C2D", 1, 8, 16, 16, 32, 1, 1, 0)
    space = generate(analyze(task), "llvm")
    lanes = get_target("llvm").vector_lanes
    config = space.config(space.random_point(0)).to_dict()
    # The tile takes k's innermost factor for the pixels (4) and the pixels' (a vector) for k.
    config.update({"O.accumulate": "registers", "O.vector": "k", "O.split.hw": (256 // lanes, 1, 1, lanes),
                   "O.split.k": (8, 1, 1, 4), "O.pack.W": "none", "O.block.pad": "none"})
    kernel = build(task, space.schedule(space.point(Config.from_dict(config))))
    inputs = task.random_inputs(seed=3)
    (out,) = kernel.run(*inputs)
    np.testing.assert_allclose(out, task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)
    text = kernel.compiled.unoptimized_ir
    assert "store <4 x float>" in text and "extractelement" not in text


def test_a_weight_panel_copied_with_one_iteration_loops_between_its_two_is_shuffled():
    """A 1 x 1 weight's packed panel, blocked by 8 output channels, keeps its r and s loops (one
    iteration each) between the channel loop that reads the source contiguously and the vectorised
    block: the copy still moves square tiles through registers, not a lane at a time."""
    task = get_task("C2D", 1, 16, 4, 4, 32, 1, 1, 0)
    steps = [{"kind": "cache_read", "tensor": "W", "scope": "local", "readers": ["O"]},
             {"kind": "split", "node": "O", "loop": "k", "factors": [2, 16]},
             {"kind": "reorder", "node": "O", "order": ["b", "k.0", "k.1", "hw"]},
             {"kind": "compute_at", "node": "W.local", "consumer": "O", "loop": "k.0"},
             {"kind": "layout", "tensor": "W.local", "dim": 0, "block": 8, "interface": False},
             {"kind": "split", "node": "W.local", "loop": "W.local.ax0", "factors": [4, 8]},
             {"kind": "reorder", "node": "W.local",
              "order": ["W.local.ax0.0", "W.local.ax1", "W.local.ax2", "W.local.ax3", "W.local.ax0.1"]},
             {"kind": "vectorize", "node": "W.local", "loop": "W.local.ax0.1"}]
    kernel = build(task, Schedule.from_json(json.dumps(steps)))
    inputs = task.random_inputs(seed=3)
    (out,) = kernel.run(*inputs)
    np.testing.assert_allclose(out, task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)
    text = kernel.compiled.unoptimized_ir
    assert "shufflevector" in text and "insertelement" not in text and "extractelement" not in text


def _three_by_three_panel_kernel(channels, copy_order):
    """A 3 x 3 convolution whose weight panel, blocked by 8 output channels, is copied with its c, r
    and s loops in `copy_order` around the vectorised block."""
    task = get_task("C2D", 1, channels, 6, 6, 32, 3, 1, 1)
    axes = {"c": "W.local.ax1", "r": "W.local.ax2", "s": "W.local.ax3"}
    steps = [{"kind": "cache_read", "tensor": "W", "scope": "local", "readers": ["O"]},
             {"kind": "split", "node": "O", "loop": "k", "factors": [2, 16]},
             {"kind": "reorder", "node": "O", "order": ["b", "k.0", "k.1", "h", "w"]},
             {"kind": "compute_at", "node": "W.local", "consumer": "O", "loop": "k.0"},
             {"kind": "layout", "tensor": "W.local", "dim": 0, "block": 8, "interface": False},
             {"kind": "split", "node": "W.local", "loop": "W.local.ax0", "factors": [4, 8]},
             {"kind": "reorder", "node": "W.local",
              "order": ["W.local.ax0.0"] + [axes[axis] for axis in copy_order] + ["W.local.ax0.1"]},
             {"kind": "vectorize", "node": "W.local", "loop": "W.local.ax0.1"}]
    return task, build(task, Schedule.from_json(json.dumps(steps)))


@pytest.mark.parametrize("channels, copy_order", [(8, "crs"), (8, "rcs"), (8, "csr"), (3, "crs")])
def test_three_by_three_weight_panels_match_the_reference_in_any_copy_order(channels, copy_order):
    task, kernel = _three_by_three_panel_kernel(channels, copy_order)
    inputs = task.random_inputs(seed=3)
    (out,) = kernel.run(*inputs)
    np.testing.assert_allclose(out, task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)


def test_a_three_by_three_weight_panel_copied_along_its_whole_rows_is_shuffled():
    """The c, r and s loops of a 3 x 3 weight's panel walk one run of the source (72 floats a channel
    here) while the vectorised block walks the output channels: taken as one loop of 72 steps the copy
    moves square tiles through registers, though s alone (3 steps) is shorter than a vector."""
    _, kernel = _three_by_three_panel_kernel(8, "crs")
    text = kernel.compiled.unoptimized_ir
    assert "shufflevector" in text and "insertelement" not in text and "extractelement" not in text
