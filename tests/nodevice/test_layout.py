"""Blocked layouts: index splitting, array conversion, and lowered kernels (interpreted) that
store a tensor blocked, converting at the interface or inside the kernel."""

import numpy as np
import pytest

from codegen.interpret import run
from codegen.ir import For, walk_stmts
from codegen.kernel import lower_for
from codegen.layout import LayoutError, from_blocked, split_index, to_blocked
from flexsched.expr import IterVar, format_expr
from flexsched.registry import get_task
from flexsched.schedule import Blocking, CacheRead, Layout, Reorder, Schedule, Split, Vectorize


def var(name, extent):
    return IterVar(name, extent, "loop", "int64")


def test_an_index_split_by_its_inner_factor_divides_exactly():
    outer, inner = var("o", 4), var("i", 16)
    quotient, remainder = split_index(outer * 16 + inner + 32, 16)
    assert (format_expr(quotient), format_expr(remainder)) == ("2 + o", "i")


def test_an_index_that_straddles_blocks_falls_back_to_division():
    outer, inner = var("o", 8), var("i", 8)
    quotient, remainder = split_index(outer * 8 + inner, 16)
    assert "//" in format_expr(quotient) and "%" in format_expr(remainder)


def test_to_blocked_is_nchw_to_nchwc_and_from_blocked_inverts_it():
    array = np.arange(2 * 32 * 3 * 5, dtype="float32").reshape(2, 32, 3, 5)
    blocked = to_blocked(array, (Blocking(1, 16),))
    assert blocked.shape == (2, 2, 3, 5, 16)
    assert blocked[1, 1, 2, 4, 3] == array[1, 16 + 3, 2, 4]
    np.testing.assert_array_equal(from_blocked(blocked, array.shape, (Blocking(1, 16),)), array)


def test_two_blockings_give_kcrs_c_k():
    weights = np.random.default_rng(0).random((32, 16, 3, 3)).astype("float32")
    blockings = (Blocking(1, 4), Blocking(0, 8))
    blocked = to_blocked(weights, blockings)
    assert blocked.shape == (4, 4, 3, 3, 4, 8)
    assert blocked[3, 2, 1, 0, 1, 5] == weights[3 * 8 + 5, 2 * 4 + 1, 1, 0]
    np.testing.assert_array_equal(from_blocked(blocked, weights.shape, blockings), weights)


def interpreted(task, steps):
    """(outputs in the caller's layout, lowered) of task under steps, run by the interpreter; blocked
    interface parameters are converted here, as Kernel.run does."""
    _, lowered = lower_for(task, Schedule(tuple(steps)), "llvm")
    inputs = task.random_inputs(0)
    blocked = {param.name: param for param in lowered.blocked}
    params = lowered.func.params
    arrays = [to_blocked(a, blocked[p.name].blockings) if p.name in blocked else a for p, a in zip(params, inputs)]
    arrays += [np.zeros(p.shape, p.dtype) for p in params[len(inputs):]]
    run(lowered.func, arrays)
    outputs = arrays[len(inputs):len(inputs) + len(lowered.outputs)]
    outputs = [from_blocked(a, blocked[p.name].logical_shape, blocked[p.name].blockings) if p.name in blocked else a
               for p, a in zip(params[len(inputs):], outputs)]
    return outputs, lowered, task.evaluate(*inputs)


@pytest.mark.parametrize("steps", [
    [Layout("B", 1, 8)],
    [Layout("A", 1, 4), Layout("A", 0, 8)],
    [Layout("O", 1, 8)],
    [Layout("B", 1, 8, True), Layout("O", 1, 8, True)],
    [Split("O", "j", (3, 8)), Reorder("O", ("i", "j.0", "rk", "j.1")), Vectorize("O", "j.1"), Layout("O", 1, 8)],
    [CacheRead("B", "local", ("O",)), Layout("B.local", 1, 8)],
], ids=["input", "input twice", "output", "interface", "vectorised output", "root cache"])
def test_blocked_kernels_match_the_reference(steps):
    outputs, _, reference = interpreted(get_task("GMM", 16, 12, 24), steps)
    np.testing.assert_allclose(outputs[0], reference[0], rtol=1e-5, atol=1e-5)


