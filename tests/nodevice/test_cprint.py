"""The C printer of the loop IR (codegen.cprint): expressions and statements as C text, what it
refuses, and a hand-built kernel compiled with g++ that must agree with numpy once legalised."""

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from codegen.cprint import CPrinter, CPrintError, c_name, indices_fit_int32
from codegen.ir import Allocate, Barrier, Buffer, For, IfThenElse, PrimFunc, Store, loop_var, seq
from codegen.legalize import legalize, legalize_expr
from flexsched.expr import Binary, Call, Cast, Compare, Const, Intrinsic, Load, Logical, Select


class TinyDialect(CPrinter):
    """A test dialect: extern "C" entry, a comment per loop, int indices where they fit."""

    dialect = "tiny"

    def signature(self, func):
        return 'extern "C" ' + super().signature(func)

    def loop_prefix(self, loop, indent):
        return [f"{indent}// loop {loop.var.name} ({loop.kind})"]

    def index_type(self, func):
        return "int32" if indices_fit_int32(func) else "int64"


def i64(value):
    return Const(value, "int64")


I = loop_var("i", 8)
J = loop_var("j", 64)
A = Buffer("A", (8, 64), "float32")
T = Buffer("T", (4, 2), "int32", "local")
X = Load(A, (I, J), "float32")


def text(node, printer=None):
    return (printer or CPrinter()).expr(node, bare=True)


# ---------------------------------------------------------------- expressions

@pytest.mark.parametrize("value, dtype, expected", [
    (1.5, "float32", "1.5f"), (1.5, "float64", "1.5"), (0.1, "float32", "0.10000000149011612f"),
    (-2.0, "float32", "(-2.0f)"), (float("inf"), "float32", "INFINITY"),
    (float("-inf"), "float64", "(-INFINITY)"), (float("nan"), "float32", "NAN"),
    (5, "int32", "5"), (-5, "int32", "(-5)"), (5, "int64", "5LL"), (-2**31, "int32", "(-2147483647 - 1)"),
    (-2**63, "int64", "(-9223372036854775807LL - 1)"), (True, "bool", "true"),
])
def test_literals_carry_their_type(value, dtype, expected):
    assert text(Const(value, dtype)) == expected


def test_operators_print_with_safe_parentheses_and_c_logic():
    cond = Logical("&", Compare(">=", I, i64(1)), Logical("~", Compare("<", J, i64(3)), None))
    assert text(cond) == "(i >= 1LL) && (!(j < 3LL))"
    either = Logical("|", Compare("==", I, i64(0)), Compare("!=", X, X))
    assert text(either) == "(i == 0LL) || (A[(i) * 64 + (j)] != A[(i) * 64 + (j)])"
    sum_times = Binary("*", Binary("+", X, Const(1.0, "float32"), "float32"), X, "float32")
    assert text(sum_times) == "(A[(i) * 64 + (j)] + 1.0f) * A[(i) * 64 + (j)]"


def test_select_is_cs_conditional_and_promotes_its_branches():
    padded = Select(Compare("<", I, i64(4)), X, Const(0, "int32"), "float32")
    assert text(padded) == "(i < 4LL) ? A[(i) * 64 + (j)] : 0.0f"
    widened = Select(Compare("<", I, i64(4)), Cast(I, "int32"), Const(7, "int32"), "float64")
    assert text(widened) == "(i < 4LL) ? ((double)((int)i)) : 7.0"


def test_casts_and_math_functions_per_dtype():
    assert text(Cast(I, "float32")) == "(float)i"
    assert text(Cast(Binary("+", I, J, "int64"), "int32")) == "(int)(i + j)"
    assert text(Call("exp", X, "float32")) == "expf(A[(i) * 64 + (j)])"
    assert text(Call("abs", Cast(X, "float64"), "float64")) == "fabs((double)A[(i) * 64 + (j)])"
    assert text(Call("abs", Cast(X, "int64"), "int64")) == "llabs((long long)A[(i) * 64 + (j)])"
    assert text(Call("tanh", X, "float32"), type("Std", (CPrinter,), {
        "math_function": lambda self, func, dtype: f"std::{func}"})()) == "std::tanh(A[(i) * 64 + (j)])"


