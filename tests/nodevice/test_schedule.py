"""Schedule primitives as data: what each step does to the loop nests, and what it refuses.

Every refusal is a ScheduleError with a one-line message naming the node, the loop and the
offending value; Schedule.apply prefixes it with "step N (...)". The tests apply schedules
to three small computations:

- GMM 64x32x48: one node "O" with loops i (64), j (48), rk (32, reduce), inputs A, B;
- C2D 1x8x16x16, 8 filters 3x3, padding 1: "pad" (b c h w over I) then "O"
  (b k h w rc rh rw over pad and W);
- a row sum S[i] = sum_j X[i, j] feeding an elementwise output O[i] = 2 * S[i].

The last section holds regression tests for bugs these tests found in schedule.py.
"""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flexsched as fs
from analysis import analyze
from flexsched.registry import get_task
from flexsched.schedule import (
    CACHE_SCOPES, MAX_UNROLL, MAX_VECTOR_LANES, THREAD_AXES, Bind, Buffer, CacheRead, CacheWrite,
    ComputeAt, ComputeInline, Deinterleave, Fuse, Layout, Parallel, Partition, Pipeline, Reorder, Schedule, ScheduleError,
    ScheduleState, Split, Unroll, Vectorize, physical_shape, step_from_dict, step_kinds)


# ---------------------------------------------------------------- fixtures and helpers

@pytest.fixture
def gmm():
    return analyze(get_task("GMM", 64, 32, 48))


@pytest.fixture
def c2d():
    return analyze(get_task("C2D", 1, 8, 16, 16, 8, 3, 1, 1))


@pytest.fixture
def rowsum():
    """Two nodes: a reduction S that an elementwise output O reads."""
    X = fs.placeholder((8, 6), name="X")
    j = fs.reduce_axis(6, "j")
    S = fs.compute((8,), lambda i: fs.sum(X[i, j], axis=j), name="S")
    O = fs.compute((8,), lambda i: S[i] * 2.0, name="O")
    return analyze(O)


def apply(info, *steps):
    return Schedule(tuple(steps)).apply(info)


def refusal(info, *steps):
    """The one-line message of the ScheduleError that applying `steps` to `info` raises."""
    with pytest.raises(ScheduleError) as caught:
        apply(info, *steps)
    message = str(caught.value)
    assert "\n" not in message
    return message


def loops(state, node):
    return [(loop.name, loop.extent) for loop in state.stages[node].loops]


def loop(state, node, name):
    return next(l for l in state.stages[node].loops if l.name == name)


# ---------------------------------------------------------------- the starting state

def test_initial_state_mirrors_the_analysis(c2d):
    state = ScheduleState(c2d)
    assert list(state.stages) == ["pad", "O"]
    assert loops(state, "pad") == [("b", 1), ("c", 8), ("h", 18), ("w", 18)]
    assert [l.kind for l in state.stages["O"].loops] == ["spatial"] * 4 + ["reduce"] * 3
    assert state.stages["O"].reads == ["pad", "W"] and state.stages["pad"].consumers == ["O"]
    assert state.stages["O"].is_output and not state.stages["pad"].is_output
    assert state.steps == []


def test_schedule_apply_prefixes_the_step_number(gmm):
    message = refusal(gmm, Split("O", "j", (6, 8)), Split("O", "i", (2, 30)))
    assert message.startswith("step 2 (split on node 'O', loop 'i': ")
    assert message.endswith(")")


def test_applying_a_schedule_leaves_the_analysis_untouched(c2d):
    schedule = Schedule((ComputeInline("pad"), CacheWrite("O", "local"), Split("O", "h", (4, 4))))
    assert schedule.apply(c2d).describe() == schedule.apply(c2d).describe()
    assert ScheduleState(c2d).stages["O"].reads == ["pad", "W"]


def test_schedules_concatenate(gmm):
    first = Schedule((Split("O", "i", (8, 8)),))
    joined = first + Schedule((Parallel("O", "i.0"),)) + [Unroll("O", "rk")]
    assert [step.kind for step in joined.steps] == ["split", "parallel", "unroll"]
    assert joined.apply(gmm).steps == list(joined.steps)


# ---------------------------------------------------------------- split

def test_split_replaces_the_loop_in_place_with_numbered_children(gmm):
    state = apply(gmm, Split("O", "j", (2, 4, 6)))
    assert loops(state, "O") == [("i", 64), ("j.0", 2), ("j.1", 4), ("j.2", 6), ("rk", 32)]
    assert not any(l.guarded for l in state.stages["O"].loops)
    assert state.stages["O"].relations == [("split", "j", ("j.0", "j.1", "j.2"), (2, 4, 6))]


