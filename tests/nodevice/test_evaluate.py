"""The reference evaluator (flexsched.evaluate and Task.evaluate) against direct numpy formulas.

Each test defines a small computation with the DSL, evaluates it on seeded inputs and
compares the result (values and dtype) with the same math written in numpy, or in plain
Python where the point is Python semantics (floor division and modulo of negatives).
Covered: max/min/sum reductions (one and several reduce axes, float32 and int32),
select guards around out-of-bounds accesses, math calls, elementwise max/min, casts,
integer // and %, broadcast and constant bodies, several outputs, chains of computes,
reductions split into many uneven blocks, bad feeds, and float32 sum accuracy.
"""

import importlib
import re

import numpy as np
import pytest

import flexsched as fs
from flexsched import EvaluationError
from flexsched.registry import get_task

# The reference evaluator module (the package re-exports its `evaluate` function).
evaluate_module = importlib.import_module("flexsched.reference")


# ---------------------------------------------------------------- helpers

def floats(*shape, low=-1.0, high=1.0, dtype="float32", seed=0):
    """Seeded uniform floats in [low, high)."""
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


def ints(*shape, low=-9, high=10, dtype="int32", seed=0):
    """Seeded integers in [low, high)."""
    return np.random.default_rng(seed).integers(low, high, shape).astype(dtype)


def check(outputs, feed, expected, rtol=1e-6, atol=1e-6):
    """Evaluate `outputs` on `feed` and compare each result with `expected`, dtype included.

    outputs/expected are a single tensor/array or equally long lists. Integer results must
    match exactly.
    """
    got = fs.evaluate(outputs, feed)
    if isinstance(outputs, fs.Tensor):
        got, expected = [got], [expected]
    assert len(got) == len(expected)
    for value, want in zip(got, expected):
        want = np.asarray(want)
        assert value.shape == want.shape
        assert value.dtype == want.dtype, f"dtype {value.dtype}, expected {want.dtype}"
        if np.issubdtype(want.dtype, np.integer):
            np.testing.assert_array_equal(value, want)
        else:
            np.testing.assert_allclose(value, want, rtol=rtol, atol=atol)
    return got


def reduction(combiner, source, axis):
    """fs.sum/fs.max/fs.min by name."""
    return {"sum": fs.sum, "max": fs.max, "min": fs.min}[combiner](source, axis=axis)


NUMPY_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}


# ---------------------------------------------------------------- reductions

@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("combiner", ["max", "min"])
def test_max_min_reduction_matches_numpy(combiner, dtype):
    data = floats(5, 7, low=-3, high=3) if dtype == "float32" else ints(5, 7)
    # Rows of one sign catch a wrong start value of the accumulator (0 instead of -inf/+inf).
    data[0] = -np.abs(data[0]) - 1
    data[1] = np.abs(data[1]) + 1
    A = fs.placeholder((5, 7), dtype, name="A")
    k = fs.reduce_axis(7, "k")
    O = fs.compute((5,), lambda i: reduction(combiner, A[i, k], k), name="O")
    assert O.dtype == dtype
    check(O, {A: data}, NUMPY_REDUCE[combiner](data, axis=1))


def test_reduction_over_the_leading_axis_with_an_expression_source():
    data = floats(6, 4)
    A = fs.placeholder((6, 4), name="A")
    k = fs.reduce_axis(6, "k")
    O = fs.compute((4,), lambda j: fs.max(fs.abs(A[k, j]) * 2.0 - 1.0, axis=k), name="O")
    check(O, {A: data}, (np.abs(data) * 2 - 1).max(axis=0))


def test_sum_over_several_reduce_axes():
    a, b = floats(3, 4, 5, 6, seed=1), floats(4, 6, seed=2)
    A = fs.placeholder((3, 4, 5, 6), name="A")
    B = fs.placeholder((4, 6), name="B")
    k, l = fs.reduce_axis(4, "k"), fs.reduce_axis(6, "l")  # noqa: E741
    O = fs.compute((3, 5), lambda i, j: fs.sum(A[i, k, j, l] * B[k, l], axis=[k, l]), name="O")
    check(O, {A: a, B: b}, np.einsum("ikjl,kl->ij", a, b).astype("float32"), rtol=1e-5)


