"""The LLVM CPU back end on hand-built loop IR, checked against numpy."""

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from codegen import cpu_backend
from codegen.ir import Allocate, Buffer, For, IfThenElse, PrimFunc, Seq, Store, loop_var, seq
from codegen.ir import CodegenError
from codegen.runtime import split_range
from flexsched.errors import EvaluationError
from flexsched.expr import Load, call, cast, select
from flexsched.target import get_target

pytestmark = pytest.mark.cpu
RNG = np.random.default_rng(0)


def compile_func(func, opt_level=3):
    """func compiled for the llvm target, so that FLEXSCHED_LLVM_TARGET picks the vector width under test."""
    return cpu_backend.compile_func(func, opt_level, target=get_target("llvm"))


def buf(name, shape, dtype="float32", scope="global"):
    return Buffer(name, tuple(shape), dtype, scope)


def ld(buffer, *indices):
    return Load(buffer, indices, buffer.dtype)


def loop(name, extent, kind, body):
    """A For over a fresh variable; body is a function of that variable."""
    var = loop_var(name, extent)
    return For(var, extent, kind, body(var))


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def elementwise(kind, extent, outer=4, dtype="float32", value=lambda a, b: a + b):
    """C[o * extent + i] = value(A[...], B[...]) with the inner loop of the given kind."""
    n = outer * extent
    A, B, C = (buf(name, (n,), dtype) for name in "ABC")

    def inner(o):
        return loop("i", extent, kind, lambda i: Store(C, (o * extent + i,), value(ld(A, o * extent + i),
                                                                                     ld(B, o * extent + i))))
    return PrimFunc(f"ew_{kind}_{extent}_{dtype}", (A, B, C), loop("o", outer, "serial", inner))


@pytest.mark.parametrize("kind,extent", [("serial", 8), ("unrolled", 8), ("vectorized", 8),
                                         ("vectorized", 16), ("vectorized", 5), ("vectorized", 7),
                                         ("vectorized", 14), ("vectorized", 3)])
def test_elementwise_add(kind, extent):
    kernel = compile_func(elementwise(kind, extent))
    a, b, c = rand(4 * extent), rand(4 * extent), np.zeros(4 * extent, "float32")
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    assert kernel.fallbacks == ()


def test_a_one_iteration_loop_is_emitted_as_its_body():
    kernel = compile_func(elementwise("serial", 1, outer=6))
    a, b, c = rand(6), rand(6), np.zeros(6, "float32")
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    loops = re.findall(r'^"([^"]+)\.head":', kernel.code.unoptimized_ir, re.MULTILINE)
    assert loops == ["o"]   # the inner loop's counter is the constant 0, with no loop around its body


def test_vectorized_loop_emits_vector_types_and_registers():
    kernel = compile_func(elementwise("vectorized", 8))
    assert "<8 x float>" in kernel.llvm_ir
    assert any(reg in kernel.asm() for reg in ("%ymm", "%zmm", "%xmm"))
    # never wider registers than the target's (AVX2 code must run on an AVX2-only machine)
    wider = {4: ("%ymm", "%zmm"), 8: ("%zmm",), 16: ()}[get_target("llvm").vector_lanes]
    assert not any(reg in kernel.asm() for reg in wider)


def test_odd_width_vectors_fill_whole_registers_and_touch_only_their_lanes():
    """14 lanes compute as 16 (two AVX2 registers) with masked loads and stores: the element
    after each row keeps its value, and nothing is read past the end of the arrays."""
    kernel = compile_func(elementwise("vectorized", 14, outer=3))
    a, b = rand(42), rand(42)
    c = np.full(43, 7.0, "float32")
    kernel(a, b, c[:42])
    np.testing.assert_array_equal(c[:42], a + b)
    assert c[42] == 7.0
    # 14 lanes pad to 16 on every x86 width: four SSE, two AVX2 or one AVX-512 register.
    assert "<16 x float>" in kernel.llvm_ir and "llvm.masked.store" in kernel.llvm_ir


def test_odd_width_register_tile_stays_in_registers_without_clobbering_its_rows():
    """A local [3, 14] tile, vectorised by rows: padded lanes land in the rows' padding, so
    plain vector loads and stores do, and SROA keeps the tile out of memory."""
    A, O = buf("A", (5, 14)), buf("O", (3, 14))
    tile = buf("tile", (3, 14), scope="local")

    def body(_):
        rows = [loop("j", 14, "vectorized", lambda j, r=r: Store(tile, (r, j), 0.0)) for r in range(3)]
        for k in range(5):
            rows += [loop("j", 14, "vectorized", lambda j, r=r, k=k: Store(
                tile, (r, j), ld(tile, r, j) + ld(A, k, j) * float(r + 1))) for r in range(3)]
        rows += [loop("j", 14, "vectorized", lambda j, r=r: Store(O, (r, j), ld(tile, r, j))) for r in range(3)]
        return Allocate(tile, seq(*rows))
    kernel = compile_func(PrimFunc("tile14", (A, O), loop("o", 1, "serial", body)))
    a, o = rand(5, 14), np.zeros((3, 14), "float32")
    kernel(a, o)
    np.testing.assert_allclose(o, np.outer([1, 2, 3], a.sum(axis=0)), rtol=1e-5, atol=1e-5)
    assert "alloca" not in kernel.llvm_ir   # the optimised module: the tile lives in registers



