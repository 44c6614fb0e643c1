"""Layout conversions, and register tiles copied out across the output's contiguous axis, move square
tiles through registers: both sides are read and written a whole vector at a time, and outer
iterations past the last tile run lane by lane."""

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
