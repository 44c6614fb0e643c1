"""Generated schedule spaces: every point is a legal schedule, moves stay inside, sizes are
exact, capability limits hold, and nothing depends on the operator library."""

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flexsched as fs
from analysis import analyze
from flexsched.registry import get_task
from flexsched.schedule import ScheduleError
from flexsched.target import get_target
from space import Config, Space, SpaceError, generate
from space.footprint import reads_footprint
from space.knobs import GUARD_SLACK_PERCENT

TARGETS = ("llvm", "cuda", "fpga")
small = st.integers(1, 9)
channels = st.integers(1, 6)

# Small argument strategies per library operator (kernel sizes, strides and padding kept legal).
OPERATOR_ARGS = {
    "GMV": st.tuples(st.integers(1, 50), st.integers(1, 50)),
    "GMM": st.tuples(st.integers(1, 40), st.integers(1, 40), st.integers(1, 40)),
    "BIL": st.tuples(small, small, small, small),
    "C1D": st.tuples(st.just(1), channels, st.integers(5, 30), channels, st.integers(1, 3), st.integers(1, 2),
                     st.integers(0, 1)),
    "T1D": st.tuples(st.just(1), channels, st.integers(2, 12), channels, st.integers(2, 3), st.integers(1, 2),
                     st.integers(0, 1)),
    "C2D": st.tuples(st.just(1), channels, st.integers(5, 14), st.integers(5, 14), channels, st.integers(1, 3),
                     st.integers(1, 2), st.integers(0, 1)),
    "T2D": st.tuples(st.just(1), channels, st.integers(2, 7), st.integers(2, 7), channels, st.integers(2, 3),
                     st.integers(1, 2), st.integers(0, 1)),
    "C3D": st.tuples(st.just(1), channels, st.integers(3, 6), st.integers(3, 6), st.integers(3, 6), channels,
                     st.integers(1, 3), st.just(1), st.integers(0, 1)),
    "T3D": st.tuples(st.just(1), channels, st.integers(2, 4), st.integers(2, 4), st.integers(2, 4), channels,
                     st.integers(2, 3), st.integers(1, 2), st.integers(0, 1)),
    "GRP": st.tuples(st.just(1), st.sampled_from([4, 8]), st.integers(5, 10), st.integers(5, 10),
                     st.sampled_from([4, 8]), st.integers(1, 3), st.integers(1, 2), st.integers(0, 1),
                     st.sampled_from([1, 2, 4])),
    "DEP": st.tuples(st.just(1), channels, st.integers(5, 10), st.integers(5, 10), st.integers(1, 3),
                     st.integers(1, 3), st.integers(1, 2), st.integers(0, 1)),
    "DIL": st.tuples(st.just(1), channels, st.integers(7, 12), st.integers(7, 12), channels, st.integers(1, 3),
                     st.integers(1, 2), st.integers(0, 1), st.integers(1, 2)),
    "BCM": st.tuples(st.integers(1, 8), st.integers(1, 8), st.sampled_from([1, 2, 4])).map(
        lambda a: (a[0] * a[2], a[1] * a[2], a[2])),
    "SHO": st.tuples(st.just(1), st.integers(3, 9), st.integers(3, 9), st.integers(1, 20), st.sampled_from([3, 5])),
}


def check_point(space, point):
    """A point maps to a config and schedule that apply legally and round-trip through JSON."""
    config = space.config(point)
    assert Config.from_json(config.to_json()) == config
    assert space.point(Config.from_json(config.to_json())) == point
    schedule = space.schedule(point)
    assert type(schedule).from_json(schedule.to_json()) == schedule
    return schedule.apply(space.info)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(OPERATOR_ARGS))
def test_random_points_and_all_their_moves_are_legal(name, target):
    """Random points of every operator's space, and every neighbour of them, apply legally."""
    @settings(max_examples=8, deadline=None)
    @given(OPERATOR_ARGS[name], st.integers(0, 2**32 - 1))
    def run(args, seed):
        info = analyze(get_task(name, *args))
        space = generate(info, target)
        assert space.size == math.prod(knob.num_values for knob in space.knobs)
        point = space.random_point(seed)
        check_point(space, point)
        for direction, neighbour in space.neighbours(point):
            assert sum(a != b for a, b in zip(point, neighbour)) == 1  # a move changes one knob
            assert space.move(point, direction) == neighbour
            check_point(space, neighbour)

    run()


@pytest.mark.parametrize("target", TARGETS)
def test_tiny_space_enumerated_every_point_legal_and_distinct(target):
    """The size is exact: enumerating a tiny space gives that many distinct legal configs."""
    info = analyze(get_task("GMV", 6, 4))
    space = generate(info, target)
    points = list(itertools.product(*(range(knob.num_values) for knob in space.knobs)))
    assert len(points) == space.size
    configs = {space.config(point) for point in points}
    assert len(configs) == space.size
    for point in points:
        check_point(space, point)


