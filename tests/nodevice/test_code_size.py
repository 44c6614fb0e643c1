"""The code-size bound rolls unrolled loops back, outermost and largest first."""

from codegen.code_size import emitted_copies, roll_largest_unrolled
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
