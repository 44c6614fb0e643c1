"""Bad definitions fail when defined, with one line naming the tensor and the axis at fault."""

import pytest

import flexsched as fs
from flexsched import DefinitionError
from flexsched.tensor import machine_memory_bytes

A = fs.placeholder((8, 6), name="A")
B = fs.placeholder((6,), name="B")


def error_of(build):
    with pytest.raises(DefinitionError) as caught:
        build()
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_wrong_number_of_indices_names_the_tensor():
    message = error_of(lambda: fs.compute((8,), lambda i: A[i], name="C"))
    assert "'A'" in message and "2 dimension" in message and "1 index" in message


def test_index_provably_out_of_bounds_names_tensor_index_and_value():
    message = error_of(lambda: fs.compute((8, 6), lambda i, j: A[i, j + 1], name="C"))
    assert "tensor 'C'" in message and "index 1 of 'A'" in message and "reaches 6" in message


def test_negative_index_is_out_of_bounds():
    message = error_of(lambda: fs.compute((8, 6), lambda i, j: A[i - 1, j], name="C"))
    assert "index 0 of 'A'" in message and "reaches -1" in message


def test_guarded_padding_access_is_in_bounds():
    padded = fs.compute((10, 6), lambda i, j: fs.select((i >= 1) & (i < 9), A[i - 1, j], 0.0), name="P")
    assert padded.shape == (10, 6)


def test_guard_that_does_not_cover_the_excursion_is_rejected():
    message = error_of(lambda: fs.compute(
        (10, 6), lambda i, j: fs.select(i >= 1, A[i - 1, j], 0.0), name="P"))
    assert "index 0 of 'A'" in message and "reaches 8" in message


def test_out_of_bounds_in_the_false_branch_of_a_select():
    message = error_of(lambda: fs.compute(
        (8, 6), lambda i, j: fs.select(i < 7, 0.0, A[i + 1, j]), name="C"))
    assert "reaches 8" in message


def test_reduce_axis_not_used_in_its_reduction():
    k = fs.reduce_axis(6, "k")
    message = error_of(lambda: fs.compute((8,), lambda i: fs.sum(A[i, 0], axis=k), name="C"))
    assert "tensor 'C'" in message and "reduce axis 'k'" in message and "not used" in message


def test_reduce_axis_used_outside_a_reduction():
    k = fs.reduce_axis(6, "k")
    message = error_of(lambda: fs.compute((8,), lambda i: A[i, k], name="C"))
    assert "tensor 'C'" in message and "reduce axis 'k'" in message and "outside" in message


def test_reduction_nested_inside_arithmetic():
    k = fs.reduce_axis(6, "k")
    message = error_of(lambda: fs.compute((8,), lambda i: fs.sum(A[i, k], axis=k) * 2.0, name="C"))
    assert "tensor 'C'" in message and "whole body" in message


def test_reduce_axis_of_another_reduction():
    k, other = fs.reduce_axis(6, "k"), fs.reduce_axis(6, "q")
    message = error_of(lambda: fs.compute((8,), lambda i: fs.sum(A[i, k] * B[other], axis=k), name="C"))
    assert "reduce axis 'q'" in message


@pytest.mark.parametrize("shape, field", [((8, 0), "shape[1]"), ((-2,), "shape[0]"), ((3.5, 2), "shape[0]"),
                                          ((True, 2), "shape[0]")])
def test_non_positive_or_non_integer_shapes(shape, field):
    message = error_of(lambda: fs.placeholder(shape, name="X"))
    assert "tensor 'X'" in message and field in message
    message = error_of(lambda: fs.compute(shape, lambda *idx: 0.0, name="Y"))
    assert "tensor 'Y'" in message and field in message


def test_reduce_axis_extent_must_be_positive():
    assert "reduce axis 'k'" in error_of(lambda: fs.reduce_axis(0, "k"))


@pytest.mark.parametrize("dtype", ["float16", "complex64", "uint8", "int8"])
def test_unsupported_dtype_names_the_tensor(dtype):
    message = error_of(lambda: fs.placeholder((4,), dtype=dtype, name="X"))
    assert "tensor 'X'" in message and dtype in message and "float32" in message
    message = error_of(lambda: fs.compute((4,), lambda i: B[i], name="Y", dtype=dtype))
    assert "tensor 'Y'" in message


def test_non_affine_index():
    message = error_of(lambda: fs.compute((6, 6), lambda i, j: A[i * j, 0], name="C"))
    assert "tensor 'C'" in message and "index 0 of 'A'" in message and "not affine" in message


