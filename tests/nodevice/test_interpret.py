"""The loop-IR interpreter: CPU-style kernels match the reference evaluator, hand-built GPU
launches match numpy, and what a lock-step emulation would hide (races, divergent barriers) and
what a kernel must not do (out-of-bounds, out-of-scope, bad arguments) fails with one line
naming the buffer or loop at fault."""

import math
import re

import numpy as np
import pytest

import flexsched as fs
from analysis import analyze
from codegen import interpret
from codegen.interpret import InterpretError, LaunchReport, run
from codegen.ir import Allocate, Barrier, Buffer, For, IfThenElse, PrimFunc, Store, loop_var, seq
from codegen.legalize import legalize
from codegen.lower import lower
from flexsched.expr import Load, as_expr, select
from flexsched.registry import get_task
from space import generate

from cases import SHAPES, LocalTask

def error_of(func, arrays, check=True):
    """The one-line message run() fails with."""
    with pytest.raises(InterpretError) as caught:
        run(func, arrays, check=check)
    message = str(caught.value)
    assert "\n" not in message
    return message


def load(buffer, *indices):
    return Load(buffer, tuple(as_expr(index, "int64") for index in indices), buffer.dtype)


def store(buffer, indices, value):
    return Store(buffer, tuple(as_expr(index, "int64") for index in indices), as_expr(value, buffer.dtype))


# ---------------------------------------------------------------- CPU-style kernels

def run_lowered(task, schedule, inputs):
    """Outputs of the task's kernel under a schedule, interpreted."""
    func = legalize(lower(task, schedule.apply(analyze(task))).func)
    outputs = [np.empty(b.shape, b.dtype) for b in func.params[len(inputs):]]
    # A kernel whose axes merged declares its parameters merged: the same memory, reshaped.
    report = run(func, [*(a.reshape(b.shape) for a, b in zip(inputs, func.params)), *outputs])
    assert report.launches == ()
    return [out.reshape(t.shape) for out, t in zip(outputs, task.outputs)]


def check_cpu_points(task, count, seed, inputs):
    space = generate(analyze(task), "llvm")
    rng = np.random.default_rng(seed)
    with np.errstate(divide="ignore"):  # numpy's x // 0 == 0 is the semantics pinned
        expected = task.evaluate(*inputs)
    for _ in range(count):
        schedule = space.schedule(space.random_point(rng))
        for out, ref in zip(run_lowered(task, schedule, inputs), expected):
            if np.issubdtype(ref.dtype, np.integer):
                np.testing.assert_array_equal(out, ref, err_msg=f"{task} under {schedule.to_json()}")
            else:
                scale = max(1.0, float(np.abs(ref).max()))
                np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * scale,
                                           err_msg=f"{task} under {schedule.to_json()}")


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_random_cpu_points_of_every_operator_match_the_reference(name):
    task = get_task(name, *SHAPES[name])
    check_cpu_points(task, count=3, seed=0, inputs=task.random_inputs(0))


@pytest.mark.parametrize("name", ["C1D", "DEP", "BCM"])
def test_loops_run_in_order_give_the_same_bits(name, monkeypatch):
    """Sequential loops normally run their iterations as lanes; one lane at a time must agree."""
    task = get_task(name, *SHAPES[name])
    space = generate(analyze(task), "llvm")
    schedule = space.schedule(space.random_point(np.random.default_rng(3)))
    inputs = task.random_inputs(1)
    as_lanes = run_lowered(task, schedule, inputs)
    monkeypatch.setattr(interpret, "_MAX_LANES", 1)
    in_order = run_lowered(task, schedule, inputs)
    for a, b in zip(as_lanes, in_order):
        np.testing.assert_array_equal(a, b)