@pytest.mark.parametrize("lanes", [7, 14, 28])
def test_padded_lanes_never_clobber_the_rest_of_their_row(lanes):
    """A local row of 2 * lanes elements, accumulated half by half: the first half's padded lanes
    would fall on the second half's elements (adding twice there), so they are masked."""
    A, O = buf("A", (3, 2 * lanes)), buf("O", (2 * lanes,))
    row, staged = buf("row", (2 * lanes,), scope="local"), buf("staged", (3, 2 * lanes), scope="local")

    def halves(make):
        return loop("h", 2, "unrolled", lambda h: loop("j", lanes, "vectorized", lambda j: make(h * lanes + j)))

    def body(_):
        # Reading a local buffer, padded lanes load real neighbours (a global read would be masked).
        stage = loop("k", 3, "serial", lambda k: loop("x", 2 * lanes, "serial",
                                                      lambda x: Store(staged, (k, x), ld(A, k, x))))
        init = halves(lambda x: Store(row, (x,), 0.0))
        accumulate = loop("k", 3, "serial", lambda k: halves(
            lambda x: Store(row, (x,), ld(row, x) + ld(staged, k, x))))
        finish = halves(lambda x: Store(O, (x,), ld(row, x)))
        return Allocate(staged, Allocate(row, seq(stage, init, accumulate, finish)))
    kernel = compile_func(PrimFunc(f"halves{lanes}", (A, O), loop("o", 1, "serial", body)))
    a, o = rand(3, 2 * lanes), np.zeros(2 * lanes, "float32")
    kernel(a, o)
    np.testing.assert_allclose(o, a.sum(axis=0), rtol=1e-5, atol=1e-5)

def transposed(rows, columns):
    """A kernel copying a rows x columns A into B transposed, the columns vectorised; checked on random A."""
    A, B = buf("A", (rows, columns)), buf("B", (columns, rows))
    body = loop("i", rows, "serial", lambda i: loop("j", columns, "vectorized", lambda j: Store(B, (j, i), ld(A, i, j))))
    kernel = compile_func(PrimFunc(f"transpose{rows}x{columns}", (A, B), body))
    a, b = rand(rows, columns), np.zeros((columns, rows), "float32")
    kernel(a, b)
    np.testing.assert_array_equal(b, a.T)
    return kernel


def test_transpose_scatters_a_vector_store():
    assert transposed(6, 8).fallbacks == ()


def test_a_transposed_copy_of_one_whole_tile_is_emitted_without_a_loop():
    """An 8 x 8 transpose is one square tile (8 lanes divide it on every x86 width): its tile loop
    would run once, so it is emitted as the tile itself."""
    text = transposed(8, 8).code.unoptimized_ir
    assert "shufflevector" in text
    assert re.findall(r'^"([^"]+)\.head":', text, re.MULTILINE) == []


def gemm(M, N, K):
    A, B, O = buf("A", (M, K)), buf("B", (K, N)), buf("O", (M, N))

    def row(i):
        init = loop("j0", N, "vectorized", lambda j: Store(O, (i, j), 0.0))
        update = loop("k", K, "serial", lambda k: loop("j", N, "vectorized", lambda j: Store(
            O, (i, j), ld(O, i, j) + ld(A, i, k) * ld(B, k, j))))
        return seq(init, update)
    return PrimFunc("gemm", (A, B, O), loop("i", M, "parallel", row))


def test_parallel_gemm_matches_numpy():
    kernel = compile_func(gemm(37, 16, 23))
    a, b, o = rand(37, 23), rand(23, 16), np.full((37, 16), np.nan, "float32")
    kernel(a, b, o)
    np.testing.assert_allclose(o, a @ b, rtol=1e-4, atol=1e-4)
    assert kernel.fallbacks == ()


def test_float64_and_int32_arithmetic():
    kernel = compile_func(elementwise("vectorized", 4, dtype="float64", value=lambda a, b: a * b - a / b))
    a, b, c = rand(16, dtype="float64"), rand(16, dtype="float64"), np.zeros(16)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a * b - a / b, rtol=1e-12)

    kernel = compile_func(elementwise("serial", 4, dtype="int32", value=lambda a, b: a * b + cast("int32", 7.9)))
    x, y, z = (np.arange(16, dtype="int32") - 8 for _ in range(3))
    kernel(x, y, z)
    np.testing.assert_array_equal(z, x * y + 7)