def test_division_by_a_loop_variable_is_not_affine():
    message = error_of(lambda: fs.compute((6, 6), lambda i, j: A[i // (j + 1), 0], name="C"))
    assert "not affine" in message


def test_float_index():
    message = error_of(lambda: fs.compute((6,), lambda i: B[i * 0.5], name="C"))
    assert "index 0 of tensor 'B'" in message and "integer" in message


def test_data_dependent_index():
    idx = fs.placeholder((6,), dtype="int32", name="idx")
    message = error_of(lambda: fs.compute((6,), lambda i: B[idx[i]], name="C"))
    assert "index 0 of tensor 'B'" in message and "data-dependent" in message


def test_python_if_on_an_expression():
    message = error_of(lambda: fs.compute((6,), lambda i: B[i] if i > 2 else 0.0, name="C"))
    assert "no truth value" in message and "select" in message


def test_duplicate_loop_names():
    k = fs.reduce_axis(6, "i")
    message = error_of(lambda: fs.compute((8,), lambda i: fs.sum(A[i, k], axis=k), name="C"))
    assert "tensor 'C'" in message and "two loops are named 'i'" in message


def test_loop_variable_of_another_tensor():
    leaked = []
    fs.compute((6,), lambda i: leaked.append(i) or B[i], name="first")
    message = error_of(lambda: fs.compute((6,), lambda j: B[leaked[0]], name="second"))
    assert "tensor 'second'" in message and "'i'" in message and "another tensor" in message


def test_fcompute_arity_must_match_shape():
    message = error_of(lambda: fs.compute((8, 6), lambda i: A[i, 0], name="C"))
    assert "tensor 'C'" in message and "1 index argument" in message and "2 dimension" in message


def test_integer_true_division_is_refused():
    ints = fs.placeholder((6,), dtype="int32", name="N")
    message = error_of(lambda: fs.compute((6,), lambda i: ints[i] / 2, name="C"))
    assert "//" in message


def test_boolean_body_is_refused():
    message = error_of(lambda: fs.compute((6,), lambda i: B[i] > 0.0, name="C"))
    assert "tensor 'C'" in message and "condition" in message


def test_math_call_needs_a_float():
    ints = fs.placeholder((6,), dtype="int32", name="N")
    message = error_of(lambda: fs.compute((6,), lambda i: fs.exp(ints[i]), name="C"))
    assert "exp()" in message and "int32" in message


def test_bad_tensor_name():
    assert "identifier" in error_of(lambda: fs.placeholder((3,), name="my tensor"))


def test_returning_a_tensor_instead_of_an_element():
    message = error_of(lambda: fs.compute((6,), lambda i: B, name="C"))
    assert "tensor 'C'" in message and "'B'" in message


def test_an_extent_beyond_2_to_the_31_is_refused():
    message = error_of(lambda: fs.placeholder((4, 2**31 + 1), name="Huge"))
    assert message == "tensor 'Huge': shape[1] is 2147483649, beyond the largest extent supported, 2**31 = 2147483648"
    assert "reduce axis 'rk'" in error_of(lambda: fs.reduce_axis(10**20, "rk"))
    assert fs.reduce_axis(2**31, "rk").extent == 2**31   # the bound itself is allowed


def test_a_tensor_larger_than_this_machine_is_refused_naming_its_size():
    side = 2**31  # 2**62 elements: more than any machine's memory
    message = error_of(lambda: fs.placeholder((side, side), name="Big"))
    assert message == (f"tensor 'Big': shape 2147483648x2147483648 of float32 needs 1.72e+10 GiB, more than "
                       f"this machine's memory ({machine_memory_bytes() / 2**30:.3g} GiB)")
    message = error_of(lambda: fs.compute((side, side), lambda i, j: B[0] * 2.0, name="Out", dtype="float64"))
    assert message.startswith("tensor 'Out': shape 2147483648x2147483648 of float64 needs 3.44e+10 GiB")


def test_tasks_too_large_are_refused_before_anything_is_built():
    from flexsched.registry import get_task

    with pytest.raises(DefinitionError, match=r"^task GMM: tensor 'A': shape\[0\] is 99999999999999999999, beyond"):
        get_task("GMM", 99999999999999999999, 2, 2)
    with pytest.raises(DefinitionError, match=r"^task GMM: tensor 'O': shape 2147483648x2147483648 of float32 needs"):
        get_task("GMM", 2**31, 1, 2**31)