def test_split_of_a_reduce_loop_keeps_its_kind(gmm):
    state = apply(gmm, Split("O", "rk", (4, 8)))
    assert [(l.name, l.kind) for l in state.stages["O"].loops][-2:] == [("rk.0", "reduce"), ("rk.1", "reduce")]


def test_split_that_does_not_divide_is_guarded(gmm):
    state = apply(gmm, Split("O", "i", (3, 30)))  # ceil(64 / 30) = 3
    assert loops(state, "O")[:2] == [("i.0", 3), ("i.1", 30)]
    assert loop(state, "O", "i.0").guarded and loop(state, "O", "i.1").guarded
    assert not loop(state, "O", "j").guarded


def test_children_of_a_guarded_loop_stay_guarded(gmm):
    state = apply(gmm, Split("O", "i", (3, 30)), Split("O", "i.1", (5, 6)))  # 5 * 6 = 30: exact
    assert loop(state, "O", "i.1.0").guarded and loop(state, "O", "i.1.1").guarded


@pytest.mark.parametrize("factors", [(2, 30), (4, 30), (1, 8)])
def test_split_outer_factor_must_be_the_ceiling(gmm, factors):
    inner = factors[1]
    message = refusal(gmm, Split("O", "i", factors))
    assert f"factors {list(factors)}" in message and "extent 64" in message
    assert f"ceil(64/{inner}) = {-(-64 // inner)}" in message


def test_split_names_the_required_outer_factor(gmm):
    assert "ceil(64/30) = 3" in refusal(gmm, Split("O", "i", (2, 30)))


@pytest.mark.parametrize("factors", [(64,), (), (0, 8), (8, 0), (8, -8), (-1, 8), (8, 8.0), (2, "32"),
                                     (True, 64)])
def test_split_refuses_bad_factors(gmm, factors):
    message = refusal(gmm, Split("O", "i", factors))
    assert "node 'O'" in message and "loop 'i'" in message
    assert "two or more positive integers" in message and f"got {list(factors)}" in message


def test_split_of_an_unknown_loop_lists_the_loops(gmm):
    message = refusal(gmm, Split("O", "x", (8, 8)))
    assert "node 'O' has no loop 'x'" in message and "loops: i, j, rk" in message


def test_split_of_an_unknown_node_lists_the_nodes(c2d):
    message = refusal(c2d, Split("P", "h", (2, 8)))
    assert "no node 'P'" in message and "nodes: pad, O" in message


def test_split_of_an_annotated_loop_is_refused(gmm):
    message = refusal(gmm, Unroll("O", "rk"), Split("O", "rk", (4, 8)))
    assert "loop 'rk' of node 'O' is already 'unroll'" in message