def test_max_and_int_sum_over_three_reduce_axes():
    data = ints(2, 3, 4, 5, low=-50, high=50)
    A = fs.placeholder((2, 3, 4, 5), "int32", name="A")
    axes = [fs.reduce_axis(3, "r1"), fs.reduce_axis(4, "r2"), fs.reduce_axis(5, "r3")]
    M = fs.compute((2,), lambda i: fs.max(A[i, axes[0], axes[1], axes[2]], axis=axes), name="M")
    S = fs.compute((2,), lambda i: fs.sum(A[i, axes[0], axes[1], axes[2]], axis=axes), name="S")
    check([M, S], {A: data}, [data.max(axis=(1, 2, 3)), data.sum(axis=(1, 2, 3)).astype("int32")])


# ---------------------------------------------------------------- select and guards

def test_left_padding_guard_hides_a_negative_index():
    data = floats(6)
    A = fs.placeholder((6,), name="A")
    # For i < 2 the index i - 2 is negative: only the guard keeps the access legal.
    O = fs.compute((8,), lambda i: fs.select(i >= 2, A[i - 2], 0.0), name="O")
    check(O, {A: data}, np.concatenate([np.zeros(2, "float32"), data]))


def test_two_sided_padding_with_all_of_and_a_fill_value():
    data = floats(4, 5)
    A = fs.placeholder((4, 5), name="A")
    O = fs.compute((6, 7), lambda i, j: fs.select(fs.all_of(i >= 1, i < 5, j >= 1, j < 6),
                                                  A[i - 1, j - 1], -7.0), name="O")
    check(O, {A: data}, np.pad(data, 1, constant_values=-7.0))


def test_any_of_guard_in_the_false_branch():
    data = floats(5)
    A = fs.placeholder((5,), name="A")
    O = fs.compute((7,), lambda i: fs.select(fs.any_of(i < 1, i >= 6), 0.0, A[i - 1]), name="O")
    check(O, {A: data}, np.pad(data, 1))


def test_both_branches_out_of_bounds_on_the_untaken_side():
    a, b = floats(4, seed=1), floats(3, seed=2)
    A, B = fs.placeholder((4,), name="A"), fs.placeholder((3,), name="B")
    # A[i] is past A's end for i >= 4, B[i - 4] before B's start for i < 4.
    O = fs.compute((7,), lambda i: fs.select(i < 4, A[i], B[i - 4]), name="O")
    check(O, {A: a, B: b}, np.concatenate([a, b]))


def test_guarded_access_inside_a_reduction_is_a_padded_correlation():
    a, w = floats(9, seed=1), floats(3, seed=2)
    A, W = fs.placeholder((9,), name="A"), fs.placeholder((3,), name="W")
    k = fs.reduce_axis(3, "k")
    O = fs.compute((9,), lambda i: fs.sum(
        fs.select((i + k >= 1) & (i + k < 10), A[i + k - 1], 0.0) * W[k], axis=k), name="O")
    check(O, {A: a, W: w}, np.correlate(np.pad(a, 1), w, "valid"), rtol=1e-5)


def test_int_select_with_negated_condition():
    data = ints(6)
    A = fs.placeholder((6,), "int32", name="A")
    O = fs.compute((6,), lambda i: fs.select(~(A[i] < 0), A[i], 0), name="O")
    check(O, {A: data}, np.where(data >= 0, data, 0).astype("int32"))


# ---------------------------------------------------------------- math, max/min, casts