def floor_semantics_task():
    """Integer // and % of negatives by constants and by a tensor holding 0 and -1, under a max
    reduction, and float // and %: pins numpy's floor semantics through legalisation's
    tdiv / tmod / floor / fmod intrinsics."""
    X = fs.placeholder((6, 9), "int32", name="X")
    D = fs.placeholder((6,), "int32", name="D")
    Y = fs.placeholder((6, 9), name="Y")
    k = fs.reduce_axis(9, "k")
    M = fs.compute((6,), lambda i: fs.max(X[i, k] // D[i] + X[i, k] % 4 - (X[i, k] - 5) // 3
                                          + X[i, k] % D[i] * 7, axis=k), name="M")
    F = fs.compute((6, 9), lambda i, j: Y[i, j] // 0.3 + Y[i, j] % 0.7 - fs.max(Y[i, j], 0.25), name="F")
    return LocalTask("floor_semantics", (X, D, Y), (M, F))


def test_floor_division_modulo_and_max_reduction_on_negative_integers():
    task = floor_semantics_task()
    rng = np.random.default_rng(4)
    inputs = [rng.integers(-9, 10, (6, 9)).astype("int32"), np.array([3, -2, 0, -1, 1, -4], "int32"),
              rng.uniform(-2, 2, (6, 9)).astype("float32")]
    check_cpu_points(task, count=6, seed=5, inputs=inputs)


def test_a_loop_carried_dependence_runs_in_order():
    """A prefix sum: lanes would read what an earlier iteration has not written yet."""
    X = Buffer("X", (9,), "float64")
    i = loop_var("i", 8)
    func = PrimFunc("prefix", (X,), For(i, 8, "parallel", store(X, (i + 1,), load(X, i) + load(X, i + 1))))
    data = np.arange(1.0, 10.0)
    run(func, [data])
    np.testing.assert_array_equal(data, np.cumsum(np.arange(1.0, 10.0)))


def test_scratch_reused_by_every_iteration_runs_in_order():
    """A local buffer allocated once outside a loop and rewritten by each iteration."""
    X, O = Buffer("X", (5,), "float32"), Buffer("O", (5,), "float32")
    t = Buffer("t", (1,), "float32", "local")
    i = loop_var("i", 5)
    body = For(i, 5, "vectorized", seq(store(t, (0,), load(X, i) * 2.0), store(O, (i,), load(t, 0) + 1.0)))
    data, out = np.arange(5, dtype="float32"), np.empty(5, "float32")
    run(PrimFunc("scratch", (X, O), Allocate(t, body)), [data, out])
    np.testing.assert_array_equal(out, data * 2 + 1)


def test_an_error_only_lanes_would_meet_is_replayed_in_order():
    """Run as lanes, iteration 1 would read X[1] before iteration 0 writes it and index D with
    the stale 100; in order, nothing is out of bounds."""
    X, D = Buffer("X", (6,), "int64"), Buffer("D", (10,), "int64")
    i = loop_var("i", 5)
    func = PrimFunc("chase", (X, D), For(i, 5, "serial", store(X, (i + 1,), load(D, load(X, i)))))
    x, d = np.array([3, 100, 100, 100, 100, 100]), np.arange(10)
    run(func, [x, d])
    np.testing.assert_array_equal(x, [3, 3, 3, 3, 3, 3])


# ---------------------------------------------------------------- a GPU launch built by hand

M, N, K = 8, 12, 13
TM, TN, TK = 4, 4, 6            # block tile; threadIdx.x runs over TN columns, threadIdx.y over TM rows
THREADS = TM * TN
K_TILES = math.ceil(K / TK)


def tiled_matmul(barrier_before=True, barrier_after=True, whole_tile_fill=False, init_accumulator=True,
                 column_of=lambda tx: tx, barrier_guard=None):
    """C = A @ B in the shape the GPU passes produce: block loops, shared tiles filled
    cooperatively (thread t copies elements t, t + THREADS, ...) between barriers inside the
    reduction loop, a local accumulator per thread. The options break it."""
    A, B, C = Buffer("A", (M, K), "float32"), Buffer("B", (K, N), "float32"), Buffer("C", (M, N), "float32")
    A_shared = Buffer("A_shared", (TM, TK), "float32", "shared")
    B_shared = Buffer("B_shared", (TK, TN), "float32", "shared")
    acc = Buffer("acc", (1,), "float32", "local")
    bx, by = loop_var("bx", N // TN), loop_var("by", M // TM)
    tx, ty = loop_var("tx", TN), loop_var("ty", TM)
    ko, ki = loop_var("ko", K_TILES), loop_var("ki", TK)
    tid = tx + ty * TN

    def fill(shared, value_at):
        rows, cols = shared.shape
        count = rows * cols
        if whole_tile_fill:
            e = loop_var(f"{shared.name}_e", count)
            return For(e, count, "serial", store(shared, (e // cols, e % cols), value_at(e // cols, e % cols)))
        r = loop_var(f"{shared.name}_r", math.ceil(count / THREADS))
        e = tid + r * THREADS
        copy = store(shared, (e // cols, e % cols), value_at(e // cols, e % cols))
        return For(r, math.ceil(count / THREADS), "serial", IfThenElse(e < count, copy))

    # The K tail is padded with zeros; the select's untaken side would read out of bounds.
    fill_a = fill(A_shared, lambda row, col: select(ko * TK + col < K, load(A, by * TM + row, ko * TK + col), 0.0))
    fill_b = fill(B_shared, lambda row, col: select(ko * TK + row < K, load(B, ko * TK + row, bx * TN + col), 0.0))
    barrier = Barrier() if barrier_guard is None else IfThenElse(barrier_guard(tx), Barrier())
    update = store(acc, (0,), load(acc, 0) + load(A_shared, ty, ki) * load(B_shared, ki, tx))
    tile_step = seq(barrier if barrier_before else None, fill_a, fill_b, Barrier() if barrier_after else None,
                    For(ki, TK, "unrolled", update))
    thread_body = Allocate(acc, seq(store(acc, (0,), 0.0) if init_accumulator else None,
                                    For(ko, K_TILES, "serial", tile_step),
                                    store(C, (by * TM + ty, bx * TN + column_of(tx)), load(acc, 0))))
    threads = For(tx, TN, "threadIdx.x", For(ty, TM, "threadIdx.y", thread_body))
    blocks = For(bx, N // TN, "blockIdx.x", For(by, M // TM, "blockIdx.y",
                                                 Allocate(A_shared, Allocate(B_shared, threads))))
    return PrimFunc("tiled_matmul", (A, B, C), blocks)


def matmul_arrays(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (M, K)).astype("float32"), rng.uniform(-1, 1, (K, N)).astype("float32"),
            np.empty((M, N), "float32")]


@pytest.mark.parametrize("legalized", [False, True])
def test_tiled_matmul_with_shared_tiles_matches_numpy(legalized):
    func = tiled_matmul()
    arrays = matmul_arrays()
    report = run(legalize(func) if legalized else func, arrays)
    np.testing.assert_allclose(arrays[2], arrays[0].astype("float64") @ arrays[1], rtol=1e-5, atol=1e-5)
    assert report.launches == (LaunchReport(blocks=(N // TN) * (M // TM), threads=THREADS, barriers=2 * K_TILES),)


def test_memory_nobody_wrote_reaches_the_output_as_nan():
    arrays = matmul_arrays()
    run(tiled_matmul(init_accumulator=False), arrays)
    assert np.isnan(arrays[2]).all()


def test_missing_barrier_after_the_fill_is_a_read_before_the_barrier():
    message = error_of(tiled_matmul(barrier_after=False), matmul_arrays())
    assert "race on shared buffer 'A_shared'" in message and "reads what thread" in message
    assert "block 0" in message and "no barrier between" in message


def test_missing_barrier_before_the_refill_is_a_write_over_another_threads_read():
    message = error_of(tiled_matmul(barrier_before=False), matmul_arrays())
    assert re.fullmatch(r"race on shared buffer 'A_shared' element \(\d+, \d+\) in block \d+: thread \d+ writes "
                        r"what thread \d+ read with no barrier between them", message)


def test_every_thread_filling_the_whole_tile_is_a_write_write_race():
    message = error_of(tiled_matmul(whole_tile_fill=True), matmul_arrays())
    assert "race on shared buffer 'A_shared' element (0, 0)" in message and "write it in the same store" in message


def test_two_threads_writing_one_output_element_race():
    message = error_of(tiled_matmul(column_of=lambda tx: tx // 2), matmul_arrays())
    assert "race on global buffer 'C'" in message and "write it in the same store" in message


def test_barrier_inside_a_thread_dependent_condition_is_divergent():
    message = error_of(tiled_matmul(barrier_guard=lambda tx: tx < 3), matmul_arrays())
    assert "barrier reached by 12 of 16 threads of block 0" in message


def test_races_are_not_looked_for_without_check():
    arrays = matmul_arrays()
    run(tiled_matmul(barrier_after=False, barrier_before=False), arrays, check=False)
    np.testing.assert_allclose(arrays[2], arrays[0].astype("float64") @ arrays[1], rtol=1e-5, atol=1e-5)


def test_a_barrier_every_thread_reaches_under_a_block_condition_is_fine():
    arrays = matmul_arrays()
    run(tiled_matmul(barrier_guard=lambda tx: tx < TN), arrays)
    np.testing.assert_allclose(arrays[2], arrays[0].astype("float64") @ arrays[1], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- global memory and launches

def shift_kernel(separate_launches):
    """Y = 2 X, then Z[i] = Y[i + 1]: another block's element, which only a new launch publishes."""
    X, Y, Z = (Buffer(name, (16,), "float32") for name in "XYZ")

    def launch(body_of):
        b, t = loop_var("b", 4), loop_var("t", 4)
        return For(b, 4, "blockIdx.x", For(t, 4, "threadIdx.x", body_of(b * 4 + t)))

    def double(i):
        return store(Y, (i,), load(X, i) * 2.0)

    def shift(i):
        return store(Z, (i,), select(i < 15, load(Y, i + 1), 0.0))

    if separate_launches:
        return PrimFunc("shift", (X, Y, Z), seq(launch(double), launch(shift)))
    return PrimFunc("shift", (X, Y, Z), launch(lambda i: seq(double(i), shift(i))))


def test_a_second_launch_sees_the_first_launchs_writes():
    x, y, z = np.arange(16, dtype="float32"), np.empty(16, "float32"), np.empty(16, "float32")
    report = run(shift_kernel(separate_launches=True), [x, y, z])
    np.testing.assert_array_equal(z, np.append(2 * x[1:], 0))
    assert [launch.blocks for launch in report.launches] == [4, 4]


def test_reading_another_blocks_write_in_one_launch_races():
    arrays = [np.arange(16, dtype="float32"), np.empty(16, "float32"), np.empty(16, "float32")]
    message = error_of(shift_kernel(separate_launches=False), arrays)
    assert message == ("race on global buffer 'Y' element (1): thread 0 of block 0 reads what thread 1 "
                       "of block 0 wrote in the same launch")


def tree_sum(barrier_between_steps=True):
    """O[b] = sum of X[8 b : 8 b + 8]: halving steps over shared memory, threads below the
    stride adding, a barrier after each step."""
    X, O = Buffer("X", (24,), "float32"), Buffer("O", (3,), "float32")
    S = Buffer("S", (8,), "float32", "shared")
    b, t = loop_var("b", 3), loop_var("t", 8)
    steps = [seq(IfThenElse(t < stride, store(S, (t,), load(S, t) + load(S, t + stride))),
                 Barrier() if barrier_between_steps else None) for stride in (4, 2, 1)]
    body = seq(store(S, (t,), load(X, b * 8 + t)), Barrier(), *steps, IfThenElse(t == 0, store(O, (b,), load(S, 0))))
    return PrimFunc("tree_sum", (X, O), For(b, 3, "blockIdx.x", Allocate(S, For(t, 8, "threadIdx.x", body))))


def test_tree_reduction_in_shared_memory_matches_numpy():
    x, out = np.arange(24, dtype="float32"), np.empty(3, "float32")
    report = run(tree_sum(), [x, out])
    np.testing.assert_array_equal(out, x.reshape(3, 8).sum(axis=1))
    assert report.launches == (LaunchReport(blocks=3, threads=8, barriers=4),)


def test_tree_reduction_without_barriers_between_steps_races():
    message = error_of(tree_sum(barrier_between_steps=False), [np.arange(24, dtype="float32"), np.empty(3, "float32")])
    assert message == ("race on shared buffer 'S' element (2) in block 0: thread 0 reads what thread 2 wrote "
                       "with no barrier between them")


def test_a_local_buffer_allocated_outside_the_threads_that_write_it_is_refused():
    O = Buffer("O", (4,), "float32")
    acc = Buffer("acc", (1,), "float32", "local")
    b, t = loop_var("b", 1), loop_var("t", 4)
    body = seq(store(acc, (0,), t.astype("float32")), store(O, (t,), load(acc, 0)))
    func = PrimFunc("private", (O,), For(b, 1, "blockIdx.x", Allocate(acc, For(t, 4, "threadIdx.x", body))))
    assert "local buffer 'acc' is written by threads" in error_of(func, [np.empty(4, "float32")])


def test_writing_what_another_thread_wrote_races():
    """O[t] = 1, then O[t + 1 wrapping] = 2: the second store overwrites a neighbour's element."""
    O = Buffer("O", (4,), "float32")
    t = loop_var("t", 4)
    body = seq(store(O, (t,), 1.0), store(O, ((t + 1) % 4,), 2.0))
    message = error_of(PrimFunc("overwrite", (O,), For(t, 4, "threadIdx.x", body)), [np.empty(4, "float32")])
    assert message == ("race on global buffer 'O' element (1): thread 0 of block 0 writes what thread 1 "
                       "of block 0 wrote in the same launch")


def test_vthreads_belong_to_their_thread():
    """Each thread writes two shared elements in a vthread loop and reads them back swapped."""
    O = Buffer("O", (8,), "float32")
    S = Buffer("S", (8,), "float32", "shared")
    t, v, w = loop_var("t", 4), loop_var("v", 2), loop_var("w", 2)
    body = seq(For(v, 2, "vthread", store(S, (t * 2 + v,), (t * 2 + v).astype("float32"))),
               For(w, 2, "vthread", store(O, (t * 2 + w,), load(S, t * 2 + 1 - w))))
    b = loop_var("b", 1)
    func = PrimFunc("swap", (O,), For(b, 1, "blockIdx.x", Allocate(S, For(t, 4, "threadIdx.x", body))))
    out = np.empty(8, "float32")
    run(func, [out])
    np.testing.assert_array_equal(out, [1, 0, 3, 2, 5, 4, 7, 6])


# ---------------------------------------------------------------- bounds, scope, arguments

def copy_kernel(index_of, kind="serial", guard=None):
    """O[i] = X[index_of(i)] over 6 elements, on a CPU loop or on threads."""
    X, O = Buffer("X", (6,), "float32"), Buffer("O", (6,), "float32")
    i = loop_var("i", 6)
    value = load(X, index_of(i)) if guard is None else select(guard(i), load(X, index_of(i)), -1.0)
    return PrimFunc("copy", (X, O), For(i, 6, kind, store(O, (i,), value)))


@pytest.mark.parametrize("kind", ["serial", "threadIdx.x"])
def test_out_of_bounds_load_names_buffer_index_and_shape(kind):
    message = error_of(copy_kernel(lambda i: i + 1, kind), [np.zeros(6, "float32"), np.zeros(6, "float32")])
    assert message.startswith("load from buffer 'X' at index (6) out of bounds of shape (6,)")
    assert ("thread 5" in message) == (kind != "serial")


def test_out_of_bounds_store_names_the_buffer():
    X, O = Buffer("X", (6,), "float32"), Buffer("O", (2, 3), "float32")
    i = loop_var("i", 6)
    func = PrimFunc("scatter", (X, O), For(i, 6, "serial", store(O, (i // 3, i % 3 + 1), load(X, i))))
    message = error_of(func, [np.zeros(6, "float32"), np.zeros((2, 3), "float32")])
    assert message.startswith("store to buffer 'O' at index (0, 3) out of bounds of shape (2, 3)")


@pytest.mark.parametrize("kind", ["serial", "threadIdx.x"])
def test_padding_select_whose_untaken_side_is_out_of_bounds_is_fine(kind):
    x, out = np.arange(6, dtype="float32"), np.empty(6, "float32")
    run(copy_kernel(lambda i: i - 1, kind, guard=lambda i: i >= 1), [x, out])
    np.testing.assert_array_equal(out, [-1, 0, 1, 2, 3, 4])


@pytest.mark.parametrize("kind", ["serial", "threadIdx.x"])
def test_and_or_evaluate_their_right_side_only_where_the_left_does_not_decide(kind):
    """As C's && and ||: X[i - 1] is read only where i >= 1."""
    X, O = Buffer("X", (6,), "float32"), Buffer("O", (6,), "float32")
    i = loop_var("i", 6)
    both = (i >= 1) & (load(X, i - 1) > 1.0)
    either = (i < 1) | (load(X, i - 1) > 1.0)
    func = PrimFunc("logic", (X, O), For(i, 6, kind, store(O, (i,), select(both, 1.0, 0.0) + select(either, 2.0, 0.0))))
    out = np.empty(6, "float32")
    run(func, [np.arange(6, dtype="float32"), out])
    np.testing.assert_array_equal(out, [2, 0, 0, 3, 3, 3])


def test_loop_variable_used_outside_its_loop():
    X = Buffer("X", (6,), "float32")
    i = loop_var("i", 6)
    func = PrimFunc("stray", (X,), seq(For(i, 6, "serial", store(X, (i,), 1.0)), store(X, (i,), 2.0)))
    assert error_of(func, [np.zeros(6, "float32")]) == "loop variable 'i' is used outside its loop"


def test_buffer_neither_parameter_nor_allocated():
    X = Buffer("X", (6,), "float32")
    scratch = Buffer("scratch", (6,), "float32", "local")
    i = loop_var("i", 6)
    func = PrimFunc("stray", (X,), For(i, 6, "serial", store(X, (i,), load(scratch, i))))
    message = error_of(func, [np.zeros(6, "float32")])
    assert message == "buffer 'scratch' is used where it is neither a parameter nor allocated"


@pytest.mark.parametrize("arrays, expected", [
    ([np.zeros(6, "float32")], "kernel 'copy' takes 2 arrays (X, O), got 1"),
    ([np.zeros(6, "float32"), np.zeros(5, "float32")], "parameter 'O': array of shape (5,), expected (6,)"),
    ([np.zeros(6, "float64"), np.zeros(6, "float32")], "parameter 'X': array of dtype float64, expected float32"),
    ([[0.0] * 6, np.zeros(6, "float32")], "parameter 'X': expected a numpy array, got list"),
])
def test_bad_arguments_name_the_parameter(arrays, expected):
    assert error_of(copy_kernel(lambda i: i), arrays) == expected


def test_a_non_contiguous_output_is_written():
    x, out = np.arange(6, dtype="float32"), np.zeros(12, "float32")
    run(copy_kernel(lambda i: i), [x, out[::2]])
    np.testing.assert_array_equal(out[::2], x)


def _allocations(stmt, depth=0, found=None):
    """(buffer name, shape, loop depth) of every Allocate in a statement tree."""
    found = [] if found is None else found
    if isinstance(stmt, Allocate):
        found.append((stmt.buffer.name, stmt.buffer.shape, depth))
    for child in getattr(stmt, "stmts", ()) or ():
        _allocations(child, depth, found)
    body = getattr(stmt, "body", None)
    if body is not None:
        _allocations(body, depth + isinstance(stmt, For), found)
    for branch in (getattr(stmt, "then_body", None), getattr(stmt, "else_body", None)):
        if branch is not None:
            _allocations(branch, depth, found)
    return found


def test_a_packed_panel_made_outside_the_register_tiles_feeds_all_of_them():
    """B copied at the node's j.1 loop is one panel over every tile inside it: the rows of the
    whole reduction and the columns of j.2 x j.3, read by each i.2 x j.2 register tile."""
    task = get_task("GMM", 24, 40, 32)
    i, j, k = ("i", (2, 3, 4)), ("j", (2, 2, 8)), ("rk", (5, 8))
    steps = [fs.schedule.CacheWrite("O", "local"), fs.schedule.CacheRead("B", "local", ("O.local",)),
             fs.schedule.Split("O", "i", i[1]), fs.schedule.Split("O", "j", j[1]),
             fs.schedule.Split("O.local", "rk", k[1]),
             fs.schedule.Reorder("O", ("i.0", "j.0", "i.1", "j.1", "i.2", "j.2")),
             fs.schedule.Reorder("O.local", ("rk.0", "rk.1", "i", "j")),
             fs.schedule.ComputeAt("O.local", "O", "i.1"), fs.schedule.ComputeAt("B.local", "O", "j.0")]
    state = fs.schedule.Schedule(tuple(steps)).apply(analyze(task))
    lowered = lower(task, state)
    inputs = task.random_inputs(0)
    output = np.zeros((24, 32), "float32")
    run(lowered.func, [*inputs, output])
    np.testing.assert_allclose(output, task.evaluate(*inputs)[0], rtol=1e-5, atol=1e-5)
    allocations = {name: (shape, depth) for name, shape, depth in _allocations(lowered.func.body)}
    assert allocations["B_local"] == ((40, 16), 2)        # whole reduction x one j.0 block
    assert allocations["O_local"][1] > allocations["B_local"][1]


def test_a_packed_panel_converts_to_a_blocked_layout_with_its_own_loops_split_and_vectorised():
    """The copy's loops are its own to schedule: B's columns split by the block, the block innermost
    and vectorised, so the panel is filled blocked a vector at a time from B in the caller's layout."""
    task = get_task("GMM", 24, 40, 32)
    steps = [fs.schedule.CacheWrite("O", "local"), fs.schedule.CacheRead("B", "local", ("O.local",)),
             fs.schedule.Split("O", "i", (2, 3, 4)), fs.schedule.Split("O", "j", (2, 2, 8)),
             fs.schedule.Split("O.local", "rk", (5, 8)),
             fs.schedule.Reorder("O", ("i.0", "j.0", "i.1", "j.1", "i.2", "j.2")),
             fs.schedule.Reorder("O.local", ("rk.0", "rk.1", "i", "j")),
             fs.schedule.ComputeAt("O.local", "O", "i.1"), fs.schedule.ComputeAt("B.local", "O", "j.0"),
             fs.schedule.Layout("B.local", 1, 8), fs.schedule.Split("B.local", "B.local.ax1", (4, 8)),
             fs.schedule.Reorder("B.local", ("B.local.ax1.0", "B.local.ax0", "B.local.ax1.1")),
             fs.schedule.Vectorize("B.local", "B.local.ax1.1")]
    lowered = lower(task, fs.schedule.Schedule(tuple(steps)).apply(analyze(task)))
    inputs = task.random_inputs(0)
    output = np.zeros((24, 32), "float32")
    run(lowered.func, [*inputs, output])
    np.testing.assert_allclose(output, task.evaluate(*inputs)[0], rtol=1e-5, atol=1e-5)
    allocations = {name: shape for name, shape, _ in _allocations(lowered.func.body)}
    assert allocations["B_local"] == (40, 2, 8)           # one j.0 block of 16 columns, in blocks of 8
    assert "B_local.B.local.ax1.1" in str(lowered.func) and "# vectorized" in str(lowered.func)


def test_a_panel_made_inside_the_loop_its_reader_runs_at_is_refused():
    from codegen.lower import LoweringError
    task = get_task("GMM", 24, 40, 32)
    steps = [fs.schedule.CacheWrite("O", "local"), fs.schedule.CacheRead("B", "local", ("O.local",)),
             fs.schedule.Split("O", "i", (2, 12)), fs.schedule.ComputeAt("O.local", "O", "i.0"),
             fs.schedule.ComputeAt("B.local", "O", "i.1")]
    state = fs.schedule.Schedule(tuple(steps)).apply(analyze(task))
    with pytest.raises(LoweringError, match="'O.local' is computed at loop 'i.0' of 'O', outside the loop 'i.1'"):
        lower(task, state)
