"""Knobs: exact and guarded split values, the rearranged move directions, choice knobs."""

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from space.knobs import ChoiceKnob, SplitKnob

AWKWARD_EXTENTS = [1, 2, 3, 7, 12, 49, 97, 224, 1000, 1021, 1024, 2520, 2880, 2999, 3136]
PROPERTY_SETTINGS = settings(deadline=None, max_examples=150)
ANY_EXTENT = st.integers(1, 3000) | st.sampled_from(AWKWARD_EXTENTS)
SMALL_EXTENT = st.integers(1, 200) | st.sampled_from([e for e in AWKWARD_EXTENTS if e <= 200])


def guard_rule_holds(knob, value):
    """The ceil-divided outer loop, and a padded product within 15% of the extent."""
    inner = math.prod(value[1:])
    product = math.prod(value)
    outer_is_ceil = value[0] == -(-knob.extent // inner)
    return outer_is_ceil and knob.extent < product and product * 100 <= 115 * knob.extent


def within_caps(value, caps):
    return all(cap is None or factor <= cap for factor, cap in zip(value, caps))


@st.composite
def split_knobs(draw, extents=ANY_EXTENT, guarded=st.booleans()):
    extent = draw(extents)
    parts = draw(st.integers(1, 4))
    cap = st.none() | st.integers(1, 64)
    caps = draw(st.none() | st.lists(cap, min_size=parts, max_size=parts))
    is_guarded = draw(guarded)
    try:
        return SplitKnob("loop", extent, parts, caps=caps, guarded=is_guarded)
    except ValueError:
        # A capped outer factor can leave nothing; an uncapped one always keeps (extent, 1, ...).
        return SplitKnob("loop", extent, parts, caps=[None] + caps[1:], guarded=is_guarded)


def brute_force_move(knob, index, direction):
    """The nearest value along direction by a scan of every value, exact costs."""
    up, down = knob.directions[direction]
    start = knob.values[index]
    best = None
    for candidate_index, candidate in enumerate(knob.values):
        others = [k for k in range(knob.parts) if k not in (up, down)]
        others_kept = all(candidate[k] == start[k] for k in others)
        if others_kept and candidate[up] > start[up] and candidate[down] < start[down]:
            cost = Fraction(candidate[up] * start[down], start[up] * candidate[down])
            key = (cost, candidate[up], candidate_index)
            best = key if best is None or key < best else best
    return None if best is None else best[2]


# Exact examples.

@pytest.mark.parametrize("extent, parts, expected", [(1024, 4, 286), (1024, 3, 66), (12, 2, 6),
                                                     (1, 4, 1), (3136, 1, 1)])
def test_exact_value_counts(extent, parts, expected):
    knob = SplitKnob("loop", extent, parts)
    exact = [index for index in range(knob.num_values) if not knob.is_guarded(index)]
    assert len(exact) == expected


def test_power_of_two_and_tiny_extents_have_no_guarded_values():
    for extent, parts in [(1024, 4), (1024, 2), (3, 4), (1, 3)]:
        knob = SplitKnob("loop", extent, parts)
        assert not any(knob.is_guarded(index) for index in range(knob.num_values))


def test_seven_gains_round_guarded_tiles():
    knob = SplitKnob("loop", 7, 4)
    exact = [value for index, value in enumerate(knob.values) if not knob.is_guarded(index)]
    guarded = [value for index, value in enumerate(knob.values) if knob.is_guarded(index)]
    assert exact == [(1, 1, 1, 7), (1, 1, 7, 1), (1, 7, 1, 1), (7, 1, 1, 1)]
    assert {(1, 1, 1, 8), (2, 1, 1, 4), (1, 2, 1, 4), (4, 1, 1, 2)} <= set(guarded)
    assert (8, 1, 1, 1) not in guarded  # its last outer iteration would be idle
    assert all(guard_rule_holds(knob, value) for value in guarded)
    assert knob.values == tuple(exact + sorted(guarded))


def test_unguarded_knob_keeps_only_exact_values():
    assert SplitKnob("loop", 7, 4, guarded=False).values == (
        (1, 1, 1, 7), (1, 1, 7, 1), (1, 7, 1, 1), (7, 1, 1, 1))


def test_caps_are_respected_and_the_outer_split_survives():
    caps = (None, 32, 4)
    knob = SplitKnob("loop", 1024, 3, caps=caps)
    assert all(within_caps(value, caps) for value in knob.values)
    assert knob.index_of((1024, 1, 1)) == knob.index_of([1024, 1, 1])  # as read back from JSON
    assert (1, 1024, 1) not in knob.values


def test_caps_that_leave_nothing_are_an_error_naming_the_knob():
    with pytest.raises(ValueError, match="'O.i'"):
        SplitKnob("O.i", 7, 2, caps=(1, 1))


def test_extent_one_has_a_single_value_and_no_moves():
    knob = SplitKnob("loop", 1, 4)
    assert knob.values == ((1, 1, 1, 1),)
    assert all(knob.move(0, direction) is None for direction in range(knob.num_directions))
    assert knob.neighbours(0) == []
    assert knob.encode(0) == (0.0, 0.0, 0.0, 0.0)


def test_directions_are_every_ordered_pair():
    knob = SplitKnob("loop", 64, 3)
    assert knob.directions == ((0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1))
    assert knob.num_directions == 6
    assert SplitKnob("loop", 64, 1).num_directions == 0


def test_move_example():
    knob = SplitKnob("loop", 1024, 3, guarded=False)
    start = knob.index_of((4, 16, 16))
    assert knob.values[knob.move(start, knob.directions.index((0, 2)))] == (8, 16, 8)
    assert knob.values[knob.move(start, knob.directions.index((2, 1)))] == (4, 8, 32)
    assert knob.move(knob.index_of((1024, 1, 1)), knob.directions.index((0, 1))) is None


@pytest.mark.parametrize("arguments, message", [
    (("O.i", 4, 0), "split knob 'O.i': parts must be >= 1, got 0"),
    (("O.i", 0, 2), "split knob 'O.i': extent must be >= 1, got 0"),
    (("O.i", 4.0, 2), "split knob 'O.i': extent must be >= 1, got 4.0"),
])
def test_split_validation_messages(arguments, message):
    with pytest.raises(ValueError) as error:
        SplitKnob(*arguments)
    assert str(error.value) == message


def test_split_validation_of_caps_and_lookups():
    with pytest.raises(ValueError, match="'O.i'.*caps"):
        SplitKnob("O.i", 8, 2, caps=(None,))
    with pytest.raises(ValueError, match="'O.i'.*caps"):
        SplitKnob("O.i", 8, 2, caps=(None, 0))
    knob = SplitKnob("O.i", 8, 2)
    with pytest.raises(ValueError, match=r"'O.i'.*\(3, 3\)"):
        knob.index_of((3, 3))
    with pytest.raises(ValueError, match="'O.i'.*index"):
        knob.move(knob.num_values, 0)
    with pytest.raises(ValueError, match="'O.i'.*direction"):
        knob.move(0, knob.num_directions)


def test_knobs_are_immutable_and_summarise_to_json():
    knob = SplitKnob("O.i", 1024, 4)
    with pytest.raises(AttributeError):
        knob.values = ()
    assert knob.to_dict() == {"name": "O.i", "kind": "split", "num_values": 286,
                              "num_directions": 12}


# Properties of split values.

@PROPERTY_SETTINGS
@given(split_knobs())
def test_split_values_are_valid_unique_and_indexed(knob):
    assert len(set(knob.values)) == knob.num_values
    for index, value in enumerate(knob.values):
        assert len(value) == knob.parts and all(isinstance(f, int) and f >= 1 for f in value)
        assert within_caps(value, knob.caps)
        if knob.is_guarded(index):
            assert knob.guarded and guard_rule_holds(knob, value)
        else:
            assert math.prod(value) == knob.extent
        assert knob.index_of(value) == index
    if knob.caps[0] is None:
        assert (knob.extent,) + (1,) * (knob.parts - 1) in knob.values


@PROPERTY_SETTINGS
@given(split_knobs())
def test_exact_values_come_first_each_group_sorted(knob):
    flags = [knob.is_guarded(index) for index in range(knob.num_values)]
    num_exact = flags.count(False)
    assert flags == [False] * num_exact + [True] * (knob.num_values - num_exact)
    assert list(knob.values[:num_exact]) == sorted(knob.values[:num_exact])
    assert list(knob.values[num_exact:]) == sorted(knob.values[num_exact:])


@PROPERTY_SETTINGS
@given(split_knobs(), st.lists(st.integers(0, 10**6), min_size=1, max_size=5))
def test_moves_obey_the_direction_rule(knob, seeds):
    for seed in seeds:
        index = seed % knob.num_values
        start = knob.values[index]
        for direction, (up, down) in enumerate(knob.directions):
            target = knob.move(index, direction)
            if target is None:
                continue
            assert 0 <= target < knob.num_values
            moved = knob.values[target]
            assert moved[up] > start[up] and moved[down] < start[down]
            assert all(moved[k] == start[k] for k in range(knob.parts) if k not in (up, down))


@PROPERTY_SETTINGS
@given(split_knobs(extents=SMALL_EXTENT), st.lists(st.integers(0, 10**6), min_size=1, max_size=5))
def test_moves_pick_the_nearest_value(knob, seeds):
    for seed in seeds:
        index = seed % knob.num_values
        for direction in range(knob.num_directions):
            assert knob.move(index, direction) == brute_force_move(knob, index, direction)


@PROPERTY_SETTINGS
@given(split_knobs(guarded=st.just(False)), st.integers(0, 10**6))
def test_exact_moves_are_undone_by_the_opposite_direction(knob, seed):
    index = seed % knob.num_values
    for direction, (up, down) in enumerate(knob.directions):
        target = knob.move(index, direction)
        if target is not None:
            assert knob.move(target, knob.directions.index((down, up))) == index


@PROPERTY_SETTINGS
@given(st.integers(0, 12), st.integers(1, 4), st.integers(0, 10**6))
def test_power_of_two_moves_shift_one_factor_of_two(log_extent, parts, seed):
    knob = SplitKnob("loop", 2 ** log_extent, parts, guarded=False)
    index = seed % knob.num_values
    start = knob.values[index]
    for direction, (up, down) in enumerate(knob.directions):
        target = knob.move(index, direction)
        if start[down] == 1:
            assert target is None
        else:
            expected = list(start)
            expected[up] *= 2
            expected[down] //= 2
            assert knob.values[target] == tuple(expected)


@PROPERTY_SETTINGS
@given(split_knobs(), st.integers(0, 10**6))
def test_neighbours_are_the_distinct_moves(knob, seed):
    index = seed % knob.num_values
    neighbours = knob.neighbours(index)
    moves = [knob.move(index, direction) for direction in range(knob.num_directions)]
    assert neighbours == [target for target in moves if target is not None]
    assert len(set(neighbours)) == len(neighbours)
    assert index not in neighbours


@PROPERTY_SETTINGS
@given(split_knobs(), st.integers(0, 10**6))
def test_split_encoding_is_fixed_length_in_unit_range(knob, seed):
    index = seed % knob.num_values
    encoded = knob.encode(index)
    assert len(encoded) == knob.encoding_length == knob.parts
    assert all(isinstance(number, float) and 0.0 <= number <= 1.0 for number in encoded)


# Choice knobs.

@PROPERTY_SETTINGS
@given(st.lists(st.integers() | st.text(max_size=3), min_size=1, max_size=8, unique=True),
       st.integers(0, 10**6))
def test_choice_moves_step_without_wrapping(values, seed):
    knob = ChoiceKnob("unroll", "unroll", values)
    index = seed % knob.num_values
    forward, backward = knob.move(index, 0), knob.move(index, 1)
    assert forward == (index + 1 if index + 1 < len(values) else None)
    assert backward == (index - 1 if index > 0 else None)
    assert knob.neighbours(index) == [t for t in (forward, backward) if t is not None]
    assert knob.index_of(values[index]) == index
    (position,) = knob.encode(index)
    assert knob.encoding_length == 1 and 0.0 <= position <= 1.0


def test_choice_knob_ends_and_encoding():
    knob = ChoiceKnob("order", "reorder", [(0, 1, 2), (1, 0, 2), (2, 1, 0)])
    assert knob.directions == ("+1", "-1")
    assert knob.move(2, 0) is None and knob.move(0, 1) is None
    assert [knob.encode(index) for index in range(3)] == [(0.0,), (0.5,), (1.0,)]
    single = ChoiceKnob("flag", "vectorize", ["on"])
    assert single.encode(0) == (0.0,) and single.neighbours(0) == []
    assert knob.to_dict() == {"name": "order", "kind": "reorder", "num_values": 3,
                              "num_directions": 2, "ordered": True}


def test_unordered_choice_moves_to_any_other_value_in_one_step():
    knob = ChoiceKnob("O.pack.A", "cache_read", ("none", "R0", "S1", "S2"), ordered=False)
    assert knob.directions == ("=none", "=R0", "=S1", "=S2")
    assert knob.neighbours(3) == [0, 1, 2]       # from S2 straight to none, not through S1 and R0
    assert knob.move(1, 1) is None               # a move to the value it has leads nowhere
    assert knob.encoding_length == 4 and knob.encode(2) == (0.0, 0.0, 1.0, 0.0)
    assert knob.to_dict()["ordered"] is False


def test_a_two_valued_choice_moves_alike_either_way():
    knob = ChoiceKnob("O.accumulate", "cache_write", ("memory", "registers"), ordered=False)
    assert knob.ordered and knob.directions == ("+1", "-1") and knob.encoding_length == 1


@pytest.mark.parametrize("values, fragment", [([], "empty"), ([1, 2, 1], "repeated"),
                                              ([[1, 2]], "ints, strs"), ("abc", "sequence")])
def test_choice_knob_rejects_bad_values(values, fragment):
    with pytest.raises(ValueError, match=f"unroll knob 'U'.*{fragment}"):
        ChoiceKnob("U", "unroll", values)


def test_split_floors_keep_only_values_with_large_enough_factors():
    knob = SplitKnob("s", 112, 3, caps=(None, None, 16), floors=(None, None, 8))
    assert {value[-1] for value in knob.values} == {8, 14, 16}  # the divisors of 112 in 8..16
    assert all(value[-1] >= 8 for value in knob.values)
    with pytest.raises(ValueError, match="floors"):
        SplitKnob("s", 112, 2, caps=(None, 4), floors=(None, 8))


# ---------------------------------------------------------------- nearest values (carried-over configs)

def test_a_value_the_knob_has_is_its_own_nearest():
    knob = SplitKnob("x", 28, 3)
    assert knob.nearest_index((7, 2, 2)) == knob.index_of((7, 2, 2))


def test_a_split_of_another_extent_keeps_the_nearest_inner_factors():
    knob = SplitKnob("x", 14, 3, guarded=False)
    nearest = knob.values[knob.nearest_index((7, 2, 2))]   # a split of 28: (7, 1, 2) keeps the innermost 2
    assert nearest[1:] in ((1, 2), (2, 1), (2, 2)) and math.prod(nearest) == 14
    assert knob.values[knob.nearest_index([1, 1, 14])] == (1, 1, 14)   # JSON lists read back as tuples


def test_a_split_keeps_its_innermost_factor_before_the_others():
    # A 56 x 56 map's merged axis takes GMM's 32 x 32 column tiles: 32 lanes innermost divide 3136
    # (49 x 32), where 28 x 28 would be nearer by the sum of the two inner ratios.
    knob = SplitKnob("hw", 3136, 4, caps=(None, None, None, 32), guarded=False)
    assert knob.values[knob.nearest_index((1, 1, 32, 32))] == (2, 1, 49, 32)


def test_ordered_choices_are_near_by_ratio_and_unordered_ones_only_match():
    unroll = ChoiceKnob("unroll", "unroll", (0, 8, 32, 128, 512))
    assert unroll.values[unroll.nearest_index(100)] == 128
    accumulate = ChoiceKnob("accumulate", "cache_write", ("memory", "registers"), ordered=False)
    assert accumulate.nearest_index("registers") == 1
    order = ChoiceKnob("order", "reorder", (0, 1, 2, 3), ordered=False)
    with pytest.raises(ValueError, match="knob 'order': no value near 7"):
        order.nearest_index(7)
    with pytest.raises(ValueError, match="no value near 'tile'"):
        accumulate.nearest_index("tile")