def test_an_input_blocked_inside_the_kernel_is_converted_there():
    _, lowered, _ = interpreted(get_task("GMM", 16, 12, 24), [Layout("B", 1, 8)])
    assert [p.shape for p in lowered.func.params] == [(16, 12), (12, 24), (16, 24), (12, 3, 8)]
    assert lowered.blocked == ()
    first = next(s for s in walk_stmts(lowered.func.body) if isinstance(s, For))
    assert first.kind == "parallel" and first.var.name.startswith("B_blocked.")   # the conversion comes first


def test_a_blocked_interface_changes_the_parameters_shape():
    _, lowered, _ = interpreted(get_task("GMM", 16, 12, 24), [Layout("B", 1, 8, True)])
    assert [p.shape for p in lowered.func.params] == [(16, 12), (12, 3, 8), (16, 24)]
    assert lowered.blocked[0].describe() == "B: [12, 24] blocked as [12, 3, 8] (dim 1 by 8)"


def test_a_block_that_does_not_divide_a_region_is_refused():
    from flexsched.schedule import ComputeAt
    task = get_task("GMM", 16, 12, 24)
    steps = [CacheRead("B", "local", ("O",)), Split("O", "j", (4, 6)), ComputeAt("B.local", "O", "j.0"),
             Layout("B.local", 1, 4)]
    with pytest.raises(LayoutError, match="buffer 'B_local': dimension 1 \\(extent 6\\) is not a multiple of its block 4"):
        lower_for(task, Schedule(tuple(steps)), "llvm")


def test_with_blocked_interface_moves_the_named_conversions_to_the_caller():
    from flexsched.schedule import with_blocked_interface
    task = get_task("GMM", 16, 12, 24)
    schedule = with_blocked_interface(Schedule((Layout("B", 1, 8), Layout("O", 1, 8))), ["B"])
    assert [step.interface for step in schedule.steps] == [True, False]
    outputs, lowered, reference = interpreted(task, schedule.steps)
    assert [p.name for p in lowered.blocked] == ["B"]
    np.testing.assert_allclose(outputs[0], reference[0], rtol=1e-5, atol=1e-5)


def _output_conversion(lowered):
    """The loops of the nest copying the blocked output back to the caller's O, outermost first."""
    nest = [s for s in walk_stmts(lowered.func.body) if isinstance(s, For) and s.var.name.startswith("O.c")]
    return [(loop.var.name, loop.extent, loop.kind) for loop in nest]


def test_a_long_conversion_row_is_copied_in_strips_of_whole_vectors():
    # O (16 x 96) blocked by 8 rows: the copy back reads the block along i and writes along j, 96 long.
    outputs, lowered, reference = interpreted(get_task("GMM", 16, 12, 96), [Layout("O", 0, 8)])
    np.testing.assert_allclose(outputs[0], reference[0], rtol=1e-5, atol=1e-5)
    assert _output_conversion(lowered) == [("O.c0o", 2, "parallel"), ("O.c1o", 2, "serial"), ("O.c0i", 8, "serial"),
                                           ("O.c1i", 48, "vectorized")]


def test_a_long_conversion_row_without_a_strip_of_whole_vectors_stays_as_it_is():
    outputs, lowered, reference = interpreted(get_task("GMM", 16, 12, 67), [Layout("O", 0, 8)])
    np.testing.assert_allclose(outputs[0], reference[0], rtol=1e-5, atol=1e-5)
    assert _output_conversion(lowered) == [("O.c0o", 2, "parallel"), ("O.c0i", 8, "serial"), ("O.c1", 67, "serial")]