@pytest.mark.parametrize("func, reference, low", [
    (fs.exp, np.exp, -2.0), (fs.log, np.log, 0.1), (fs.sqrt, np.sqrt, 0.0),
    (fs.abs, np.abs, -2.0), (fs.tanh, np.tanh, -2.0),
], ids=["exp", "log", "sqrt", "abs", "tanh"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_math_call(func, reference, low, dtype):
    data = floats(3, 4, low=low, high=2.0, dtype=dtype)
    A = fs.placeholder((3, 4), dtype, name="A")
    O = fs.compute((3, 4), lambda i, j: func(A[i, j]), name="O")
    check(O, {A: data}, reference(data))


def test_abs_of_int32_and_nested_calls():
    data = ints(6)
    A = fs.placeholder((6,), "int32", name="A")
    check(fs.compute((6,), lambda i: fs.abs(A[i]), name="O"), {A: data}, np.abs(data))
    F = fs.placeholder((6,), name="F")
    f = floats(6, seed=3)
    O = fs.compute((6,), lambda i: fs.sqrt(fs.exp(F[i]) + fs.tanh(F[i]) * fs.tanh(F[i])), name="O")
    check(O, {F: f}, np.sqrt(np.exp(f) + np.tanh(f) ** 2), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_elementwise_max_and_min(dtype):
    make = floats if dtype == "float32" else ints
    a, b = make(4, 5, seed=1), make(4, 5, seed=2)
    A, B = fs.placeholder((4, 5), dtype, name="A"), fs.placeholder((4, 5), dtype, name="B")
    hi = fs.compute((4, 5), lambda i, j: fs.max(A[i, j], B[i, j]), name="hi")
    lo = fs.compute((4, 5), lambda i, j: fs.min(A[i, j], B[i, j]), name="lo")
    relu = fs.compute((4, 5), lambda i, j: fs.max(A[i, j], 0), name="relu")
    check([hi, lo, relu], {A: a, B: b}, [np.maximum(a, b), np.minimum(a, b), np.maximum(a, 0).astype(dtype)])


CAST_PAIRS = [(src, dst) for src in ("float32", "float64", "int32")
              for dst in ("float32", "float64", "int32") if src != dst]


@pytest.mark.parametrize("src, dst", CAST_PAIRS, ids=[f"{s}-to-{d}" for s, d in CAST_PAIRS])
def test_cast(src, dst):
    # Fractions and negatives: float -> int truncates toward zero, as numpy's astype does.
    data = floats(7, low=-5.5, high=5.5, dtype=src) if src != "int32" else ints(7, low=-1000, high=1000)
    A = fs.placeholder((7,), src, name="A")
    O = fs.compute((7,), lambda i: fs.cast(dst, A[i]), name="O")
    assert O.dtype == dst
    check(O, {A: data}, data.astype(dst), rtol=0, atol=0)


def test_cast_inside_arithmetic_and_compute_dtype():
    data = ints(6, low=-20, high=20)
    A = fs.placeholder((6,), "int32", name="A")
    half = fs.compute((6,), lambda i: fs.cast("float32", A[i]) * 0.5, name="half")
    wide = fs.compute((6,), lambda i: A[i] * 3, name="wide", dtype="float64")
    check([half, wide], {A: data}, [data.astype("float32") * np.float32(0.5), (data * 3).astype("float64")])


# ---------------------------------------------------------------- integer arithmetic

def test_int32_floor_division_and_modulo_follow_python_on_negatives():
    a = np.array([-7, -6, -5, -1, 0, 1, 5, 6, 7, -9, 9, -8], dtype="int32")
    b = np.array([2, -2, 3, -3, 4, 5, -4, 3, -2, 4, -4, -3], dtype="int32")
    A, B = fs.placeholder((12,), "int32", name="A"), fs.placeholder((12,), "int32", name="B")
    outs = [fs.compute((12,), lambda i: A[i] // B[i], name="q"),
            fs.compute((12,), lambda i: A[i] % B[i], name="r"),
            fs.compute((12,), lambda i: A[i] // 3, name="q3"),
            fs.compute((12,), lambda i: A[i] % 3, name="r3"),
            fs.compute((12,), lambda i: A[i] // -4, name="qm4"),
            fs.compute((12,), lambda i: A[i] % -4, name="rm4")]
    py = [int(x) for x in a]
    expected = [[x // int(y) for x, y in zip(py, b)], [x % int(y) for x, y in zip(py, b)],
                [x // 3 for x in py], [x % 3 for x in py], [x // -4 for x in py], [x % -4 for x in py]]
    check(outs, {A: a, B: b}, [np.array(e, dtype="int32") for e in expected])


def test_index_arithmetic_with_floordiv_and_mod_reshapes():
    data = floats(3, 4)
    A = fs.placeholder((3, 4), name="A")
    O = fs.compute((2, 6), lambda i, j: A[(i * 6 + j) // 4, (i * 6 + j) % 4], name="O")
    check(O, {A: data}, data.reshape(2, 6))


# ---------------------------------------------------------------- broadcast, constants, graphs

def test_body_that_ignores_some_axes_is_broadcast():
    row, col = floats(5, seed=1), floats(3, seed=2)
    R, C = fs.placeholder((5,), name="R"), fs.placeholder((3,), name="C")
    by_row = fs.compute((3, 5), lambda i, j: R[j], name="by_row")
    by_col = fs.compute((3, 5), lambda i, j: C[i] * 2.0, name="by_col")
    first = fs.compute((3, 5), lambda i, j: R[0], name="first")
    check([by_row, by_col, first], {R: row, C: col},
          [np.broadcast_to(row, (3, 5)), np.broadcast_to(col[:, None] * 2, (3, 5)), np.full((3, 5), row[0])])


def test_reduction_that_ignores_a_spatial_axis_is_broadcast():
    data = floats(4, 5)
    A = fs.placeholder((4, 5), name="A")
    k = fs.reduce_axis(4, "k")
    O = fs.compute((3, 5), lambda i, j: fs.sum(A[k, j], axis=k), name="O")
    check(O, {A: data}, np.broadcast_to(data.sum(axis=0), (3, 5)), rtol=1e-5)


def test_constant_bodies():
    f = fs.compute((2, 3), lambda i, j: 2.5, name="f")
    n = fs.compute((4,), lambda i: fs.const(-3, "int32"), name="n")
    d = fs.compute((2,), lambda i: fs.const(0.1, "float64"), name="d")
    result = check([f, n, d], {}, [np.full((2, 3), 2.5, "float32"), np.full(4, -3, "int32"),
                                   np.full(2, 0.1, "float64")])
    assert all(r.flags.writeable for r in result)


def test_loop_variable_as_value():
    O = fs.compute((3, 4), lambda i, j: i * 10 - j, name="O")
    check(O, {}, (np.arange(3)[:, None] * 10 - np.arange(4)).astype("int32"))


def test_two_outputs_in_the_order_asked():
    data = floats(4, 6)
    A = fs.placeholder((4, 6), name="A")
    k = fs.reduce_axis(6, "k")
    S = fs.compute((4,), lambda i: fs.sum(A[i, k], axis=k), name="S")
    k2 = fs.reduce_axis(6, "k2")
    M = fs.compute((4,), lambda i: fs.max(A[i, k2], axis=k2), name="M")
    check([S, M], {A: data}, [data.sum(axis=1), data.max(axis=1)], rtol=1e-5)
    check((M, S), {"A": data}, [data.max(axis=1), data.sum(axis=1)], rtol=1e-5)


def test_chain_of_three_computes():
    """pad -> 3-tap correlation -> relu, checked at the end and at the intermediate."""
    a, w = floats(2, 8, seed=1), floats(3, seed=2)
    A, W = fs.placeholder((2, 8), name="A"), fs.placeholder((3,), name="W")
    P = fs.compute((2, 10), lambda b, x: fs.select((x >= 1) & (x < 9), A[b, x - 1], 0.0), name="P")
    k = fs.reduce_axis(3, "k")
    C = fs.compute((2, 8), lambda b, x: fs.sum(P[b, x + k] * W[k], axis=k), name="C")
    R = fs.compute((2, 8), lambda b, x: fs.max(C[b, x], 0.0), name="R")
    padded = np.pad(a, ((0, 0), (1, 1)))
    conv = np.stack([np.correlate(row, w, "valid") for row in padded])
    check(R, {"A": a, "W": w}, np.maximum(conv, 0), rtol=1e-5)
    check([R, P, C], {A: a, W: w}, [np.maximum(conv, 0), padded, conv], rtol=1e-5)


def test_task_evaluate_matches_matmul():
    task = get_task("GMM", 3, 5, 4)
    a, b = task.random_inputs(seed=1)
    (out,) = task.evaluate(a, b)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, a.astype("float64") @ b, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- blocked reductions

BLOCK_CASES = [
    ((1,), (5, 8)),      # one output point: blocks of 7 over 40 reduction points
    ((3,), (37,)),       # blocks of 2 over 37 points: the last block holds one point
    ((2, 2), (3, 5)),    # blocks of 1 with two reduce axes
    ((9,), (4, 3)),      # output larger than a block: one point per step
]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("combiner", ["sum", "max", "min"])
@pytest.mark.parametrize("out_shape, red_shape", BLOCK_CASES,
                         ids=["out1", "out3-uneven", "out2x2-two-axes", "out9"])
def test_reduction_in_many_small_blocks(monkeypatch, out_shape, red_shape, combiner, dtype):
    monkeypatch.setattr(evaluate_module, "_EINSUM_ELEMENTS", 0)  # force the blocked path
    monkeypatch.setattr(evaluate_module, "_BLOCK_ELEMENTS", 7)
    steps = []
    real_eval = evaluate_module.eval_expr
    monkeypatch.setattr(evaluate_module, "eval_expr", lambda *a: steps.append(1) or real_eval(*a))

    shape = out_shape + red_shape
    data = floats(*shape, low=-3, high=3) if dtype == "float32" else ints(*shape, low=-100, high=100)
    A = fs.placeholder(shape, dtype, name="A")
    axes = [fs.reduce_axis(n, f"r{d}") for d, n in enumerate(red_shape)]
    O = fs.compute(out_shape, lambda *idx: reduction(combiner, A[(*idx, *axes)], axes),
                   name="O", axis_names=[f"i{d}" for d in range(len(out_shape))])
    red_dims = tuple(range(len(out_shape), len(shape)))
    wide = data.astype("float64" if dtype == "float32" else "int64")
    expected = NUMPY_REDUCE[combiner](wide, axis=red_dims)
    check(O, {A: data}, expected.astype(dtype), rtol=1e-5)
    assert len(steps) > 1, "the reduction was not split into blocks"


@pytest.mark.parametrize("einsum_elements", [0, 1 << 25], ids=["blocked", "contracted"])
def test_guarded_reduction(monkeypatch, einsum_elements):
    monkeypatch.setattr(evaluate_module, "_EINSUM_ELEMENTS", einsum_elements)
    monkeypatch.setattr(evaluate_module, "_BLOCK_ELEMENTS", 7)
    a, w = floats(11, seed=1), floats(5, seed=2)
    A, W = fs.placeholder((11,), name="A"), fs.placeholder((5,), name="W")
    k = fs.reduce_axis(5, "k")
    O = fs.compute((11,), lambda i: fs.sum(
        fs.select((i + k >= 2) & (i + k < 13), A[i + k - 2], 0.0) * W[k], axis=k), name="O")
    check(O, {A: a, W: w}, np.correlate(np.pad(a, 2), w, "valid"), rtol=1e-5)


LIBRARY_CASES = [("GMV", (7, 5)), ("GMM", (5, 6, 7)), ("BIL", (3, 4, 5, 6)), ("C1D", (1, 3, 9, 4, 3, 2, 1)),
                 ("T1D", (1, 3, 6, 4, 3, 2, 1)), ("C2D", (2, 3, 7, 6, 4, 3, 1, 1, 2)),
                 ("T2D", (1, 2, 4, 5, 3, 3, 2, 1)), ("C3D", (1, 2, 4, 5, 3, 2, 3, 1, 1)),
                 ("T3D", (1, 2, 3, 3, 4, 2, 2, 2, 0)), ("GRP", (1, 4, 6, 6, 6, 3, 1, 1, 2)),
                 ("DEP", (1, 3, 6, 6, 2, 3, 2, 1)), ("DIL", (1, 2, 8, 8, 3, 3, 1, 2, 2)),
                 ("BCM", (8, 12, 4)), ("SHO", (1, 5, 5, 11, 3))]


@pytest.mark.parametrize("name, args", LIBRARY_CASES, ids=[c[0] for c in LIBRARY_CASES])
def test_contracted_and_blocked_paths_agree(monkeypatch, name, args):
    """Sums of products go through one einsum; the blocked loop must give the same values."""
    task = get_task(name, *args)
    arrays = task.random_inputs(seed=3)
    (contracted,) = task.evaluate(*arrays)
    monkeypatch.setattr(evaluate_module, "_EINSUM_ELEMENTS", 0)
    monkeypatch.setattr(evaluate_module, "_BLOCK_ELEMENTS", 5)
    (blocked,) = task.evaluate(*arrays)
    np.testing.assert_allclose(contracted, blocked, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- bad feeds

@pytest.fixture
def int_and_float_inputs():
    """O[i, j] = A[i, j] * N[j] with A float32 (3, 4) and N int32 (4,), and good arrays for them."""
    A = fs.placeholder((3, 4), name="A")
    N = fs.placeholder((4,), "int32", name="N")
    O = fs.compute((3, 4), lambda i, j: A[i, j] * fs.cast("float32", N[j]), name="O")
    return O, A, N, floats(3, 4), ints(4)


def evaluation_error(outputs, feed):
    with pytest.raises(EvaluationError) as caught:
        fs.evaluate(outputs, feed)
    return str(caught.value)


def test_good_feed_by_tensor_or_by_name(int_and_float_inputs):
    O, A, N, a, n = int_and_float_inputs
    expected = a * n.astype("float32")
    check(O, {A: a, N: n}, expected)
    check(O, {"A": a, "N": n}, expected)
    check(O, {A: a.astype("float64"), "N": n.astype("int64")}, expected)  # same kind is accepted


def test_missing_input_is_named(int_and_float_inputs):
    O, A, N, a, n = int_and_float_inputs
    message = evaluation_error(O, {A: a})
    assert "'N'" in message and "no array" in message


def test_wrong_shape_is_named(int_and_float_inputs):
    O, A, N, a, n = int_and_float_inputs
    message = evaluation_error(O, {A: a.T, N: n})
    assert "'A'" in message and "shape" in message
    assert re.search(r"\(4, 3\).*\(3, 4\)", message)


def test_wrong_dtype_kind_is_named(int_and_float_inputs):
    O, A, N, a, n = int_and_float_inputs
    message = evaluation_error(O, {A: a, N: n.astype("float32")})
    assert "'N'" in message and "dtype" in message and "int32" in message


def test_task_evaluate_rejects_a_bad_array_by_input_name():
    task = get_task("GMV", 4, 3)
    a, b = task.random_inputs()
    with pytest.raises(EvaluationError, match=r"input 'B' has shape \(4,\)"):
        task.evaluate(a, np.zeros(4, "float32"))
    with pytest.raises(EvaluationError, match="input 'A' has dtype complex"):
        task.evaluate(a.astype("complex64"), b)


# ---------------------------------------------------------------- accuracy

@pytest.mark.parametrize("block", [None, 7], ids=["one-block", "blocks-of-7"])
def test_float32_sum_accumulates_in_float64(monkeypatch, block):
    """Within a block numpy's pairwise sum is accurate anyway; across 14286 blocks of 7
    a float32 accumulator would drift by ~1.4e-4 relative."""
    if block is not None:
        monkeypatch.setattr(evaluate_module, "_BLOCK_ELEMENTS", block)
    A = fs.placeholder((100000,), name="A")
    k = fs.reduce_axis(100000, "k")
    O = fs.compute((1,), lambda i: fs.sum(A[k], axis=k), name="O")
    (total,) = fs.evaluate(O, {A: np.full(100000, 0.1, dtype="float32")})
    assert total.dtype == np.float32
    assert abs(float(total) - 10000.0) <= 1e-6 * 10000.0