def test_split_moves_follow_the_rearrangement():
    """Direction (i, j) of a split grows factor i and shrinks factor j, nothing else."""
    space = generate(analyze(get_task("GMM", 64, 64, 64)), "llvm")
    knob_index = next(k for k, knob in enumerate(space.knobs) if knob.name == "O.split.i")
    point = space.point(Config.from_dict({**space.config(space.random_point(0)).to_dict(),
                                          "O.split.i": [4, 4, 2, 2]}))
    for direction, (k, d) in enumerate(space.directions):
        if k != knob_index:
            continue
        i, j = space.knobs[k].directions[d]
        moved = space.move(point, direction)
        before = space.config(point)["O.split.i"]
        after = space.config(moved)["O.split.i"]
        assert after[i] > before[i] and after[j] < before[j]
        assert all(after[n] == before[n] for n in range(4) if n not in (i, j))


def test_awkward_extents_get_guarded_tilings():
    """A prime extent still gets round inner tiles through ceil-divided, guarded splits."""
    info = analyze(get_task("GMM", 7, 49, 3136))
    space = generate(info, "llvm")
    split_i = next(knob for knob in space.knobs if knob.name == "O.split.i")
    assert (1, 1, 1, 8) in split_i.values  # 7 -> one vector of 8 lanes with a guard
    guarded = [v for v in split_i.values if math.prod(v) != 7]
    assert guarded and all(v[0] == -(-7 // math.prod(v[1:])) for v in guarded)
    point = space.point(Config.from_dict({**space.config(space.random_point(1)).to_dict(),
                                          "O.split.i": [1, 1, 1, 8]}))
    state = check_point(space, point)
    assert any(loop.guarded for loop in state.stages["O"].loops)


@pytest.mark.parametrize("name, args", [("C2D", (1, 64, 56, 56, 128, 3, 1, 1)), ("GMM", (512, 512, 512)),
                                        ("C3D", (1, 32, 8, 28, 28, 32, 3, 1, 1))])
def test_gpu_points_respect_threads_and_shared_memory(name, args):
    info = analyze(get_task(name, *args))
    target = get_target("cuda")
    space = generate(info, target)
    node = info.nodes[-1]
    rng = np.random.default_rng(0)
    for _ in range(300):
        config = space.config(space.random_point(rng))
        splits = {loop.name: config.get(f"{node.name}.split.{loop.name}", (loop.extent,) * 1)
                  for loop in node.loops}
        threads = math.prod(splits[loop.name][2] for loop in node.spatial if loop.extent > 1)
        assert threads <= target.max_threads_per_block
        tiles = {loop.name: math.prod(splits[loop.name][1:]) for loop in node.spatial if loop.extent > 1}
        tiles.update({loop.name: math.prod(splits[loop.name][1:]) for loop in node.reduce if loop.extent > 1})
        assert reads_footprint(info, node, tiles) * 4 <= target.max_shared_memory_bytes


def test_fpga_caps_are_only_what_one_loop_alone_cannot_exceed():
    # The DSPs and BRAM are joint limits left to the model: no loop's PE factor exceeds the
    # DSP lanes, but products over loops may (the model rejects those, see tests/fpga).
    info = analyze(get_task("C2D", 1, 64, 56, 56, 64, 3, 1, 1))
    target = get_target("fpga")
    lanes = target.dsp_slices // target.dsps_per_fma
    space = generate(info, target)
    splits = [knob for knob in space.knobs if knob.kind == "split"]
    assert all(value[2] <= lanes for knob in splits for value in knob.values)
    rng = np.random.default_rng(0)
    products = [math.prod(space.config(space.random_point(rng)).get(f"O.split.{loop.name}", (1, 1, 1))[2]
                          for loop in info.node("O").loops) for _ in range(300)]
    assert max(products) > lanes and min(products) <= lanes


def test_fpga_pe_array_of_a_3x3_conv_reaches_past_1024_lanes_in_any_shape():
    # Even per-loop caps boxed this array at 768 lanes; a 64 output x 16 input channel array
    # (the hand-written baseline's) and a 4 x 4 x 8 x 8 one must both be points.
    info = analyze(get_task("C2D", 1, 64, 112, 112, 192, 3, 1, 1))
    space = generate(info, "fpga")
    lopsided = {"pad.split.c": (64, 1, 1), "pad.split.h": (114, 1, 1), "pad.split.w": (114, 1, 1),
                "pad.attach": "inline", "O.split.k": (3, 1, 64), "O.split.rc": (4, 1, 16),
                "O.split.h": (8, 14, 1), "O.split.w": (8, 14, 1), "O.split.rh": (1, 3, 1), "O.split.rw": (1, 3, 1)}
    even = {**lopsided, "O.split.k": (12, 4, 4), "O.split.rc": (16, 1, 4), "O.split.h": (7, 2, 8),
            "O.split.w": (7, 2, 8), "O.split.rh": (1, 1, 3)}
    for design in (lopsided, even):
        space.point(Config(tuple(design.items())))  # raises SpaceError if outside the caps
    assert math.prod(even[f"O.split.{n}"][2] for n in ("k", "rc", "h", "w", "rh")) == 3072


def test_encoding_is_fixed_length_and_normalised():
    space = generate(analyze(get_task("C1D", 1, 8, 30, 4, 3, 1, 1)), "llvm")
    rng = np.random.default_rng(2)
    vectors = [space.encode(space.random_point(rng)) for _ in range(50)]
    assert {v.shape for v in vectors} == {(space.encoding_length,)}
    assert all(v.dtype == np.float32 and v.min() >= 0 and v.max() <= 1 for v in vectors)
    assert len({v.tobytes() for v in vectors}) > 1


def test_direction_indices_are_stable_and_named():
    space_a = generate(analyze(get_task("GMM", 32, 32, 32)), "llvm")
    space_b = generate(analyze(get_task("GMM", 32, 32, 32)), "llvm")
    assert space_a.directions == space_b.directions
    assert [space_a.direction_name(d) for d in range(space_a.num_directions)] == \
           [space_b.direction_name(d) for d in range(space_b.num_directions)]
    assert space_a.direction_name(0) == "O.split.i(0, 1)"


def test_bad_points_and_configs_are_refused_by_name():
    space = generate(analyze(get_task("GMM", 8, 8, 8)), "llvm")
    with pytest.raises(SpaceError, match=f"has {space.num_knobs} indices"):
        space.config((0,))
    with pytest.raises(SpaceError, match="knob 'O.split.i'"):
        space.config((10**6,) + (0,) * (space.num_knobs - 1))
    with pytest.raises(SpaceError, match="no value for knob"):
        space.point(Config((("O.split.i", (8, 1, 1, 1)),)))
    bad = {**space.config(space.random_point(0)).to_dict(), "O.split.i": [3, 3, 1, 1]}
    with pytest.raises(SpaceError, match="O.split.i"):
        space.point(Config.from_dict(bad))


def test_a_config_of_another_shape_moves_to_the_nearest_point_of_this_space():
    small, large = (generate(analyze(get_task("C2D", 1, 64, 14, 14, k, 1, 1, 0)), "llvm") for k in (32, 128))
    for seed in range(20):
        config = small.config(small.random_point(seed))
        point = large.nearest_point(config)
        moved = large.config(point)
        for name, value in config.values:   # same knobs; a value this space has is kept
            if value in large.knobs[[knob.name for knob in large.knobs].index(name)].values:
                assert moved[name] == value
        large.schedule(point)   # a legal point
    gmm = generate(analyze(get_task("GMM", 8, 8, 8)), "llvm")
    with pytest.raises(SpaceError, match="no value for knob 'O.split.i'"):
        gmm.nearest_point(small.config(small.random_point(0)))


# Operators that are not in the library: the generator needs only their analysis.

def matmul_relu(n):
    A, B = fs.placeholder((n, n), name="A"), fs.placeholder((n, n), name="B")
    k = fs.reduce_axis(n, "k")
    M = fs.compute((n, n), lambda i, j: fs.sum(A[i, k] * B[k, j], axis=k), name="M")
    return fs.compute((n, n), lambda i, j: fs.max(M[i, j], 0.0), name="R")


def softmax_rows(n, m):
    X = fs.placeholder((n, m), name="X")
    j = fs.reduce_axis(m, "j")
    row_max = fs.compute((n,), lambda i: fs.max(X[i, j], axis=j), name="row_max")
    E = fs.compute((n, m), lambda i, c: fs.exp(X[i, c] - row_max[i]), name="E")
    q = fs.reduce_axis(m, "q")
    total = fs.compute((n,), lambda i: fs.sum(E[i, q], axis=q), name="total")
    return fs.compute((n, m), lambda i, c: E[i, c] / total[i], name="S")


def stencil(n):
    X = fs.placeholder((n, n), name="X")
    return fs.compute((n - 2, n - 2), lambda i, j: (X[i, j + 1] + X[i + 2, j + 1] + X[i + 1, j]
                                                    + X[i + 1, j + 2]) * 0.25, name="S")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("build", [lambda: matmul_relu(24), lambda: softmax_rows(12, 20), lambda: stencil(17)],
                         ids=["matmul_relu", "softmax", "stencil"])
def test_operators_outside_the_library(build, target):
    info = analyze(build())
    space = generate(info, target)
    rng = np.random.default_rng(5)
    for _ in range(60):
        check_point(space, space.random_point(rng))


def test_reduction_producer_may_be_computed_at_its_consumer_on_the_cpu():
    info = analyze(matmul_relu(16))
    space = generate(info, "llvm")
    attach = next(knob for knob in space.knobs if knob.name == "M.attach")
    assert attach.values == ("root", "at")  # a reduction cannot be inlined
    config = {**space.config(space.random_point(0)).to_dict(), "M.attach": "at"}
    state = check_point(space, space.point(Config.from_dict(config)))
    assert state.stages["M"].attach == "at" and state.stages["M"].attach_to[0] == "R"


def test_an_illegal_hand_edit_of_a_generated_schedule_is_refused():
    """The legality checks also guard schedules that did not come from a space."""
    space = generate(analyze(get_task("GMM", 16, 16, 16)), "llvm")
    schedule = space.schedule(space.random_point(0))
    data = json.loads(schedule.to_json())
    split = next(step for step in data if step["kind"] == "split")
    split["factors"] = [5, 5, 1, 1]
    with pytest.raises(ScheduleError, match="ceil"):
        type(schedule).from_json(json.dumps(data)).apply(space.info)


def _cpu_config(space, seed=0, **values):
    """A config of a CPU space with some knobs set by hand (knob names use '.' for '__')."""
    config = space.config(space.random_point(seed)).to_dict()
    config.update({name.replace("__", "."): value for name, value in values.items()})
    return Config.from_dict(config)


def test_register_tile_accumulates_the_innermost_tile_over_the_whole_reduction():
    info = analyze(get_task("GMM", 64, 64, 64))
    space = generate(info, "llvm")
    config = _cpu_config(space, O__accumulate="registers", O__split__i=(2, 2, 4, 4), O__split__j=(2, 1, 2, 16))
    state = check_point(space, space.point(config))
    tile = state.stages["O.local"]
    assert tile.attach == "at" and tile.attach_to == ("O", "j.2")  # just outside the S3 loops
    kinds = {loop.name: loop.annotation for loop in tile.loops}
    assert kinds["j"] == "vectorize" and kinds["i"] == "unroll"
    reduce_positions = [n for n, loop in enumerate(tile.loops) if loop.kind == "reduce"]
    assert reduce_positions == list(range(len(reduce_positions)))  # every reduce loop outside the tile
    assert not state.stages["O"].has_reduce  # the node itself only copies the tile out


def test_a_producer_computed_at_a_register_tiled_node_is_made_once_per_parallel_iteration_not_per_tile():
    space = generate(analyze(get_task("C2D", 1, 8, 14, 14, 32, 3, 1, 1)), "llvm")
    for accumulate in ("registers", "memory"):
        config = _cpu_config(space, pad__attach="at", O__accumulate=accumulate, O__fuse=2,
                             O__split__k=(2, 2, 2, 4), O__split__h=(7, 1, 1, 2))
        state = check_point(space, space.point(config))
        parallel = next(loop.name for loop in state.stages["O"].loops if loop.annotation == "parallel")
        assert state.stages["pad"].attach_to == ("O", parallel)


def test_innermost_tile_is_bounded_by_the_register_file():
    target = get_target("llvm").with_(vector_lanes=8, vector_registers=16)
    for task in (get_task("GMM", 64, 64, 64), get_task("C2D", 1, 8, 14, 14, 32, 3, 1, 1)):
        info = analyze(task)
        node = info.nodes[-1]
        space = generate(info, target)
        caps = {knob.name: knob.caps[-1] for knob in space.knobs if knob.name.startswith(f"{node.name}.split.")}
        spatial = [f"{node.name}.split.{loop.name}" for loop in node.spatial if loop.extent > 1]
        assert caps[spatial[-1]] == 2 * 8  # the contiguous loop: up to two vectors
        assert math.prod(caps[name] for name in spatial[:-1]) <= 8  # the rest: the other registers


def _tile_accumulators(space, point, lanes):
    """A register tile's accumulators, read off its schedule: the node's innermost split factors, the
    one its tile vectorises in whole vectors."""
    steps = space.schedule(point).steps
    inner = {step.loop: step.factors[-1] for step in steps if type(step).__name__ == "Split" and step.node == "O"}
    (axis,) = [step.loop for step in steps if type(step).__name__ == "Vectorize" and step.node == "O.local"]
    return math.prod(factor for loop, factor in inner.items() if loop != axis) * -(-inner[axis] // lanes)


@pytest.mark.parametrize("lanes, registers, budget", [(8, 16, 12), (16, 32, 16)])
def test_a_search_proposes_only_register_tiles_within_the_accumulator_budget(lanes, registers, budget):
    """Three quarters of the registers, at most 16 accumulators (the rest hold the operands); this
    space's one-vector tiles have at most 8 rows (its caps), so none reaches a one-vector budget."""
    target = get_target("llvm").with_(vector_lanes=lanes, vector_registers=registers)
    space = generate(analyze(get_task("C2D", 1, 16, 8, 32, 64, 3, 1, 1)), target)
    caps = {knob.name: knob.caps[-1] for knob in space.knobs if knob.name.startswith("O.split.")}
    rows_k, rows_h = caps["O.split.k"], caps["O.split.h"]
    # Two vectors of channels (w's innermost factor, which the channel tile takes) by as many pixels
    # as the caps allow: legal, and spills.
    wide = _cpu_config(space, O__accumulate="registers", O__vector="k", O__split__k=(64 // rows_k, 1, 1, rows_k),
                       O__split__h=(8 // rows_h, 1, 1, rows_h), O__split__w=(32 // (2 * lanes), 1, 1, 2 * lanes))
    wide_point = space.point(wide)
    check_point(space, wide_point)
    assert _tile_accumulators(space, wide_point, lanes) == registers
    assert not space.fits(wide_point)
    rng = np.random.default_rng(0)
    tiled = largest = 0
    for _ in range(60):
        point = space.random_point(rng)
        for candidate in [point] + [neighbour for _, neighbour in space.neighbours(point)]:
            if space.config(candidate)["O.accumulate"] == "registers":
                tiled += 1
                accumulators = _tile_accumulators(space, candidate, lanes)
                assert accumulators <= budget
                largest = max(largest, accumulators)
    assert tiled > 100 and largest == budget
    assert all(space.move(space.point(wide), direction) is None or space.fits(space.move(wide_point, direction))
               for direction in range(space.num_directions))


def test_a_space_without_fitting_rules_proposes_every_point_and_with_them_only_those():
    """Space(fits=...) keeps the product whole (size, points, configs) and leaves the rest out of random
    draws and moves."""
    full = generate(analyze(get_task("GMV", 6, 4)), "fpga")
    first = full.knobs[0].name
    allowed = {full.knobs[0].values[0]}
    pruned = Space(full.info, full.target, full.knobs, full._emit, fits=lambda config: config[first] in allowed)
    assert pruned.size == full.size and all(full.fits(full.random_point(seed)) for seed in range(5))
    assert {full.random_point(seed)[0] for seed in range(40)} != {0}
    assert {pruned.random_point(seed)[0] for seed in range(40)} == {0}
    point = pruned.random_point(1)
    assert all(neighbour[0] == 0 for _, neighbour in pruned.neighbours(point))
    moves = [direction for direction, (knob, _) in enumerate(pruned.directions) if knob == 0]
    assert moves and all(pruned.move(point, direction) is None for direction in moves)
    nothing = Space(full.info, full.target, full.knobs, full._emit, fits=lambda config: False)
    with pytest.raises(SpaceError, match="fits"):
        nothing.random_point(0)


def test_cpu_vectorises_the_output_contiguous_loop_and_never_inlines_a_guarded_producer():
    padded = generate(analyze(get_task("C2D", 1, 8, 14, 14, 32, 3, 1, 1)), "llvm")
    unpadded = generate(analyze(get_task("C2D", 1, 8, 14, 14, 32, 1, 1, 0)), "llvm")
    names = {knob.name for knob in padded.knobs}
    assert not any(name.endswith((".inner", ".vectorize")) for name in names)
    attach = {space: next(k.values for k in space.knobs if k.name == "pad.attach") for space in (padded, unpadded)}
    assert "inline" not in attach[padded] and "inline" in attach[unpadded]  # the select is the guard
    assert "inline" in next(k.values for k in generate(padded.info, "cuda").knobs if k.name == "pad.attach")
    rng = np.random.default_rng(0)
    for _ in range(20):
        state = check_point(padded, padded.random_point(rng))
        for stage in (state.stages["O"], state.stages.get("O.local")):
            vectorised = [loop.name for loop in stage.loops if loop.annotation == "vectorize"] if stage else []
            # Another axis only in a register tile, stored blocked along it (k is dim 1); the output
            # keeps the caller's layout.
            assert all(name.split(".")[0] == "w" or [b.dim for b in state.layouts.get("O.local", ())] == [1]
                       for name in vectorised)
            assert "O" not in state.layouts


def test_a_register_tile_vectorised_along_the_channels_blocks_itself_and_the_weights_not_the_output():
    space = generate(analyze(get_task("C2D", 1, 8, 14, 14, 32, 1, 1, 0)), "llvm")
    lanes = get_target("llvm").vector_lanes   # 8 or 16: both divide the 32 output channels
    # A 1x1 convolution's rows and columns merge into one axis, hw (flexsched.merge_axes).
    assert next(k.values for k in space.knobs if k.name == "O.vector") == ("hw", "k")
    config = _cpu_config(space, O__accumulate="registers", O__vector="k", O__split__hw=(-(-196 // lanes), 1, 1, lanes),
                         O__split__k=(32, 1, 1, 1), O__pack__W="none", O__block__pad="none")
    state = check_point(space, space.point(config))
    tile = state.stages["O.local"].loops
    assert tile[-1].name == "k" and tile[-1].annotation == "vectorize"
    assert {name: [(b.dim, b.block) for b in blockings] for name, blockings in state.layouts.items()} == \
        {"O.local": [(1, lanes)], "W": [(0, lanes)]}


@pytest.mark.parametrize("lanes, registers", [(8, 16), (16, 32)])
def test_a_points_kind_names_the_axis_its_register_tile_really_vectorises(lanes, registers):
    target = get_target("llvm").with_(vector_lanes=lanes, vector_registers=registers)
    space = generate(analyze(get_task("C2D", 1, 8, 14, 14, 32, 1, 1, 0)), target)
    base = dict(O__accumulate="registers", O__vector="k", O__split__k=(32, 1, 1, 1))
    whole = _cpu_config(space, O__split__hw=(-(-196 // lanes), 1, 1, lanes), **base)
    assert space.family(space.point(whole)) == (("O", "registers", "k", 1),)
    # hw's innermost factor (14 of 8 lanes, 28 of 16) is no multiple of the vector width. 14 rows of
    # one channel vector fill 16 registers but two, so that tile vectorises k; 28 pass 16
    # accumulators, so that one keeps hw vectorised, in two vectors, which its kind counts too.
    width = next(f for f in range(lanes + 1, 2 * lanes) if 196 % f == 0)
    partial = _cpu_config(space, O__split__hw=(196 // width, 1, 1, width), **base)
    axis, vectors = ("k", 1) if registers == 16 else ("hw", 2)
    assert space.family(space.point(partial)) == (("O", "registers", axis, vectors),)
    # Its broad kind leaves the width out, so a search's starts take a turn per axis, not per width.
    assert space.broad_family(space.point(partial)) == (("O", "registers", axis),)
    tile = check_point(space, space.point(partial)).stages["O.local"].loops
    assert tile[-1].name == axis and tile[-1].annotation == "vectorize"
    memory = _cpu_config(space, O__accumulate="memory", O__vector="k")
    assert space.family(space.point(memory)) == space.broad_family(space.point(memory)) == (("O", "memory", None),)


@pytest.mark.parametrize("lanes, registers", [(8, 16), (16, 32)])
def test_a_channel_tile_over_columns_that_fill_no_vector_keeps_them_as_its_rows(lanes, registers):
    """7 columns fill no vector of 8 or 16 lanes. Vectorising the channels, the tile takes one vector
    of them and keeps the 7 columns as its rows, a point no column-vectorised config gives. Under the
    most map rows the h knob offers (2 with 16 registers, 4 with 32), 14 or 28 tile rows: 14 fill
    all 16 registers but the weight vector and the broadcast, while 28 pass the 16 accumulators at
    most, so that point keeps the columns vectorised."""
    target = get_target("llvm").with_(vector_lanes=lanes, vector_registers=registers)
    space = generate(analyze(get_task("C2D", 1, 8, 7, 7, 32, 3, 1, 1)), target)
    base = dict(O__accumulate="registers", O__vector="k", O__split__k=(1, 8, 1, 4), O__split__w=(1, 1, 1, 7),
                O__pack__W="none", O__block__pad="none")
    point = space.point(_cpu_config(space, O__split__h=(7, 1, 1, 1), **base))
    assert space.fits(point) and space.family(point) == (("O", "registers", "k", 1),)
    splits = {step.loop: step.factors for step in space.schedule(point).steps
              if type(step).__name__ == "Split" and step.node == "O"}
    assert splits["k"][-1] == lanes and math.prod(splits["k"]) == 32 and splits["w"] == (1, 1, 1, 7)
    tile = check_point(space, point).stages["O.local"].loops
    assert tile[-1].name == "k" and tile[-1].annotation == "vectorize"
    most_rows = max(next(k.values for k in space.knobs if k.name == "O.split.h"), key=lambda factors: factors[-1])
    tall = space.point(_cpu_config(space, O__split__h=most_rows, **base))
    assert 7 * most_rows[-1] == {16: 14, 32: 28}[registers]
    assert space.family(tall) == ((("O", "registers", "k", 1),) if registers == 16 else (("O", "registers", "w", 1),))


@pytest.mark.parametrize("lanes, registers, one_vector, wider", [(8, 16, 14, 12), (16, 32, 16, 16)])
def test_a_one_vector_tile_may_fill_all_registers_but_its_two_operands(lanes, registers, one_vector, wider):
    """A tile one vector wide loads one vector and broadcasts one value a reduction step, so its
    accumulators may take the other registers (16 at most); a wider tile keeps three quarters. 14
    columns of a 14-wide map by 8 or 16 channels: 14 accumulators, within the 16 registers of AVX2
    code; the same columns vectorised by 8 rows of channels: 16 with AVX2 code (two vectors of 8
    lanes a row), past its budget of 12, and 8 on AVX-512."""
    target = get_target("llvm").with_(vector_lanes=lanes, vector_registers=registers)
    space = generate(analyze(get_task("C2D", 1, 8, 14, 14, 32, 3, 1, 1)), target)
    base = dict(O__accumulate="registers", O__pack__W="none", O__block__pad="none", O__split__h=(14, 1, 1, 1))
    channels = space.point(_cpu_config(space, O__vector="k", O__split__k=(1, 8, 1, 4), O__split__w=(1, 1, 1, 14),
                                       **base))
    assert space.family(channels) == (("O", "registers", "k", 1),)
    assert _tile_accumulators(space, channels, lanes) == 14 <= one_vector
    assert space.fits(channels)
    columns = space.point(_cpu_config(space, O__vector="w", O__split__k=(8, 1, 1, 4), O__split__w=(1, 1, 1, 14),
                                      **dict(base, O__split__h=(7, 1, 1, 2))))
    vectors = -(-14 // lanes)
    assert _tile_accumulators(space, columns, lanes) == 8 * vectors
    assert space.fits(columns) == (8 * vectors <= (one_vector if vectors == 1 else wider))


def test_a_channel_vectorised_tile_never_runs_past_the_channels():
    """Swapping in a vector's width for k's innermost factor shrinks k's middle factors to fit: k = 32
    split (1, 8, 1, 4) becomes (1, 2, 1, 16) on 16 lanes and (1, 4, 1, 8) on 8, not (1, 8, 1, lanes),
    whose tiles would run over 4 or 2 times the channels, all but the first pass masked off."""
    space = generate(analyze(get_task("C2D", 1, 8, 14, 14, 32, 1, 1, 0)), "llvm")
    lanes = get_target("llvm").vector_lanes
    config = _cpu_config(space, O__accumulate="registers", O__vector="k", O__split__k=(1, 8, 1, 4),
                         O__split__hw=(-(-196 // lanes), 1, 1, lanes), O__pack__W="none", O__block__pad="none")
    splits = {step.loop: step.factors for step in space.schedule(space.point(config)).steps
              if type(step).__name__ == "Split" and step.node == "O"}
    assert splits["k"][-1] == lanes and math.prod(splits["k"]) == 32
    assert math.prod(splits["hw"]) >= 196 and math.prod(splits["hw"][1:]) <= 196


def test_a_channel_vectorised_tiles_rows_cover_the_width_with_little_padding():
    """k's innermost factor, 3, becomes the tile's rows along the 56 pixels of a row, under the width's
    own middle factors (4 and what the vector's width leaves of the next: 2 on 8 lanes, 4 on 16), which
    would cover 72 or 96 of them: the next gives way to 1 (5 x 4 x 1 x 3 = 60, 4 guarded off)."""
    space = generate(analyze(get_task("C2D", 1, 8, 56, 56, 32, 3, 1, 1)), "llvm")
    lanes = get_target("llvm").vector_lanes
    config = _cpu_config(space, O__accumulate="registers", O__vector="k", O__split__k=(1, 1, 11, 3),
                         O__split__w=(-(-56 // (4 * lanes)), 4, 1, lanes), O__pack__W="none", O__block__pad="none")
    splits = {step.loop: step.factors for step in space.schedule(space.point(config)).steps
              if type(step).__name__ == "Split" and step.node == "O"}
    assert splits["k"][-1] == lanes and splits["w"] == (5, 4, 1, 3)


def test_a_channel_vectorised_tile_may_block_the_broadcast_input_along_its_reduction():
    space = generate(analyze(get_task("C2D", 1, 8, 14, 14, 32, 1, 1, 0)), "llvm")
    lanes = get_target("llvm").vector_lanes
    names = [k.name for k in space.knobs if ".block." in k.name]
    assert names == ["O.block.pad"]   # W is indexed by k, the only other axis a tile may vectorise here
    square = generate(analyze(get_task("C2D", 1, 8, 16, 16, 32, 3, 1, 1)), "llvm")
    # 16 rows fill whole vectors: a tile vectorised along h broadcasts W. (A 3x3 window keeps h
    # apart; a 1x1 convolution's h and w merge into one axis, flexsched.merge_axes.)
    assert [k.name for k in square.knobs if ".block." in k.name] == ["O.block.pad", "O.block.W"]
    gmm = generate(analyze(get_task("GMM", 64, 64, 64)), "llvm")
    # A is indexed by i, the only axis besides the last a tile vectorises: never broadcast, no knob.
    assert [k.name for k in gmm.knobs if ".block." in k.name] == ["O.block.B"]
    base = dict(O__accumulate="registers", O__vector="k", O__split__hw=(-(-196 // lanes), 1, 1, lanes),
                O__split__k=(32, 1, 1, 1), O__pack__W="none", O__pack__pad="none", O__block__pad="blocked")
    layouts = {}
    for attach, rc in (("inline", (1, 2, 4)), ("root", (1, 2, 4)), ("inline", (1, 8, 1))):
        config = _cpu_config(space, pad__attach=attach, O__split__rc=rc, **base)
        state = check_point(space, space.point(config))
        layouts[attach, rc] = {name: [(b.dim, b.block) for b in blockings] for name, blockings in state.layouts.items()
                               if name in ("I", "pad", "W")}
    # By the innermost reduction factor: the input itself where the padding is inlined, else the padded copy.
    assert layouts["inline", (1, 2, 4)] == {"I": [(1, 4)], "W": [(0, lanes)]}
    assert layouts["root", (1, 2, 4)] == {"pad": [(1, 4)], "W": [(0, lanes)]}
    assert layouts["inline", (1, 8, 1)] == {"W": [(0, lanes)]}   # one channel per step: nothing to block


def test_producer_inlined_into_several_consumers_is_not_computed_at_one_of_them():
    info = analyze(softmax_rows(6, 13))
    space = generate(info, "llvm")
    config = _cpu_config(space, row_max__attach="at", E__attach="inline")
    state = check_point(space, space.point(config))
    assert state.stages["row_max"].attach == "root"  # E reads it for both 'total' and 'S'


def test_an_s0_panel_is_made_once_per_parallel_iteration_for_every_tile_inside_it():
    space = generate(analyze(get_task("GMM", 64, 64, 64)), "llvm")
    for accumulate in ("registers", "memory"):
        for fuse, anchor in ((1, "j.0"), (2, "i.0+j.0")):
            config = _cpu_config(space, O__accumulate=accumulate, O__fuse=fuse, O__pack__B="S0", O__pack__A="none",
                                 O__split__i=(2, 2, 4, 4), O__split__j=(2, 1, 2, 16))
            state = check_point(space, space.point(config))
            panel = state.stages["B.local"]
            # Just inside the S0 level (the parallel loop where it fuses the whole level), outside every tile.
            assert panel.attach == "at" and panel.attach_to == ("O", anchor), (accumulate, fuse)
            # A's rows do not change with j.0: its panel is made once per i.0, not again for every j.0.
            config = _cpu_config(space, O__accumulate=accumulate, O__fuse=fuse, O__pack__A="S0", O__pack__B="none",
                                 O__split__i=(2, 2, 4, 4), O__split__j=(2, 1, 2, 16))
            panel = check_point(space, space.point(config)).stages["A.local"]
            assert panel.attach_to == ("O", {1: "i.0", 2: "i.0+j.0"}[fuse]), (accumulate, fuse)


@pytest.mark.parametrize("lanes, registers", [(8, 16), (16, 32)])
def test_a_packed_weight_panel_is_converted_by_its_copy_once_per_chunk_of_channels(lanes, registers):
    """A channel tile packing its weights: the copy, not the weights, is blocked, and fills its
    blocks a vector at a time; made at the parallel loop over the channels, not again per pixel block."""
    target = get_target("llvm").with_(vector_lanes=lanes, vector_registers=registers)
    space = generate(analyze(get_task("C2D", 1, 8, 14, 14, 32, 1, 1, 0)), target)
    config = _cpu_config(space, O__accumulate="registers", O__vector="k", O__split__hw=(-(-196 // lanes), 1, 1, lanes),
                         O__split__k=(32, 1, 1, 1), O__pack__W="S0", O__block__pad="none", O__fuse=1)
    state = check_point(space, space.point(config))
    assert {name: [(b.dim, b.block) for b in blockings] for name, blockings in state.layouts.items()} == \
        {"O.local": [(1, lanes)], "W.local": [(0, lanes)]}
    panel = state.stages["W.local"]
    assert panel.attach_to == ("O", "b+k.0")
    assert panel.loops[-1].name == "W.local.ax0.1" and panel.loops[-1].extent == lanes
    assert panel.loops[-1].annotation == "vectorize"


def _strided_conv_config(stride, **changes):
    """(space, a register-tile config vectorising the output's width) of a small 3 x 3 convolution."""
    task = get_task("C2D", 1, 16, 16, 16, 16, 3, stride, 1)
    space = generate(analyze(task), get_target("llvm -mattr=-avx512f"))
    config = space.config(space.random_point(0)).to_dict()
    config.update({"O.split.k": (2, 1, 2, 4), "O.split.h": (16 // stride // 2, 1, 1, 2),
                   "O.split.w": (16 // stride // 8, 1, 1, 8), "O.accumulate": "registers", "O.vector": "w",
                   "O.pack.pad": "none", "O.pack.W": "none", "pad.attach": "root", **changes})
    return space, Config.from_dict(config)


def test_a_strided_convolution_vectorised_along_the_width_reads_its_padded_input_in_phases():
    from flexsched.schedule import Deinterleave

    def phases(stride, **changes):
        space, config = _strided_conv_config(stride, **changes)
        return [step for step in space.schedule(config).steps if isinstance(step, Deinterleave)]

    assert phases(2) == [Deinterleave("pad", 3, 2)]
    assert phases(2, **{"O.accumulate": "memory"}) == [Deinterleave("pad", 3, 2)]
    assert phases(2, **{"pad.attach": "at"}) == [Deinterleave("pad", 3, 2)]          # its region, in phases
    assert phases(2, **{"O.pack.pad": "S0"}) == [Deinterleave("pad.local", 3, 2)]    # the copy the tile reads
    assert phases(1) == []                                          # every element is read
    assert phases(2, **{"O.vector": "k"}) == []                     # the lanes are channels