@pytest.mark.parametrize("kind", ["serial", "vectorized"])
@pytest.mark.parametrize("op", ["//", "%"])
def test_floor_division_follows_python(kind, op):
    value = (lambda a, b: a // b) if op == "//" else (lambda a, b: a % b)
    kernel = compile_func(elementwise(kind, 8, outer=3, dtype="int32", value=value))
    a = np.array([-7, 7, -7, 7, -1, 0, 13, -13] * 3, dtype="int32")
    b = np.array([2, -2, -2, 2, 3, 5, -5, 4] * 2 + [0, -1, 0, -1, 1, 1, -1, 0], dtype="int32")
    c = np.zeros(24, "int32")
    kernel(a, b, c)
    expected = [value(int(x), int(y)) if y != 0 else 0 for x, y in zip(a, b)]   # numpy: x // 0 == x % 0 == 0
    assert c.tolist() == expected


INT32 = st.integers(-2**31, 2**31 - 1)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(INT32, st.sampled_from([0, -1, 1, 7, -7]) | INT32), min_size=8, max_size=8),
       st.sampled_from(["serial", "vectorized"]))
def test_floor_divmod_property(pairs, kind):
    kernel = compile_func(elementwise(kind, 8, outer=1, dtype="int32", value=lambda a, b: a // b * 3 + a % b))
    a, b = (np.array(column, dtype="int32") for column in zip(*pairs))
    c = np.zeros(8, "int32")
    kernel(a, b, c)
    wrap = lambda n: (n + 2**31) % 2**32 - 2**31   # noqa: E731
    expected = [wrap(x // y * 3 + x % y) if y else 0 for x, y in zip(a.tolist(), b.tolist())]
    assert c.tolist() == expected


def test_int_division_by_a_constant():
    A, C = buf("A", (8,), "int64"), buf("C", (8,), "int64")
    body = loop("i", 8, "vectorized", lambda i: Store(C, (i,), ld(A, i) // 3 + ld(A, i) % 3))
    a, c = np.arange(-4, 4, dtype="int64"), np.zeros(8, "int64")
    compile_func(PrimFunc("div3", (A, C), body))(a, c)
    np.testing.assert_array_equal(c, a // 3 + a % 3)


@pytest.mark.parametrize("op,reference", [("max", np.maximum), ("min", np.minimum)])
def test_max_min_propagate_nan(op, reference):
    from flexsched.expr import binary
    kernel = compile_func(elementwise("vectorized", 8, outer=1, value=lambda a, b: binary(op, a, b)))
    a = np.array([1, np.nan, 3, np.nan, -1, 0, 5, 2], "float32")
    b = np.array([2, 1, np.nan, np.nan, -2, 0, 4, 9], "float32")
    c = np.zeros(8, "float32")
    kernel(a, b, c)
    np.testing.assert_array_equal(c, reference(a, b))


@pytest.mark.parametrize("func", ["exp", "log", "sqrt", "abs", "tanh"])
@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_math_functions_match_numpy(func, kind):
    kernel = compile_func(elementwise(kind, 8, value=lambda a, b: call(func, a) + b * 0.0))
    a = np.abs(rand(32)) + 0.1 if func in ("log", "sqrt") else rand(32)
    c = np.zeros(32, "float32")
    kernel(a, np.zeros(32, "float32"), c)
    np.testing.assert_allclose(c, getattr(np, func)(a), rtol=2e-6, atol=1e-7)


def test_integer_abs_and_casts():
    A, C = buf("A", (8,), "int32"), buf("C", (8,), "float64")
    body = loop("i", 8, "vectorized", lambda i: Store(C, (i,), cast("float64", call("abs", ld(A, i))) * 0.5))
    a, c = np.arange(-4, 4, dtype="int32"), np.zeros(8)
    compile_func(PrimFunc("abs_cast", (A, C), body))(a, c)
    np.testing.assert_array_equal(c, np.abs(a) * 0.5)


@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_padded_read_under_select(kind):
    I, O = buf("I", (8, 8)), buf("O", (10, 10))

    def pixel(h, w):
        inside = (h >= 1) & (h < 9) & (w >= 1) & (w < 9)
        return Store(O, (h, w), select(inside, ld(I, h - 1, w - 1), 0.0))
    body = loop("h", 10, "serial", lambda h: loop("w", 10, kind, lambda w: pixel(h, w)))
    kernel = compile_func(PrimFunc(f"pad_{kind}", (I, O), body))
    # I sits inside NaN padding: a stray read would still be discarded, but it must not fault.
    storage = np.full(100, np.nan, "float32")
    image = storage[18:82].reshape(8, 8)
    image[:] = rand(8, 8)
    out = np.full((10, 10), -1.0, "float32")
    kernel(image, out)
    np.testing.assert_array_equal(out, np.pad(image, 1))
    if kind == "vectorized":
        assert "llvm.masked.load" in kernel.unoptimized_ir and kernel.fallbacks == ()


@pytest.mark.parametrize("stride,extent", [(2, 8), (2, 7), (3, 14), (4, 8)])
def test_strided_read_loads_its_span_and_shuffles(stride, extent):
    """A stride-2 convolution reads its input row every other element: one masked load of the
    span and a shuffle, exact, for odd widths too."""
    rows = 3
    A, O = buf("A", (rows, extent * stride)), buf("O", (rows, extent))
    body = loop("r", rows, "serial", lambda r: loop("w", extent, "vectorized", lambda w: Store(
        O, (r, w), ld(A, r, w * stride) * 2.0)))
    kernel = compile_func(PrimFunc(f"strided_{stride}_{extent}", (A, O), body))
    a, o = rand(rows, extent * stride), np.zeros((rows, extent), "float32")
    kernel(a, o)
    np.testing.assert_array_equal(o, a[:, ::stride] * 2)
    assert "shufflevector" in kernel.unoptimized_ir and kernel.fallbacks == ()


def test_strided_read_under_select_stays_inside_the_buffer():
    """The padded input of a stride-2 convolution: lanes whose element lies outside the buffer
    are masked off (a stray read would be discarded but must not fault)."""
    I, O = buf("I", (8,)), buf("O", (5,))
    body = loop("o", 1, "serial", lambda o: loop("w", 5, "vectorized", lambda w: Store(
        O, (w,), select((w * 2 - 1 >= 0) & (w * 2 - 1 < 8), ld(I, w * 2 - 1), 0.0))))
    kernel = compile_func(PrimFunc("strided_pad", (I, O), body))
    storage = np.full(24, np.nan, "float32")
    image = storage[8:16]
    image[:] = rand(8)
    out = np.full(5, -1.0, "float32")
    kernel(image, out)
    np.testing.assert_array_equal(out, np.pad(image, 1)[::2][:5])
    assert "shufflevector" in kernel.unoptimized_ir and kernel.fallbacks == ()


@pytest.mark.parametrize("lanes", [8, 14])
def test_guard_inside_vectorized_loop_masks_its_lanes(lanes):
    """A guarded split's tail (13 of 2 * lanes): one masked vector body, nothing read or written
    past either array (a guard is a lane mask, not a fallback)."""
    A, C = buf("A", (13,)), buf("C", (13,))
    body = loop("o", 2, "serial", lambda o: loop("i", lanes, "vectorized", lambda i: IfThenElse(
        o * lanes + i < 13, Store(C, (o * lanes + i,), ld(A, o * lanes + i) * 2.0))))
    kernel = compile_func(PrimFunc(f"guarded{lanes}", (A, C), body))
    a, c = np.full(64, np.nan, "float32"), np.full(64, 7.0, "float32")
    a[:13] = rand(13)
    kernel(a[:13], c[:13])
    np.testing.assert_array_equal(c[:13], a[:13] * 2)
    assert (c[13:] == 7.0).all()
    assert kernel.fallbacks == () and "llvm.masked.store" in kernel.llvm_ir


def test_masked_branches_with_else_and_a_scattered_store():
    """if/else on a lane condition, one branch a strided (per-lane) store."""
    A, B, C = buf("A", (16,)), buf("B", (16,)), buf("C", (32,))
    body = loop("o", 2, "serial", lambda o: loop("i", 8, "vectorized", lambda i: IfThenElse(
        (o * 8 + i) % 3 == 0, Store(B, (o * 8 + i,), ld(A, o * 8 + i) + 1.0),
        seq(Store(B, (o * 8 + i,), ld(A, o * 8 + i) - 1.0), Store(C, ((o * 8 + i) * 2,), ld(A, o * 8 + i))))))
    kernel = compile_func(PrimFunc("branches", (A, B, C), body))
    a, b, c = rand(16), np.zeros(16, "float32"), np.zeros(32, "float32")
    kernel(a, b, c)
    picked = np.arange(16) % 3 == 0
    np.testing.assert_array_equal(b, np.where(picked, a + 1, a - 1))
    np.testing.assert_array_equal(c[::2], np.where(picked, 0, a))
    assert kernel.fallbacks == ()


def test_lanes_reading_neighbours_fall_back():
    A = buf("A", (9,))
    body = loop("i", 8, "vectorized", lambda i: Store(A, (i + 1,), ld(A, i) + 1.0))
    kernel = compile_func(PrimFunc("prefix", (A,), body))
    a = np.zeros(9, "float32")
    kernel(a)
    np.testing.assert_array_equal(a, np.arange(9, dtype="float32"))
    assert kernel.fallbacks


@pytest.mark.parametrize("width", [64, 5000])   # 256 B on the stack; 20 KB from the heap
def test_scratch_buffer_per_parallel_chunk(width):
    M = 11
    A, O, T = buf("A", (M, width)), buf("O", (M, width)), buf("T", (width,), scope="local")

    def row(i):
        fill = loop("j", width, "serial", lambda j: Store(T, (j,), ld(A, i, j) * 2.0))
        use = loop("j2", width, "serial", lambda j: Store(O, (i, j), ld(T, width - 1 - j) + 1.0))
        return Allocate(T, seq(fill, use))
    kernel = compile_func(PrimFunc(f"scratch_{width}", (A, O), loop("i", M, "parallel", row)))
    a, o = rand(M, width), np.zeros((M, width), "float32")
    kernel(a, o)
    np.testing.assert_array_equal(o, a[:, ::-1] * 2 + 1)
    assert ("@\"take_scratch\"" in kernel.unoptimized_ir) == (width == 5000)
    # Either way the scratch starts on a 64-byte line (C11 wants the heap size a multiple of it).
    if width == 64:
        assert re.search(r"alloca \[\d+ x float\], align 64", kernel.unoptimized_ir)
        # Zeroed: lanes past a row's end are computed, and garbage there can be slow denormals.
        assert '@"llvm.memset.p0.i64"(ptr %"T", i8 0, i64 256' in kernel.unoptimized_ir
    else:
        size = int(re.search(r'@"take_scratch"\(ptr @"scratch_slots_0", i64 (\d+)\)', kernel.unoptimized_ir).group(1))
        assert size >= 5000 * 4 and size % 64 == 0


def test_segments_run_in_order():
    N = 40
    A, T, O = buf("A", (N,)), buf("T", (N,)), buf("O", (N,))
    first = loop("i", N, "parallel", lambda i: Store(T, (i,), ld(A, i) * 3.0))
    second = loop("i", N, "parallel", lambda i: Store(O, (i,), ld(T, N - 1 - i) - ld(T, i)))
    kernel = compile_func(PrimFunc("two_nests", (A, T, O), seq(first, second)))
    a, t, o = rand(N), np.zeros(N, "float32"), np.zeros(N, "float32")
    kernel(a, t, o)
    np.testing.assert_allclose(o, (a * 3)[::-1] - a * 3, rtol=1e-6)


def test_split_range_covers_every_iteration_once():
    assert split_range(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert split_range(2, 8) == [(0, 1), (1, 2)]
    assert split_range(0, 4) == [(0, 0)]


def test_bad_arguments_name_the_parameter():
    kernel = compile_func(gemm(4, 4, 4))
    ok = np.zeros((4, 4), "float32")
    with pytest.raises(ValueError, match=r"argument 'A' has shape \(3, 4\), expected \(4, 4\)"):
        kernel(np.zeros((3, 4), "float32"), ok, ok.copy())
    with pytest.raises(ValueError, match="argument 'B' has dtype float64, expected float32"):
        kernel(ok, np.zeros((4, 4)), ok.copy())
    with pytest.raises(EvaluationError, match="argument 'O' is not C-contiguous"):
        kernel(ok, ok, np.zeros((4, 4), "float32").T)
    with pytest.raises(EvaluationError, match="'A' and 'O' overlap"):
        kernel(ok, ok, ok)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        kernel(ok)


def test_thread_bound_loop_is_refused():
    A = buf("A", (32,))
    body = loop("tx", 32, "threadIdx.x", lambda tx: Store(A, (tx,), 1.0))
    with pytest.raises(CodegenError, match="loop 'tx' is bound to threadIdx.x: the llvm back end runs no GPU"):
        compile_func(PrimFunc("gpu_only", (A,), body))


def test_identical_kernels_compile_once():
    first, second = compile_func(gemm(8, 8, 8)), compile_func(gemm(8, 8, 8))
    assert first is second
    assert compile_func(gemm(8, 8, 8), opt_level=2) is not first
    assert compile_func(gemm(8, 16, 8)) is not first


def test_torch_tensors_are_used_in_place():
    torch = pytest.importorskip("torch")
    kernel = compile_func(elementwise("vectorized", 8))
    a, b = torch.randn(32), torch.randn(32)
    c = torch.zeros(32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a + b)
    with pytest.raises(ValueError, match="argument 'C' has dtype float64"):
        kernel(a, b, torch.zeros(32, dtype=torch.float64))


def test_a_body_unrolled_past_the_code_size_budget_is_rolled_back_and_stays_correct():
    """64 x 64 unrolled scalar statements would be ~50k LLVM instructions (a minute of -O3 on
    such modules): the outer unrolled loop becomes a counted loop, the inner one stays unrolled."""
    from codegen.code_size import MAX_EMITTED_INSTRUCTIONS
    from codegen.cpu_backend import _instruction_count

    A, O = buf("A", (64, 64)), buf("O", (64, 64))
    body = loop("i", 64, "unrolled", lambda i: loop("j", 64, "unrolled", lambda j: Store(
        O, (i, j), ld(A, i, j) * ld(A, j, i) + ld(A, (i + 1) % 64, j) - ld(A, i, (j + 3) % 64))))
    kernel = compile_func(PrimFunc("unrolled_past_budget", (A, O), body))
    assert _instruction_count(kernel.unoptimized_ir) <= MAX_EMITTED_INSTRUCTIONS
    assert [loop.kind for loop in (kernel.func.body, kernel.func.body.body)] == ["serial", "unrolled"]
    a, o = rand(64, 64), np.zeros((64, 64), "float32")
    kernel(a, o)
    np.testing.assert_allclose(o, a * a.T + np.roll(a, -1, axis=0) - np.roll(a, -3, axis=1), rtol=1e-5, atol=1e-5)


def test_a_module_past_the_code_size_budget_is_not_emitted_whole(monkeypatch):
    """40 x 40 unrolled statements are fewer stores than the budget allows but over three times its
    instructions: emission stops near the budget, and the rolled module is emitted whole."""
    from codegen import cpu_backend
    from codegen.code_size import MAX_EMITTED_INSTRUCTIONS

    builders = []

    class Recorded(cpu_backend.ModuleBuilder):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            builders.append(self)

    monkeypatch.setattr(cpu_backend, "ModuleBuilder", Recorded)
    A, O = buf("A", (40, 40)), buf("O", (40, 40))
    body = loop("i", 40, "unrolled", lambda i: loop("j", 40, "unrolled", lambda j: Store(
        O, (i, j), ld(A, i, j) * ld(A, j, i) + ld(A, (i + 1) % 40, j) - ld(A, i, (j + 3) % 40))))
    kernel = compile_func(PrimFunc("stopped_at_budget", (A, O), body))
    first, *_, last = builders
    assert first.stores < 40 * 40 and MAX_EMITTED_INSTRUCTIONS < first.instructions() < 1.1 * MAX_EMITTED_INSTRUCTIONS
    assert last.instructions() <= MAX_EMITTED_INSTRUCTIONS and kernel.func.body.kind == "serial"
    a, o = rand(40, 40), np.zeros((40, 40), "float32")
    kernel(a, o)
    np.testing.assert_allclose(o, a * a.T + np.roll(a, -1, axis=0) - np.roll(a, -3, axis=1), rtol=1e-5, atol=1e-5)


def test_a_module_whose_rolled_loops_cost_more_fits_the_budget_in_few_emissions(monkeypatch):
    """Rolled loops cost more instructions per store than the unrolled stores they replace (their
    counter, test and branch), so rolling to the last emission's prediction can fall short: each
    further attempt aims lower, and 30 unrolled 4 x 16 nests fit in three emissions. The module
    builder here prices 20 instructions a store and 40 a rolled loop, and stops at the limit as
    the real one does, before it has measured any loop (each is priced by its stores)."""
    from codegen.code_size import MAX_EMITTED_INSTRUCTIONS, emitted_copies
    from codegen.llvm_backend import InstructionLimitReached

    def rolled_loops(stmt):
        if isinstance(stmt, Seq):
            return sum(rolled_loops(part) for part in stmt.stmts)
        if isinstance(stmt, For):
            return (stmt.kind == "serial") + rolled_loops(stmt.body) * (stmt.extent if stmt.kind == "unrolled" else 1)
        return 0

    emissions = []

    class Priced:
        def __init__(self, func, triple, data_layout, register_lanes, instruction_limit=None, vector_registers=16):
            self.func, self.limit = func, instruction_limit
            self.stores, self.count, self.unrolled_costs = 0, 0, {}
            emissions.append(self)

        def instructions(self):
            return self.count

        def build(self):
            copies = emitted_copies(self.func.body)
            self.count, self.stores = 20 * copies + 40 * rolled_loops(self.func.body), copies
            if self.limit is not None and self.count > self.limit:
                self.stores = max(1, copies * self.limit // self.count)
                self.count = self.limit + 20
                raise InstructionLimitReached(self.count, self.stores)
            return "define void @f() {" + "\n  x" * self.count + "\n}"

    monkeypatch.setattr(cpu_backend, "ModuleBuilder", Priced)
    A, O = buf("A", (30, 4, 16)), buf("O", (30, 4, 16))
    body = seq(*[loop("i", 4, "unrolled", lambda i, n=n: loop("j", 16, "unrolled", lambda j: Store(
        O, (n, i, j), ld(A, n, i, j) * 2.0))) for n in range(30)])
    text, _, func = cpu_backend._module_text(PrimFunc("many_nests", (A, O), body), 3, False, None)
    assert cpu_backend._instruction_count(text) <= MAX_EMITTED_INSTRUCTIONS
    assert emitted_copies(func.body) < 30 * 4 * 16 and len(emissions) <= 3


def test_the_module_builder_measures_each_unrolled_loop_it_lays_out():
    """What rolling a loop would save comes from the emission itself: each unrolled loop's
    instructions and how many times it was laid out, counted as the module grows (the same
    count as its text's)."""
    from codegen.llvm_backend import ModuleBuilder

    A, O = buf("A", (7, 48)), buf("O", (6, 48))
    inner = {}

    def row(i):
        inner["loop"] = loop("j", 48, "unrolled", lambda j: Store(O, (i, j), ld(A, i, j) * ld(A, i + 1, j)))
        return inner["loop"]

    outer = loop("i", 6, "unrolled", row)
    triple, layout = cpu_backend._host_layout()
    builder = ModuleBuilder(PrimFunc("measured", (A, O), outer), triple, layout, 8)
    text = str(builder.build())
    assert builder.instructions() == cpu_backend._instruction_count(text)
    outer_spent, outer_times = builder.unrolled_costs[outer]
    inner_spent, inner_times = builder.unrolled_costs[inner["loop"]]
    assert (outer_times, inner_times) == (1, 6)
    assert 6 * 48 * 3 <= inner_spent <= outer_spent < builder.instructions()


def test_the_module_builder_counts_its_instructions_as_the_text_does():
    """The code-size budget reads the count as the module grows, and the module is written out as
    text only once it is kept."""
    from codegen.llvm_backend import ModuleBuilder

    A, O = buf("A", (7, 48)), buf("O", (6, 48))
    body = loop("i", 6, "unrolled", lambda i: loop("j", 48, "vectorized", lambda j: Store(
        O, (i, j), select(ld(A, i, j) > 0.5, ld(A, i, j) * ld(A, i + 1, j), ld(A, i + 1, j)))))
    triple, layout = cpu_backend._host_layout()
    builder = ModuleBuilder(PrimFunc("counted", (A, O), body), triple, layout, 8)
    text = str(builder.build())
    assert builder.instructions() == cpu_backend._instruction_count(text) > 6


def test_a_guarded_register_tile_stays_in_registers():
    """29 columns in tiles of 16, so the second tile's guard leaves 13 lanes on: its accumulations
    blend under the guard's mask instead of masked stores, so the tile's loads and stores stay
    plain and SROA keeps it out of memory."""
    A, O = buf("A", (5, 29)), buf("O", (2, 29))
    tile = buf("tile", (2, 16), scope="local")

    def for_tile_rows(make):
        return seq(*[loop("j", 16, "vectorized", lambda j, r=r: make(r, j)) for r in range(2)])

    def body(o):
        column = lambda j: o * 16 + j  # noqa: E731
        guard = lambda j, stmt: IfThenElse(column(j) < 29, stmt)  # noqa: E731
        init = for_tile_rows(lambda r, j: Store(tile, (r, j), 0.0))
        steps = [for_tile_rows(lambda r, j, k=k: guard(j, Store(tile, (r, j), ld(tile, r, j)
                                                                   + ld(A, k, column(j)) * float(r + 1))))
                 for k in range(5)]
        out = for_tile_rows(lambda r, j: guard(j, Store(O, (r, column(j)), ld(tile, r, j))))
        return Allocate(tile, seq(init, *steps, out))
    kernel = compile_func(PrimFunc("guarded_tile", (A, O), loop("o", 2, "serial", body)))
    a, o = rand(5, 29), np.zeros((2, 29), "float32")
    kernel(a, o)
    np.testing.assert_allclose(o, np.outer([1, 2], a.sum(axis=0)), rtol=1e-5, atol=1e-5)
    assert kernel.fallbacks == () and "alloca" not in kernel.llvm_ir


def test_a_loop_is_not_cloned_per_outcome_of_an_invariant_test():
    """C[o, i] = 3 A[o, i] for every i, B[o, i] = A[o, i] + 1 only where o < 32: -O3's nontrivial
    unswitching would clone the i loop per outcome of o < 32, the multiplication in both copies;
    the back end keeps one loop (the cloning cost 40% of a 3 x 3 convolution's build time)."""
    A, B, C = buf("A", (64, 256)), buf("B", (64, 256)), buf("C", (64, 256))
    body = loop("o", 64, "serial", lambda o: loop("i", 256, "serial", lambda i: seq(
        Store(C, (o, i), ld(A, o, i) * 3.0), IfThenElse(o < 32, Store(B, (o, i), ld(A, o, i) + 1.0)))))
    kernel = compile_func(PrimFunc("invariant_test", (A, B, C), body))
    a, b, c = rand(64, 256), np.zeros((64, 256), "float32"), np.zeros((64, 256), "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, a * 3, rtol=1e-6)
    np.testing.assert_allclose(b, np.where(np.arange(64)[:, None] < 32, a + 1, 0), rtol=1e-6)
    multiplies, adds = (len(re.findall(rf"= {op} ", kernel.llvm_ir)) for op in ("fmul", "fadd"))
    assert adds > 0 and multiplies == adds


def test_an_unrolled_tile_shares_its_address_arithmetic():
    """A 4 x 8 tile of C[i, j] += A[i, k] * B[k, j], unrolled inside a serial k loop: every
    access's address is one shared sum of the loop counters plus a constant, so the tile's 96
    accesses cost at most an add each, with no multiply per dimension."""
    M, N, K = 4, 8, 16
    A, B, C = buf("A", (M, K)), buf("B", (K, N)), buf("C", (M, N))
    body = loop("k", K, "serial", lambda k: loop("i", M, "unrolled", lambda i: loop("j", N, "unrolled", lambda j: Store(
        C, (i, j), ld(C, i, j) + ld(A, i, k) * ld(B, k, j)))))
    kernel = compile_func(PrimFunc("shared_addresses", (A, B, C), body))
    instructions = re.findall(r"= (\w+)(?: nsw)? i64 ", kernel.unoptimized_ir)
    accesses = kernel.unoptimized_ir.count("getelementptr")
    assert accesses >= 3 * M * N
    assert instructions.count("mul") <= 2 and instructions.count("add") <= accesses
    a, b, c = rand(M, K), rand(K, N), rand(M, N)
    expected = c + a @ b
    kernel(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,bits", [("int32", 32), ("int64", 64)])
def test_constant_integer_arithmetic_folds_as_the_machine_computes_it(dtype, bits):
    """Constant operands fold at emission with the instruction's semantics: wrapping at the
    type's width, division truncating toward zero (what legalised // and % are built from)."""
    from flexsched.expr import Const, Intrinsic

    top = 2 ** (bits - 1) - 1
    cases = [("+", top, 1), ("*", top, 3), ("-", -top - 1, 1), ("tdiv", -7, 2), ("tmod", -7, 2),
             ("tdiv", 7, -2), ("tmod", 7, -2), ("tmod", -8, 4)]
    C = buf("C", (len(cases),), dtype)

    def constant(value):
        return Const(value, dtype)

    def value_of(op, a, b):
        if op in ("tdiv", "tmod"):
            return Intrinsic(op, (constant(a), constant(b)), dtype)
        return {"+": constant(a) + constant(b), "-": constant(a) - constant(b), "*": constant(a) * constant(b)}[op]

    body = seq(*[Store(C, (n,), value_of(*case)) for n, case in enumerate(cases)])
    kernel = compile_func(PrimFunc(f"folded_{dtype}", (C,), body))
    assert not re.search(r"= (add|sub|mul|sdiv|srem)", kernel.unoptimized_ir)   # all folded
    c = np.zeros(len(cases), dtype)
    kernel(c)
    wrap = lambda n: (n + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)   # noqa: E731
    truncated = lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)   # noqa: E731
    expected = [wrap({"+": a + b, "-": a - b, "*": a * b, "tdiv": truncated(a, b),
                      "tmod": a - truncated(a, b) * b}[op]) for op, a, b in cases]
    assert c.tolist() == expected


@pytest.mark.parametrize("enabled", [True, False])
def test_compiling_leaves_the_cycle_collector_as_it_found_it(enabled):
    """Emission pauses Python's cycle collector; a caller's setting is back afterwards, even
    when the function is refused."""
    import gc

    gc.enable() if enabled else gc.disable()
    try:
        compile_func(elementwise("vectorized", 8))
        assert gc.isenabled() == enabled
        with pytest.raises(CodegenError):
            A = buf("A", (4,))
            compile_func(PrimFunc("bad", (A,), loop("i", 4, "thread", lambda i: Store(A, (i,), 1.0))))
        assert gc.isenabled() == enabled
    finally:
        gc.enable()


def test_a_nest_that_only_fills_stays_a_loop():
    """A reduction's zeroing nest over strided rows is kept rolled: LLVM would unroll it into a store per
    row (thousands on a YOLO layer, seconds in its instruction schedulers), for no speed."""
    C = buf("C", (64 * 64,))

    def rows(o):
        return loop("r", 64, "serial", lambda r: loop("i", 16, "vectorized",
                                                        lambda i: Store(C, (r * 64 + o * 16 + i,), 0.0)))
    func = PrimFunc("fill_rows", (C,), loop("o", 4, "serial", rows))
    compiled = compile_func(func)
    assert len(re.findall(r"store <\d+ x float> zeroinitializer", compiled.llvm_ir)) <= 4   # a store per pass of o at most
    c = np.ones(64 * 64, dtype="float32")
    compiled(c)
    assert not c.any()
