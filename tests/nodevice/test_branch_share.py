"""The share of loop iterations that take a branch, as the static CPU model counts it."""

from codegen.cpu_model import branch_share
from codegen.ir import loop_var
from flexsched.expr import as_expr, compare, logical


def loop(name):
    return loop_var(name, 64)


def test_a_tile_test_holds_at_all_but_the_last_tiles():
    # rows i0 * 132 + i2 * 6 .. + 5 of 256: whole at 42 of the 2 x 22 tiles
    whole = compare("<=", loop("i0") * as_expr(132) + loop("i2") * as_expr(6) + as_expr(5), as_expr(255))
    assert branch_share(whole, {"i0": 2, "i2": 22, "j": 4}) == 42 / 44


def test_a_conjunction_holds_where_both_parts_do():
    cond = logical("&", compare("<", loop("a"), as_expr(3)), compare(">=", loop("b"), as_expr(1)))
    assert branch_share(cond, {"a": 4, "b": 2}) == 3 / 8


def test_a_test_it_cannot_count_is_taken_always():
    unknown_loop = compare("<", loop("x"), as_expr(3))
    assert branch_share(unknown_loop, {"a": 4}) == 1.0
    not_affine = compare("<", loop("a") * loop("a"), as_expr(3))
    assert branch_share(not_affine, {"a": 4}) == 1.0
