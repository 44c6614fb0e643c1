"""The code-size bound rolls unrolled loops back, outermost and largest first."""

from codegen.code_size import ROLLED_LOOP_INSTRUCTIONS, emitted_copies, roll_largest_unrolled, roll_to_budget
from codegen.ir import Buffer, For, Seq, Store, loop_var
from flexsched.expr import Load

A = Buffer("A", (64, 64), "float32", "global")


def nest(kinds_and_extents, leaf):
    """Loops outer to inner around leaf(vars)."""
    variables = [loop_var(f"v{depth}", extent) for depth, (_, extent) in enumerate(kinds_and_extents)]
    body = leaf(variables)
    for var, (kind, extent) in reversed(list(zip(variables, kinds_and_extents))):
        body = For(var, extent, kind, body)
    return body


def store(variables):
    i, j = variables[-2], variables[-1]
    return Store(A, (i, j), Load(A, (i, j), "float32") + 1.0)


def test_unrolled_loops_multiply_a_body_and_vector_bodies_count_once():
    stmt = nest([("serial", 4), ("unrolled", 8), ("unrolled", 2), ("vectorized", 16)], store)
    assert emitted_copies(stmt) == 16


def test_the_outermost_loop_of_the_largest_nest_is_rolled_first():
    small = nest([("unrolled", 2), ("vectorized", 16)], store)
    large = nest([("unrolled", 8), ("unrolled", 4), ("vectorized", 16)], store)
    rolled = roll_largest_unrolled(Seq((small, large)))
    assert rolled.stmts[0] is small
    assert rolled.stmts[1].kind == "serial" and rolled.stmts[1].body.kind == "unrolled"
    assert emitted_copies(rolled) == 2 + 4


def test_nothing_left_to_roll():
    assert roll_largest_unrolled(nest([("serial", 8), ("vectorized", 16)], store)) is None


def test_rolling_stops_once_the_measured_costs_say_the_rest_fits():
    stmt = nest([("unrolled", 8), ("unrolled", 4), ("vectorized", 16)], store)
    outer, inner = stmt, stmt.body
    # An emission of 1,000 instructions, 960 of them the outer loop's, 120 each time it laid out the inner.
    costs = {outer: [960, 1], inner: [960, 8]}
    fits = roll_to_budget(stmt, 1000, 1000 - 960 * 7 // 8 + ROLLED_LOOP_INSTRUCTIONS, costs, per_copy=1)
    assert (fits.kind, fits.body.kind) == ("serial", "unrolled") and fits.body is inner
    # A step of the outer loop lays out the inner once: rolling it too saves three of its four steps.
    tighter = 1000 - 960 * 7 // 8 + ROLLED_LOOP_INSTRUCTIONS - 120 * 3 // 4 + ROLLED_LOOP_INSTRUCTIONS
    both = roll_to_budget(stmt, 1000, tighter, costs, per_copy=1)
    assert (both.kind, both.body.kind) == ("serial", "serial")
    assert roll_to_budget(stmt, 1000, 1000, costs, per_copy=1) is stmt


def test_a_loop_the_emission_did_not_reach_is_priced_by_its_stores():
    first = nest([("unrolled", 4), ("vectorized", 16)], store)
    second = nest([("unrolled", 16), ("vectorized", 16)], store)
    stmt = Seq((first, second))
    # Only the first nest was laid out (cheaply) before emission stopped; the second, the larger,
    # is rolled first, priced at 50 instructions a store: that alone fits.
    rolled = roll_to_budget(stmt, 1000, 1000 - 50 * 15 + ROLLED_LOOP_INSTRUCTIONS, {first: [8, 1]}, per_copy=50)
    assert rolled.stmts[0] is first and rolled.stmts[1].kind == "serial"
    # Priced at 10 a store it does not: the first nest goes too, and then nothing is left to roll.
    rolled = roll_to_budget(stmt, 1000, 100, {first: [8, 1]}, per_copy=10)
    assert [part.kind for part in rolled.stmts] == ["serial", "serial"]