def test_a_strided_index_in_phases_keeps_its_loop_affine_in_the_quotient():
    w, s = var("w", 8), var("s", 3)
    assert [format_expr(part) for part in split_index(w * 2 + s, 2)] == ["w + s // 2", "s % 2"]
    # Floor division: a negative offset moves the quotient, never the loop's coefficient.
    assert [format_expr(part) for part in split_index(w * 2 + s - 1, 2)] == ["-1 + w + (1 + s) // 2", "(1 + s) % 2"]


def test_a_dimension_in_phases_is_stored_phase_by_phase_in_place():
    from flexsched.schedule import physical_shape
    assert physical_shape((1, 4, 10, 18), (Blocking(3, 2, phases=True),)) == (1, 4, 10, 2, 9)
    assert physical_shape((1, 4, 10, 18), (Blocking(2, 2, phases=True),)) == (1, 4, 2, 5, 18)
    assert physical_shape((1, 4, 10, 15), (Blocking(3, 2, phases=True),)) == (1, 4, 10, 2, 8)   # rounded up


def test_a_stride_two_convolution_with_its_padded_input_in_phases_matches_the_reference():
    from flexsched.schedule import Deinterleave
    task = get_task("C2D", 1, 3, 10, 10, 4, 3, 2, 1)
    outputs, lowered, reference = interpreted(task, [Deinterleave("pad", 3, 2)])
    np.testing.assert_allclose(outputs[0], reference[0], rtol=1e-5, atol=1e-5)
    assert [p.shape for p in lowered.func.params if p.name == "pad"] == [(1, 3, 12, 2, 6)]


def test_a_region_whose_extent_the_stride_does_not_divide_is_stored_in_rounded_up_phases():
    from flexsched.schedule import CacheRead, ComputeAt, Deinterleave
    task = get_task("C2D", 1, 3, 10, 10, 4, 3, 2, 1)
    # Output columns 0..4 in two tiles of 3 (the second guarded): each tile's copy of the padded input
    # is 7 wide, and its two phases hold 4 and 3 columns.
    steps = [CacheRead("pad", "local", ("O",)), Split("O", "w", (2, 3)), ComputeAt("pad.local", "O", "w.0"),
             Deinterleave("pad.local", 3, 2)]
    outputs, lowered, reference = interpreted(task, steps)
    np.testing.assert_allclose(outputs[0], reference[0], rtol=1e-5, atol=1e-5)
    from codegen.ir import Allocate
    assert [s.buffer.shape for s in walk_stmts(lowered.func.body) if isinstance(s, Allocate)] == [(1, 3, 3, 2, 4)]


@pytest.mark.parametrize("step, message", [
    (("I", 3, 2), "'I' is an input or output"),
    (("pad", 3, 13), "stride 13 must lie in 2..12, the extent of dimension 3 of 'pad'"),
    (("pad", 4, 2), "tensor 'pad' has no dimension 4"),
])
def test_a_deinterleave_that_cannot_apply_names_the_tensor(step, message):
    from flexsched.schedule import Deinterleave, ScheduleError
    from analysis import analyze
    task = get_task("C2D", 1, 3, 10, 10, 4, 3, 2, 1)
    with pytest.raises(ScheduleError, match=message):
        Schedule((Deinterleave(*step),)).apply(analyze(task))


def test_a_tensor_is_stored_either_blocked_or_in_phases():
    from flexsched.schedule import Deinterleave, ScheduleError
    from analysis import analyze
    info = analyze(get_task("C2D", 1, 4, 10, 10, 4, 3, 2, 1))
    with pytest.raises(ScheduleError, match="already stored blocked or in phases"):
        Schedule((Layout("pad", 1, 2), Deinterleave("pad", 3, 2))).apply(info)
    with pytest.raises(ScheduleError, match="is stored in phases and cannot also be blocked"):
        Schedule((Deinterleave("pad", 3, 2), Layout("pad", 1, 2))).apply(info)