def test_intrinsics_print_as_c_operators_and_math_functions():
    assert text(Intrinsic("tdiv", (I, i64(3)), "int64")) == "i / 3LL"
    assert text(Intrinsic("tmod", (Binary("-", I, J, "int64"), Const(3, "int32")), "int64")) == "(i - j) % 3LL"
    assert text(Intrinsic("floor", (X,), "float32")) == "floorf(A[(i) * 64 + (j)])"
    y = Cast(X, "float64")
    assert text(Intrinsic("fmod", (y, Const(2.0, "float64")), "float64")) == "fmod((double)A[(i) * 64 + (j)], 2.0)"


@pytest.mark.parametrize("op", ["//", "%", "max", "min"])
def test_an_unlegalised_operator_is_refused_by_name(op):
    node = Binary(op, Cast(X, "int32"), Const(3, "int32"), "int32")
    with pytest.raises(CPrintError, match=f"operator '{op}' .* not legalised"):
        text(node)
    text(legalize_expr(node))  # prints once legalised


def test_global_buffers_flatten_and_scratch_buffers_stay_arrays():
    printer = CPrinter()
    assert printer.access(A, (I, J)) == "A[(i) * 64 + (j)]"
    assert printer.access(T, (I, i64(1))) == "T[i][1LL]"
    assert printer.access(Buffer("S", (), "float32"), ()) == "S[0]"
    flat = type("Flat", (CPrinter,), {"flattened": lambda self, buffer: True})()
    assert flat.access(T, (I, i64(1))) == "T[(i) * 2 + (1LL)]"
    assert flat.allocate(T, "") == ["int T[8];"]


def test_names_become_c_identifiers():
    assert c_name("O.local.k+j.0") == "O_local_k_j_0"
    assert c_name("1x") == "_1x"
    assert c_name("int") == "int_"


# ---------------------------------------------------------------- statements and index types

def _store_kernel(extent, big=False):
    i = loop_var("i", extent)
    out = Buffer("O", (extent,), "int64")
    value = Binary("*", i, i64(2**40), "int64") if big else Binary("+", Binary("*", i, i64(3), "int64"), i64(1),
                                                                   "int64")
    return PrimFunc("k", (out,), For(i, extent, "serial", Store(out, (i,), value)))


def test_index_arithmetic_narrows_only_where_proven():
    printer = TinyDialect()
    small = printer.function(_store_kernel(16))
    assert "for (int i = 0; i < 16; ++i) {" in small
    assert "O[(i)] = (i * 3) + 1;" in small
    big_value = printer.function(_store_kernel(16, big=True))  # a value past int32 stays long long
    assert "O[(i)] = ((long long)i) * 1099511627776LL;" in big_value
    huge = printer.function(_store_kernel(2**31))  # a buffer of 2^31 elements: long long indices
    assert "for (long long i = 0; i < 2147483648; ++i) {" in huge
    assert "O[(i)] = (i * 3LL) + 1LL;" in huge


def test_statements_and_hooks():
    i, j = loop_var("s.i", 4), loop_var("s.j", 2)
    out = Buffer("O", (4,), "float32")
    body = For(i, 4, "serial", Allocate(T, seq(
        For(j, 2, "unrolled", Store(T, (i, j), Cast(j, "int32"))),
        IfThenElse(Compare(">", i, i64(1)), Store(out, (i,), Cast(Load(T, (i, i64(1)), "int32"), "float32")),
                   Store(out, (i,), Const(-1.0, "float32"))))))
    source = TinyDialect().function(PrimFunc("f", (out,), body))
    assert source == """\
extern "C" void f(float *O) {
  // loop s.i (serial)
  for (int s_i = 0; s_i < 4; ++s_i) {
    int T[4][2];
    // loop s.j (unrolled)
    for (int s_j = 0; s_j < 2; ++s_j) {
      T[s_i][s_j] = (int)s_j;
    }
    if (s_i > 1) {
      O[(s_i)] = (float)T[s_i][1];
    } else {
      O[(s_i)] = (-1.0f);
    }
  }
}
"""