@settings(deadline=None, max_examples=100)
@given(extent=st.integers(1, 500), inner=st.lists(st.integers(1, 40), min_size=1, max_size=3))
def test_split_with_the_ceiling_outer_factor_is_always_legal(extent, inner):
    X = fs.placeholder((extent,), name="X")
    info = analyze(fs.compute((extent,), lambda i: X[i] + 1.0, name="O"))
    outer = -(-extent // math.prod(inner))
    state = apply(info, Split("O", "i", (outer, *inner)))
    assert [l.extent for l in state.stages["O"].loops] == [outer, *inner]
    assert all(l.guarded == (outer * math.prod(inner) != extent) for l in state.stages["O"].loops)


# ---------------------------------------------------------------- reorder

def test_reorder_of_a_subset_keeps_the_other_loops_in_place(gmm):
    state = apply(gmm, Split("O", "i", (8, 8)), Reorder("O", ("j", "i.0")))
    assert [name for name, _ in loops(state, "O")] == ["j", "i.1", "i.0", "rk"]


def test_reorder_of_all_loops(gmm):
    state = apply(gmm, Reorder("O", ("rk", "j", "i")))
    assert loops(state, "O") == [("rk", 32), ("j", 48), ("i", 64)]


def test_reorder_refuses_duplicates(gmm):
    message = refusal(gmm, Reorder("O", ("j", "i", "j")))
    assert "node 'O'" in message and "listed twice" in message and "['j', 'i', 'j']" in message


def test_reorder_refuses_an_unknown_loop(gmm):
    assert "node 'O' has no loop 'k'; loops: i, j, rk" in refusal(gmm, Reorder("O", ("k", "i")))


def test_reorder_cannot_move_a_vectorized_loop_from_innermost(gmm):
    message = refusal(gmm, Reorder("O", ("i", "rk", "j")), Vectorize("O", "j"), Reorder("O", ("j", "rk")))
    assert message.startswith("step 3 (")
    assert "vectorized loop 'j' of node 'O' must stay innermost" in message


def test_reorder_around_a_vectorized_loop_is_fine(gmm):
    state = apply(gmm, Reorder("O", ("i", "rk", "j")), Vectorize("O", "j"), Reorder("O", ("rk", "i")))
    assert [name for name, _ in loops(state, "O")] == ["rk", "i", "j"]


def test_reorder_cannot_put_a_thread_axis_outside_a_block_axis(gmm):
    message = refusal(gmm, Bind("O", "i", "blockIdx.x"), Bind("O", "j", "threadIdx.x"), Reorder("O", ("j", "i")))
    assert "binds loops out of order" in message


# ---------------------------------------------------------------- fuse

def test_fuse_adjacent_spatial_loops(gmm):
    state = apply(gmm, Fuse("O", ("i", "j")))
    assert loops(state, "O") == [("i+j", 64 * 48), ("rk", 32)]
    assert state.stages["O"].relations == [("fuse", ("i", "j"), "i+j")]


def test_fuse_adjacent_reduce_loops(c2d):
    state = apply(c2d, Fuse("O", ("rh", "rw")))
    assert loops(state, "O")[-1] == ("rh+rw", 9) and state.stages["O"].loops[-1].kind == "reduce"


def test_fuse_of_split_children_restores_the_extent_and_keeps_the_guard(gmm):
    state = apply(gmm, Split("O", "i", (3, 30)), Fuse("O", ("i.0", "i.1")))
    assert loops(state, "O")[0] == ("i.0+i.1", 90) and loop(state, "O", "i.0+i.1").guarded


@pytest.mark.parametrize("order", [("i", "rk"), ("j", "i")])
def test_fuse_refuses_loops_not_adjacent_in_order(gmm, order):
    message = refusal(gmm, Fuse("O", order))
    assert f"loops {list(order)} of node 'O' are not adjacent" in message


def test_fuse_refuses_spatial_with_reduce(gmm):
    message = refusal(gmm, Fuse("O", ("j", "rk")))
    assert "cannot fuse spatial and reduce loops ['j', 'rk'] of node 'O'" in message


@pytest.mark.parametrize("names", [("i",), ()])
def test_fuse_needs_two_loops(gmm, names):
    assert f"at least two loops, got {list(names)}" in refusal(gmm, Fuse("O", names))


def test_fuse_refuses_an_annotated_loop(gmm):
    assert "loop 'j' of node 'O' is already 'parallel'" in refusal(gmm, Parallel("O", "j"), Fuse("O", ("i", "j")))


# ---------------------------------------------------------------- unroll, vectorize, parallel

def test_unroll_up_to_the_limit(gmm):
    # rk, i, j -> rk, i+j (3072) -> rk, i+j.0 (3), i+j.1 (1024)
    state = apply(gmm, Reorder("O", ("rk", "i", "j")), Fuse("O", ("i", "j")),
                  Split("O", "i+j", (3, MAX_UNROLL)), Unroll("O", "i+j.1"), Unroll("O", "rk"))
    assert loop(state, "O", "i+j.1").annotation == "unroll" and loop(state, "O", "rk").annotation == "unroll"


def test_unroll_over_the_limit_is_refused(gmm):
    message = refusal(gmm, Fuse("O", ("i", "j")), Unroll("O", "i+j"))
    assert "loop 'i+j'" in message and f"extent 3072 is over the unroll limit {MAX_UNROLL}" in message


def test_vectorize_the_innermost_spatial_loop(gmm):
    state = apply(gmm, Reorder("O", ("rk", "j", "i")), Vectorize("O", "i"))  # 64 lanes: the limit
    assert MAX_VECTOR_LANES == 64 and loop(state, "O", "i").annotation == "vectorize"


def test_vectorize_refuses_a_loop_that_is_not_innermost(gmm):
    message = refusal(gmm, Vectorize("O", "j"))
    assert "only the innermost loop of node 'O' can be vectorized, not 'j'" in message


def test_vectorize_refuses_a_reduce_loop(gmm):
    assert "reduce loop 'rk' cannot be vectorized" in refusal(gmm, Vectorize("O", "rk"))


def test_vectorize_refuses_more_lanes_than_the_limit(gmm):
    message = refusal(gmm, Reorder("O", ("rk", "i", "j")), Fuse("O", ("i", "j")), Vectorize("O", "i+j"))
    assert "loop 'i+j'" in message and f"extent 3072 is over {MAX_VECTOR_LANES} lanes" in message


def test_parallel_a_spatial_loop(gmm):
    assert loop(apply(gmm, Parallel("O", "i")), "O", "i").annotation == "parallel"


def test_parallel_refuses_a_reduce_loop(gmm):
    assert "reduce loop 'rk' cannot run in parallel" in refusal(gmm, Parallel("O", "rk"))


def test_parallel_refuses_a_second_parallel_loop(gmm):
    message = refusal(gmm, Parallel("O", "i"), Parallel("O", "j"))
    assert "loop 'j'" in message and "node 'O' already has a parallel loop" in message


def test_a_loop_takes_one_annotation(gmm):
    assert "loop 'i' of node 'O' is already 'parallel'" in refusal(gmm, Parallel("O", "i"), Unroll("O", "i"))


# ---------------------------------------------------------------- bind

def test_bind_block_vthread_thread_in_order(gmm):
    state = apply(gmm, Split("O", "i", (4, 4, 4)), Bind("O", "i.0", "blockIdx.x"),
                  Bind("O", "i.1", "vthread"), Bind("O", "i.2", "threadIdx.y"), Bind("O", "j", "threadIdx.x"))
    assert [l.annotation for l in state.stages["O"].loops] == [
        "blockIdx.x", "vthread", "threadIdx.y", "threadIdx.x", ""]


def test_bind_refuses_an_unknown_axis_listing_the_valid_ones(gmm):
    message = refusal(gmm, Bind("O", "i", "threadIdx.w"))
    assert "loop 'i'" in message and "unknown thread axis 'threadIdx.w'" in message
    assert f"choose one of {', '.join(THREAD_AXES)}" in message


def test_bind_refuses_a_reduce_loop(gmm):
    assert "reduce loop 'rk' cannot be bound to 'threadIdx.x'" in refusal(gmm, Bind("O", "rk", "threadIdx.x"))


def test_bind_refuses_the_same_thread_axis_twice(gmm):
    message = refusal(gmm, Bind("O", "i", "threadIdx.x"), Bind("O", "j", "threadIdx.x"))
    assert "loop 'j'" in message and "node 'O' already binds 'threadIdx.x'" in message


def test_bind_refuses_a_block_axis_inside_a_thread_axis(gmm):
    message = refusal(gmm, Bind("O", "i", "threadIdx.x"), Bind("O", "j", "blockIdx.x"))
    assert "loop 'j'" in message and "node 'O' binds loops out of order" in message


def test_bind_refuses_a_vthread_outside_a_block_axis(gmm):
    assert "out of order" in refusal(gmm, Bind("O", "i", "vthread"), Bind("O", "j", "blockIdx.y"))


def test_vthread_may_be_bound_more_than_once(gmm):
    state = apply(gmm, Split("O", "i", (8, 8)), Bind("O", "i.0", "vthread"), Bind("O", "i.1", "vthread"))
    assert [l.annotation for l in state.stages["O"].loops[:2]] == ["vthread", "vthread"]


# ---------------------------------------------------------------- compute_inline

def test_inline_pad_makes_o_read_the_input(c2d):
    state = apply(c2d, ComputeInline("pad"))
    assert state.stages["pad"].attach == "inline"
    assert state.stages["O"].reads == ["I", "W"]
    assert "pad (inlined, global):" in state.describe()


def test_inline_refuses_an_output(gmm):
    assert "node 'O' is an output and must be stored" in refusal(gmm, ComputeInline("O"))


def test_inline_refuses_a_node_with_reduce_loops(rowsum):
    assert [node.name for node in rowsum.nodes] == ["S", "O"]
    assert "node 'S' has reduce loops and cannot be inlined" in refusal(rowsum, ComputeInline("S"))


def test_inline_refuses_a_scheduled_node(c2d):
    message = refusal(c2d, Split("pad", "h", (2, 9)), ComputeInline("pad"))
    assert message.startswith("step 2 (compute_inline on node 'pad'") and "already scheduled" in message


def test_inline_refuses_an_annotated_node(c2d):
    assert "already scheduled" in refusal(c2d, Parallel("pad", "c"), ComputeInline("pad"))


def test_an_inlined_node_cannot_be_scheduled_again(c2d):
    message = refusal(c2d, ComputeInline("pad"), ComputeAt("pad", "O", "h"))
    assert message.startswith("step 2 (compute_at on node 'pad', loop 'h'")
    assert "node 'pad' is inlined and has no loops of its own" in message
    assert "is inlined" in refusal(c2d, ComputeInline("pad"), Split("pad", "h", (2, 9)))
    assert "is inlined" in refusal(c2d, ComputeInline("pad"), ComputeInline("pad"))


def test_inline_through_a_chain_rewires_producers_and_consumers():
    info = analyze(get_task("T2D", 1, 4, 5, 5, 3, 3, 2, 1))  # expand -> pad -> O
    state = apply(info, ComputeInline("pad"))
    assert state.stages["O"].reads[0] == "expand" and state.stages["expand"].consumers == ["O"]
    state = apply(info, ComputeInline("expand"), ComputeInline("pad"))
    assert state.stages["O"].reads == ["I", "W"]


# ---------------------------------------------------------------- compute_at

def test_compute_at_pad_inside_a_loop_of_o(c2d):
    state = apply(c2d, ComputeAt("pad", "O", "w"))
    assert state.stages["pad"].attach == "at" and state.stages["pad"].attach_to == ("O", "w")
    assert state.describe().startswith("pad (at O.w, global):")


def test_compute_at_refuses_an_output(gmm):
    assert "node 'O' is an output and is computed at root" in refusal(gmm, ComputeAt("O", "O", "i"))


def test_compute_at_refuses_a_consumer_that_does_not_read_the_node(c2d):
    message = refusal(c2d, CacheRead("W", "shared", ("O",)), ComputeAt("W.shared", "pad", "h"))
    assert "node 'pad' does not read 'W.shared'" in message


def test_compute_at_a_loop_of_a_stage_enclosing_the_reader(gmm):
    """A copy read by a register tile can be made at a loop of the node the tile is computed in."""
    state = apply(gmm, CacheWrite("O", "local"), CacheRead("B", "local", ("O.local",)),
                  ComputeAt("O.local", "O", "j"), ComputeAt("B.local", "O", "i"))
    assert state.stages["B.local"].attach_to == ("O", "i")


def test_compute_at_refuses_a_stage_that_encloses_no_reader(gmm):
    message = refusal(gmm, CacheWrite("O", "local"), CacheRead("B", "local", ("O.local",)),
                      ComputeAt("B.local", "O", "i"))
    assert "node 'O' does not read 'B.local' and encloses no stage that does" in message


def test_compute_at_refuses_once_a_write_cache_does_the_reading(c2d):
    message = refusal(c2d, CacheWrite("O", "local"), ComputeAt("pad", "O", "h"))
    assert "node 'O' does not read 'pad'" in message


def test_compute_at_refuses_an_unknown_loop_of_the_consumer(c2d):
    message = refusal(c2d, ComputeAt("pad", "O", "c"))
    assert "node 'O' has no loop 'c'; loops: b, k, h, w, rc, rh, rw" in message


def test_compute_at_refuses_an_unknown_consumer(c2d):
    assert "no node 'Q'; nodes: pad, O" in refusal(c2d, ComputeAt("pad", "Q", "h"))


# ---------------------------------------------------------------- cache_read and cache_write

def test_cache_read_creates_a_stage_per_dimension_and_redirects_the_reader(c2d):
    state = apply(c2d, CacheRead("W", "shared", ("O",)))
    cache = state.stages["W.shared"]
    assert loops(state, "W.shared") == [("W.shared.ax0", 8), ("W.shared.ax1", 8),
                                        ("W.shared.ax2", 3), ("W.shared.ax3", 3)]
    assert all(l.kind == "spatial" for l in cache.loops)
    assert cache.scope == "shared" and cache.cache_of == "W" and cache.reads == ["W"]
    assert cache.consumers == ["O"] and not cache.is_output
    assert state.stages["O"].reads == ["pad", "W.shared"]
    assert "W.shared (root, shared):" in state.describe()


def test_cache_read_of_an_intermediate_rewires_its_producer(c2d):
    state = apply(c2d, CacheRead("pad", "local", ("O",)))
    assert state.stages["O"].reads == ["pad.local", "W"]
    assert state.stages["pad"].consumers == ["pad.local"]


def test_cache_read_refuses_an_unknown_scope(c2d):
    message = refusal(c2d, CacheRead("W", "global", ("O",)))
    assert "cache_read on node 'W'" in message and "unknown scope 'global'" in message
    assert f"choose one of {', '.join(CACHE_SCOPES)}" in message


def test_cache_read_refuses_a_reader_that_does_not_read_the_tensor(c2d):
    message = refusal(c2d, CacheRead("W", "shared", ("pad",)))
    assert "node 'pad' does not read 'W'" in message


def test_cache_read_refuses_a_second_cache_of_the_same_tensor_for_the_same_reader(c2d):
    message = refusal(c2d, CacheRead("W", "shared", ("O",)), CacheRead("W", "shared", ("O",)))
    assert message.startswith("step 2 (cache_read on node 'W'") and "node 'O' does not read 'W'" in message


def test_a_second_cache_of_the_same_tensor_and_scope_gets_a_numbered_name():
    X = fs.placeholder((4, 4), name="X")
    A = fs.compute((4, 4), lambda i, j: X[i, j] + 1.0, name="A")
    B = fs.compute((4, 4), lambda i, j: A[i, j] * X[j, i], name="B")
    state = apply(analyze(B), CacheRead("X", "shared", ("A",)), CacheRead("X", "shared", ("B",)))
    assert state.stages["A"].reads == ["X.shared"] and state.stages["B"].reads == ["A", "X.shared1"]
    assert state.stages["X.shared1"].cache_of == "X" and state.stages["X.shared1"].consumers == ["B"]


def test_cache_read_refuses_an_unknown_tensor_and_no_readers(c2d):
    assert "no tensor 'V'" in refusal(c2d, CacheRead("V", "shared", ("O",)))
    assert "at least one reader of 'W'" in refusal(c2d, CacheRead("W", "shared", ()))


def test_cache_write_splits_compute_from_copy_out(c2d):
    state = apply(c2d, CacheWrite("O", "local"))
    assert list(state.stages) == ["pad", "O.local", "O"]
    cache, out = state.stages["O.local"], state.stages["O"]
    assert [l.name for l in cache.loops] == ["b", "k", "h", "w", "rc", "rh", "rw"]
    assert cache.reads == ["pad", "W"] and cache.consumers == ["O"]
    assert cache.scope == "local" and cache.cache_of == "O" and not cache.is_output
    assert [l.name for l in out.loops] == ["b", "k", "h", "w"] and not out.has_reduce
    assert out.reads == ["O.local"] and out.is_output
    assert state.stages["pad"].consumers == ["O.local"]


def test_cache_write_refuses_a_scheduled_node(gmm):
    message = refusal(gmm, Split("O", "i", (8, 8)), CacheWrite("O", "local"))
    assert "cache_write on node 'O' must come before its loops are scheduled" in message


def test_cache_write_refuses_an_unknown_scope_and_a_second_cache(gmm):
    assert "unknown scope 'register'" in refusal(gmm, CacheWrite("O", "register"))
    assert "node 'O' already has a local cache" in refusal(gmm, CacheWrite("O", "local"), CacheWrite("O", "local"))


def test_write_cache_and_read_cache_attach_inside_each_other(c2d):
    state = apply(c2d, CacheWrite("O", "local"), CacheRead("W", "shared", ("O.local",)),
                  ComputeAt("O.local", "O", "w"), ComputeAt("W.shared", "O.local", "rc"))
    assert state.stages["O.local"].attach_to == ("O", "w")
    assert state.stages["W.shared"].attach_to == ("O.local", "rc")
    assert state.stages["O.local"].reads == ["pad", "W.shared"]
    assert state.stages["W.shared"].consumers == ["O.local"]


def test_cache_write_after_cache_read_moves_the_reading_to_the_cache(c2d):
    state = apply(c2d, CacheRead("W", "shared", ("O",)), CacheWrite("O", "local"))
    assert state.stages["O.local"].reads == ["pad", "W.shared"]
    assert state.stages["W.shared"].consumers == ["O.local"]


# ---------------------------------------------------------------- FPGA steps

def test_buffer_pipeline_and_partition_record_their_choices(c2d):
    state = apply(c2d, Buffer("O", "W", "k"), Buffer("O", "O", "h"), Pipeline("O", "w", 2),
                  Partition("O", "W", 1, 4), Partition("O", "pad", 3, 18))
    stage = state.stages["O"]
    assert stage.buffers == [("W", "k"), ("O", "h")]
    assert stage.pipeline_ii == {"w": 2} and loop(state, "O", "w").annotation == "pipeline"
    assert stage.partitions == [("W", 1, 4), ("pad", 3, 18)]


def test_buffer_refuses_a_tensor_the_node_does_not_access(c2d):
    message = refusal(c2d, Buffer("O", "I", "h"))
    assert "buffer on node 'O', loop 'h'" in message and "node 'O' does not access 'I'" in message


def test_buffer_refuses_an_unknown_loop(c2d):
    assert "node 'O' has no loop 'x'" in refusal(c2d, Buffer("O", "W", "x"))


def test_partition_refuses_a_dimension_out_of_range(c2d):
    assert "tensor 'W' has no dimension 4" in refusal(c2d, Partition("O", "W", 4, 2))
    assert "tensor 'W' has no dimension -1" in refusal(c2d, Partition("O", "W", -1, 2))


@pytest.mark.parametrize("factor", [9, 0])
def test_partition_refuses_a_factor_outside_the_extent(c2d, factor):
    message = refusal(c2d, Partition("O", "W", 1, factor))
    assert f"factor {factor} for dimension 1 of 'W' must lie in 1..8" in message


def test_partition_refuses_a_tensor_the_node_does_not_access(c2d):
    assert "node 'O' does not access 'I'" in refusal(c2d, Partition("O", "I", 0, 1))


@pytest.mark.parametrize("ii", [0, -1, 1.5])
def test_pipeline_refuses_a_non_positive_initiation_interval(gmm, ii):
    message = refusal(gmm, Pipeline("O", "j", ii))
    assert "pipeline on node 'O', loop 'j'" in message
    assert f"initiation_interval must be a positive integer, got {ii!r}" in message


# ---------------------------------------------------------------- JSON

def every_kind_schedule():
    """A legal C2D schedule with at least one step of every kind."""
    return Schedule((
        ComputeInline("pad"),
        CacheRead("W", "shared", ("O",)),
        CacheWrite("O", "local"),
        Split("O", "h", (4, 4)),
        Split("O", "w", (3, 6)),                       # guarded: 18 > 16
        Reorder("O", ("h.0", "w.0", "h.1")),           # b k h.0 w.0 h.1 w.1
        Fuse("O", ("b", "k")),
        Bind("O", "b+k", "blockIdx.x"),
        Bind("O", "h.0", "vthread"),
        Bind("O", "w.0", "vthread"),
        Bind("O", "h.1", "threadIdx.x"),
        Vectorize("O", "w.1"),
        ComputeAt("O.local", "O", "h.1"),
        ComputeAt("W.shared", "O.local", "rc"),
        Unroll("O.local", "rw"),
        Parallel("O.local", "k"),
        Pipeline("O.local", "rh", 2),
        Buffer("O.local", "W.shared", "rc"),
        Partition("O.local", "W.shared", 1, 4),
        Layout("W", 1, 4),
        Deinterleave("O.local", 3, 2),
    ))


def test_the_long_schedule_uses_every_step_kind():
    assert {step.kind for step in every_kind_schedule().steps} == set(step_kinds())


def test_json_round_trip_is_exact(c2d):
    schedule = every_kind_schedule()
    text = schedule.to_json()
    assert [item["kind"] for item in json.loads(text)] == [step.kind for step in schedule.steps]
    again = Schedule.from_json(text)
    assert again == schedule and again.to_json() == text
    assert again.apply(c2d).describe() == schedule.apply(c2d).describe()


def test_the_long_schedule_describes_every_annotation(c2d):
    text = every_kind_schedule().apply(c2d).describe()
    assert "O.local (at O.h.1, local):" in text and "W.shared (at O.local.rc, shared):" in text
    for tag in ("[blockIdx.x]", "[vthread, guarded]", "[threadIdx.x]", "[vectorize, guarded]",
                "[unroll]", "[parallel]", "[pipeline]"):
        assert tag in text


def test_step_dicts_round_trip_one_by_one():
    for step in every_kind_schedule().steps:
        data = step.to_dict()
        assert json.loads(json.dumps(data)) == data
        assert step_from_dict(data) == step


def test_step_from_dict_refuses_an_unknown_kind_listing_the_known_ones():
    with pytest.raises(ScheduleError) as caught:
        step_from_dict({"kind": "tile", "node": "O"})
    message = str(caught.value)
    assert "unknown schedule step kind 'tile'" in message and f"known: {', '.join(step_kinds())}" in message
    with pytest.raises(ScheduleError, match="unknown schedule step kind None"):
        step_from_dict({"node": "O"})


def test_step_from_dict_refuses_unknown_fields_by_name():
    data = {"kind": "split", "node": "O", "loop": "i", "factors": [8, 8], "colour": "red", "axis": "x"}
    with pytest.raises(ScheduleError, match=r"step 'split': unknown field\(s\) axis, colour"):
        step_from_dict(data)


def test_from_json_refuses_an_unknown_kind():
    with pytest.raises(ScheduleError, match="unknown schedule step kind 'swizzle'"):
        Schedule.from_json('[{"kind": "split", "node": "O", "loop": "i", "factors": [8, 8]}, {"kind": "swizzle"}]')


# ---------------------------------------------------------------- describe

def test_describe_shows_annotations_and_guards(gmm):
    state = apply(gmm, Split("O", "i", (3, 30)), Parallel("O", "i.0"), Reorder("O", ("rk", "j")),
                  Vectorize("O", "j"), Unroll("O", "rk"))
    assert state.describe() == "\n".join([
        "O (root, global):",
        "  for i.0 in 0..3  [parallel, guarded]",
        "    for i.1 in 0..30  [guarded]",
        "      for rk in 0..32  [unroll]",
        "        for j in 0..48  [vectorize]",
    ])


def test_describe_of_an_unscheduled_computation(c2d):
    text = ScheduleState(c2d).describe()
    assert text.splitlines()[:2] == ["pad (root, global):", "  for b in 0..1"]
    assert "[" not in text


# ---------------------------------------------------------------- bugs found in schedule.py

def dangling_attachments(state):
    """(stage, consumer, loop) for every stage computed 'at' a loop that is not in the consumer's nest."""
    found = []
    for stage in state.stages.values():
        if stage.attach != "at":
            continue
        consumer, name = stage.attach_to
        target = state.stages.get(consumer)
        if target is None or target.attach == "inline" or name not in {l.name for l in target.loops}:
            found.append((stage.name, consumer, name))
    return found


def test_bug_compute_at_of_a_read_cache_into_its_own_source(c2d):
    message = refusal(c2d, CacheRead("pad", "shared", ("O",)), ComputeAt("pad.shared", "pad", "h"))
    assert "node 'pad' does not read 'pad.shared'" in message


def test_bug_inline_leaves_an_attached_stage_dangling(c2d):
    steps = (CacheRead("I", "shared", ("pad",)), ComputeAt("I.shared", "pad", "h"), ComputeInline("pad"))
    try:
        state = apply(c2d, *steps)
    except ScheduleError:
        return  # refusing the inline is a fix too
    assert dangling_attachments(state) == []


def test_bug_cache_write_leaves_a_stage_attached_at_a_moved_loop(c2d):
    try:
        state = apply(c2d, ComputeAt("pad", "O", "rc"), CacheWrite("O", "local"))
    except ScheduleError:
        return  # refusing the cache_write is a fix too
    assert dangling_attachments(state) == []


@pytest.mark.parametrize("steps, refused", [
    ((Bind("O", "i", "threadIdx.x"),), Bind("O", "j", "blockIdx.x")),
    ((Reorder("O", ("i", "rk", "j")), Vectorize("O", "j")), Reorder("O", ("j", "rk"))),
])
def test_bug_a_refused_step_changes_the_state(gmm, steps, refused):
    state = ScheduleState(gmm)
    for step in steps:
        state.apply(step)
    before = state.describe()
    with pytest.raises(ScheduleError):
        state.apply(refused)
    assert state.describe() == before and len(state.steps) == len(steps)


def test_a_loop_that_a_stage_is_computed_at_cannot_be_split_or_fused(c2d):
    message = refusal(c2d, ComputeAt("pad", "O", "h"), Split("O", "h", (4, 4)))
    assert "'pad' is computed at loop 'h'" in message and "node 'O'" in message
    message = refusal(c2d, ComputeAt("pad", "O", "h"), Fuse("O", ("k", "h")))
    assert "'pad' is computed at loop 'h'" in message


def test_step_from_dict_names_missing_fields():
    with pytest.raises(ScheduleError, match="step 'split': missing field\\(s\\) factors"):
        step_from_dict({"kind": "split", "node": "O", "loop": "i"})


def test_booleans_are_not_counts(c2d):
    assert "factor True" in refusal(c2d, Partition("O", "W", 0, True))
    assert "initiation_interval" in refusal(c2d, Pipeline("O", "w", True))


# ---------------------------------------------------------------- layouts

def test_layout_blocks_one_dimension_and_records_the_order(c2d):
    state = apply(c2d, Layout("W", 1, 4), Layout("W", 0, 2, False))
    assert [(b.dim, b.block) for b in state.layouts["W"]] == [(1, 4), (0, 2)]
    assert physical_shape((8, 8, 3, 3), state.layouts["W"]) == (4, 2, 3, 3, 4, 2)   # KCRS[4c][2k]


@pytest.mark.parametrize("step, expected", [
    (Layout("X", 0, 2), "no tensor 'X'"),
    (Layout("W", 4, 2), "tensor 'W' has no dimension 4"),
    (Layout("W", 1, 3), "block 3 must be 2 or more and divide dimension 1 of 'W' (extent 8)"),
    (Layout("W", 1, 1), "block 1 must be 2 or more"),
    (Layout("pad", 1, 2, True), "only an input or output is passed at the interface; 'pad' is internal"),
])
def test_layout_refuses_what_does_not_fit(c2d, step, expected):
    assert expected in refusal(c2d, step)


def test_layout_refuses_a_dimension_twice_and_mixed_interfaces(c2d):
    assert "dimension 1 of 'W' is already blocked" in refusal(c2d, Layout("W", 1, 2), Layout("W", 1, 4))
    assert "all its blockings must agree" in refusal(c2d, Layout("W", 1, 2), Layout("W", 0, 2, True))


def test_layout_refuses_an_inlined_node(c2d):
    assert "node 'pad' is inlined and is never stored" in refusal(c2d, ComputeInline("pad"), Layout("pad", 1, 2))
