"""Index arithmetic (flexsched/affine.py): the regions lowering infers must contain every index
the loops inside reach, and like terms must collect."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen.ir import loop_var
from flexsched.affine import interval, monotone_span, simplify
from flexsched.numpy_expr import eval_expr


@settings(max_examples=200, deadline=None)
@given(outer_scale=st.integers(0, 9), inner_scale=st.integers(0, 5), offset=st.integers(0, 7),
       divisor=st.integers(1, 7), second=st.integers(1, 4), inner_extent=st.integers(1, 12))
def test_a_monotone_index_stays_within_its_span(outer_scale, inner_scale, offset, divisor, second, inner_extent):
    o, i, j = loop_var("o", 13), loop_var("i", inner_extent), loop_var("j", 3)
    index = ((o * outer_scale + i * inner_scale + offset) // divisor) * second + j // 2
    origin, count = monotone_span(index, {i.name, j.name})
    grid_o, grid_i, grid_j = np.meshgrid(np.arange(13), np.arange(inner_extent), np.arange(3), indexing="ij")
    env = {id(o): grid_o, id(i): grid_i, id(j): grid_j}
    values = eval_expr(index, env, None)
    start = np.broadcast_to(eval_expr(origin, env, None), values.shape)
    assert (values >= start).all() and (values < start + count).all()


def test_a_modulo_or_a_subtracted_inner_loop_has_no_monotone_span():
    o, i = loop_var("o", 8), loop_var("i", 4)
    assert monotone_span((o + i) % 3, {i.name}) is None
    assert monotone_span(o - i, {i.name}) is None
    assert monotone_span(o * 2 - 1, {i.name})[1] == 1


def test_like_terms_collect_so_unrolled_indices_are_constants():
    x, k = loop_var("x", 60), loop_var("k", 2)
    assert str(simplify(x // 15 % 4 * 2 + k - x // 15 % 4 * 2)) == "k"
    assert interval(simplify((x // 5 % 3 * 2 + k) * 2 + 3 - 1)) == (2, 4 * 2 + 2 + 2)


def test_grouped_convolutions_stage_only_the_channels_their_tile_reads():
    from analysis import analyze
    from codegen.ir import Allocate, walk_stmts
    from codegen.kernel import lower_for
    from flexsched.registry import get_task
    from space import generate
    from space.config import Config

    task = get_task("DEP", 1, 16, 28, 28, 6, 3, 2, 1)   # input channel k // 6
    space = generate(analyze(task), "cuda")
    config = space.config(space.random_point(0)).to_dict()
    config.update({"O.split.k": (24, 1, 2, 2), "O.cache": 1})
    _, lowered = lower_for(task, space.schedule(space.point(Config.from_dict(config))), "cuda")
    (staged,) = [n.buffer for n in walk_stmts(lowered.func.body)
                 if isinstance(n, Allocate) and n.buffer.name == "I_shared"]
    assert staged.shape[1] == 2   # 4 output channels read 1 or 2 input channels, not all 16
