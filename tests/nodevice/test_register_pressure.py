"""Counting the loads an unrolled reduction's steps share (codegen.register_pressure), on loop IR made
by hand: a register tile of `width` pixels by one vector of channels, its filter taps unrolled."""

import pytest

from codegen.ir import Buffer, For, IfThenElse, Store, loop_var
from codegen.register_pressure import shared_load_registers
from flexsched.expr import Binary, Compare, Const, Load


def _int(value):
    return Const(value, "int64")


def tile_loop(width, taps, stride, lanes=8, guard=False):
    """for rw (unrolled taps): for w (unrolled width): for k (vectorized lanes):
    tile[w, k] += input[stride * w + rw] * weight[rw, k]; the tile's body under a guard if asked."""
    rw, w, k = loop_var("rw", taps), loop_var("w", width), loop_var("k", lanes)
    tile = Buffer("tile", (width, lanes), "float32", "local")
    source = Buffer("input", (stride * width + taps,), "float32")
    weight = Buffer("weight", (taps, lanes), "float32")
    column = Binary("+", Binary("*", _int(stride), w, "int64"), rw, "int64")
    product = Binary("*", Load(source, (column,), "float32"), Load(weight, (rw, k), "float32"), "float32")
    store = Store(tile, (w, k), Binary("+", Load(tile, (w, k), "float32"), product, "float32"))
    body = For(w, width, "unrolled", For(k, lanes, "vectorized", store))
    if guard:
        body = IfThenElse(Compare("<", rw, _int(taps), "bool"), body)
    return For(rw, taps, "unrolled", body), tile


@pytest.mark.parametrize("guard", [False, True])
def test_a_stride_2_tile_shares_the_columns_that_two_taps_read(guard):
    # 8 pixels at stride 2 over 7 taps read columns 0..20; columns 2..18 are read by two or more taps
    # (each a broadcast, one register); the weight's vectors differ at every tap.
    loop, tile = tile_loop(width=8, taps=7, stride=2, guard=guard)
    assert shared_load_registers(loop, register_lanes=8, skip=(tile,)) == 17


def test_a_stride_1_tile_shares_all_but_its_first_and_last_column():
    loop, tile = tile_loop(width=8, taps=3, stride=1)
    assert shared_load_registers(loop, register_lanes=8, skip=(tile,)) == 8


def test_the_accumulators_themselves_are_left_out_only_when_asked():
    loop, tile = tile_loop(width=4, taps=3, stride=1)
    # Every tap reads the whole tile again: 4 rows of one vector each.
    assert shared_load_registers(loop, register_lanes=8) == shared_load_registers(loop, 8, skip=(tile,)) + 4


def test_a_vector_load_shared_by_two_steps_counts_its_registers():
    # input[k + rw] along the vectorised loop: 16 lanes are two 8-lane registers; 3 taps share nothing
    # (each tap's vector starts one element further), so only a tap-independent load is shared.
    rw, k = loop_var("rw", 3), loop_var("k", 16)
    tile = Buffer("tile", (16,), "float32", "local")
    source = Buffer("input", (32,), "float32")
    bias = Buffer("bias", (16,), "float32")
    shifted = Load(source, (Binary("+", k, rw, "int64"),), "float32")
    value = Binary("+", Load(tile, (k,), "float32"),
                   Binary("*", shifted, Load(bias, (k,), "float32"), "float32"), "float32")
    loop = For(rw, 3, "unrolled", For(k, 16, "vectorized", Store(tile, (k,), value)))
    assert shared_load_registers(loop, register_lanes=8, skip=(tile,)) == 2