def test_gpu_loops_and_barriers_are_refused_by_the_base_printer():
    i = loop_var("b.x", 4)
    out = Buffer("O", (4,), "float32")
    bound = PrimFunc("g", (out,), For(i, 4, "blockIdx.x", Store(out, (i,), Const(0.0, "float32"))))
    with pytest.raises(CPrintError, match="loop 'b.x' is bound to blockIdx.x"):
        CPrinter().function(bound)
    with pytest.raises(CPrintError, match="barrier"):
        CPrinter().stmt(Barrier(), "")


# ---------------------------------------------------------------- compiled with g++

N = 64


def _semantics_kernel():
    """Floor division and modulo of int32 (by data and by constants of both signs), float
    modulo, and NaN-propagating max / min, through a scratch buffer and an if / else."""
    i = loop_var("i", N)
    names = {"A": "int32", "B": "int32", "X": "float32", "Y": "float32",
             "Q": "int32", "R": "int32", "S": "int32", "F": "float32", "M": "float32", "m": "float32"}
    buf = {name: Buffer(name, (N,), dtype) for name, dtype in names.items()}
    a, b, x, y = (Load(buf[n], (i,), names[n]) for n in "ABXY")
    scratch = Buffer("T", (2,), "int32", "local")
    body = Allocate(scratch, seq(
        Store(scratch, (i64(0),), Binary("//", a, b, "int32")),
        Store(scratch, (i64(1),), Binary("%", a, b, "int32")),
        Store(buf["Q"], (i,), Load(scratch, (i64(0),), "int32")),
        Store(buf["R"], (i,), Load(scratch, (i64(1),), "int32")),
        IfThenElse(Compare("<", a, Const(0, "int32")),
                   Store(buf["S"], (i,), Binary("//", a, Const(3, "int32"), "int32")),
                   Store(buf["S"], (i,), Binary("%", a, Const(-4, "int32"), "int32"))),
        Store(buf["F"], (i,), Binary("%", x, y, "float32")),
        Store(buf["M"], (i,), Binary("max", x, y, "float32")),
        Store(buf["m"], (i,), Binary("min", x, y, "float32"))))
    params = tuple(buf[n] for n in names)
    return PrimFunc("semantics", params, For(i, N, "serial", body)), params


def _inputs():
    rng = np.random.default_rng(0)
    a = rng.integers(-20, 21, N).astype(np.int32)
    b = rng.integers(-5, 6, N).astype(np.int32)
    b[:4] = (0, -1, 0, -1)  # numpy: x // 0 == x % 0 == 0, x // -1 == -x
    a[:4] = (7, -7, -9, 9)
    x = rng.uniform(-4, 4, N).astype(np.float32)
    y = rng.uniform(-4, 4, N).astype(np.float32)
    y[rng.random(N) < 0.2] = np.nan
    x[rng.random(N) < 0.2] = np.nan
    return a, b, x, y


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_legalised_kernel_compiled_with_gpp_matches_numpy(tmp_path):
    func, params = _semantics_kernel()
    with pytest.raises(CPrintError, match="'//'"):
        TinyDialect().function(func)
    source = "#include <cmath>\n" + TinyDialect().function(legalize(func))
    (tmp_path / "k.cpp").write_text(source)
    build = subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-shared", "-fPIC", "-o",
                            str(tmp_path / "k.so"), str(tmp_path / "k.cpp")],
                           capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stderr[-3000:] + "\n" + source
    a, b, x, y = _inputs()
    outputs = {p.name: np.zeros(N, p.dtype) for p in params[4:]}
    arrays = [a, b, x, y, *outputs.values()]
    ctypes.CDLL(str(tmp_path / "k.so")).semantics(*(arr.ctypes.data_as(ctypes.c_void_p) for arr in arrays))
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = {"Q": a // b, "R": a % b, "S": np.where(a < 0, a // np.int32(3), a % np.int32(-4)),
                    "F": x % y, "M": np.maximum(x, y), "m": np.minimum(x, y)}
    for name, want in expected.items():
        np.testing.assert_array_equal(outputs[name], want.astype(outputs[name].dtype), err_msg=name)
