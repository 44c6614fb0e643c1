"""CPU templates for the linear-algebra operators, in the structure of TVM's x86 dense schedule:
a register-blocked output tile accumulated over the whole reduction, its columns vectorised and
its rows unrolled, the outer tiles fused and run in parallel; a handful of split knobs."""

from flexsched.schedule import CacheWrite, ComputeAt, Fuse, Parallel, Reorder, Schedule, Split, Unroll, Vectorize

from ..template import register_template

# Rows of the register tile: with two vectors per row, eight rows fill 16 of the vector registers.
MAX_TILE_ROWS = 8
UNROLL_CHOICES = (0, 1)  # whether the inner reduce loop is unrolled


def vector_split(cfg, name, extent, lanes, parts=3):
    """A split whose innermost factor is one or two vectors (the whole loop when shorter)."""
    return cfg.split(name, extent, parts, caps=(None,) * (parts - 1) + (2 * lanes,),
                     floors=(None,) * (parts - 1) + (min(lanes, extent),), guarded=extent % lanes != 0)


def _tile_reduction(local, reduces, tile_k, unroll_k, tile):
    """The write cache's steps: the first reduce loop split in two, the others inside it, then
    the tile's loops (the last one vectorised, the others unrolled)."""
    red = reduces[0]
    steps = [Split(local, red, tile_k),
             Reorder(local, (f"{red}.0", f"{red}.1", *reduces[1:], *tile)),
             Vectorize(local, tile[-1])] + [Unroll(local, name) for name in tile[:-1]]
    if unroll_k and tile_k[1] > 1:
        steps.append(Unroll(local, f"{red}.1"))
    return steps


def _register_blocked_2d(cfg, target, node, rows, cols, reduces):
    """Steps of a 2-D output `node` (loops rows, cols: (name, extent)) summing over `reduces`:
    three-level row and column tiles, the innermost kept in registers over the whole reduction."""
    lanes = max(1, target.vector_lanes)
    (row, row_extent), (col, col_extent), (red, red_extent) = rows, cols, reduces[0]
    tile_r = cfg.split("tile_" + row, row_extent, 3, caps=(None, None, MAX_TILE_ROWS))
    tile_c = vector_split(cfg, "tile_" + col, col_extent, lanes)
    tile_k = cfg.split("tile_" + red, red_extent, 2)
    unroll_k = cfg.choice("unroll_k", UNROLL_CHOICES)
    local = f"{node}.local"
    outer = f"{row}.0+{col}.0"
    steps = [CacheWrite(node, "local"),
             Split(node, row, tile_r), Split(node, col, tile_c),
             Reorder(node, (f"{row}.0", f"{col}.0", f"{row}.1", f"{col}.1", f"{row}.2", f"{col}.2")),
             Fuse(node, (f"{row}.0", f"{col}.0")), Parallel(node, outer),
             Vectorize(node, f"{col}.2"), Unroll(node, f"{row}.2"),
             ComputeAt(local, node, f"{col}.1")]
    return steps + _tile_reduction(local, [name for name, _ in reduces], tile_k, unroll_k, (row, col))


def register_blocked_1d(node, row, red, tile_i, tile_k, unroll_k):
    """Steps of a 1-D output summing over `red`: parallel outer tiles, a tile of one or two
    vectors accumulated in registers over the whole reduction."""
    local = f"{node}.local"
    steps = [CacheWrite(node, "local"), Split(node, row, tile_i),
             Parallel(node, f"{row}.0"), Vectorize(node, f"{row}.2"),
             ComputeAt(local, node, f"{row}.1")]
    return steps + _tile_reduction(local, [red], tile_k, unroll_k, (row,))


@register_template("GMM", kinds=("cpu",), default=True)
def gmm_register_blocked(cfg, info, target):
    """Register-blocked GEMM: parallel outer tiles, a row x vector tile in registers over all of K."""
    node = info.node("O")
    (i, j), (rk,) = node.spatial, node.reduce
    steps = _register_blocked_2d(cfg, target, "O", (i.name, i.extent), (j.name, j.extent), [(rk.name, rk.extent)])
    return Schedule(tuple(steps))


@register_template("BIL", kinds=("cpu",), default=True)
def bil_register_blocked(cfg, info, target):
    """Register-blocked bilinear form: GEMM's tile over (i, j), summed over k (split) then l."""
    node = info.node("O")
    (i, j), reduces = node.spatial, node.reduce
    steps = _register_blocked_2d(cfg, target, "O", (i.name, i.extent), (j.name, j.extent),
                                 [(loop.name, loop.extent) for loop in reduces])
    return Schedule(tuple(steps))


@register_template("GMV", kinds=("cpu",), default=True)
def gmv_register_blocked(cfg, info, target):
    """Matrix-vector: parallel row tiles, one or two vectors of rows in registers over all of K.

    Without rfactor the reduction cannot be vectorised, so the vector runs over rows of A (strided
    loads); each row of the tile still reads B[k] once per reduce step."""
    node = info.node("O")
    (i,), (rk,) = node.spatial, node.reduce
    tile_i = vector_split(cfg, "tile_" + i.name, i.extent, max(1, target.vector_lanes))
    tile_k = cfg.split("tile_" + rk.name, rk.extent, 2)
    unroll_k = cfg.choice("unroll_k", UNROLL_CHOICES)
    return Schedule(tuple(register_blocked_1d("O", i.name, rk.name, tile_i, tile_k, unroll_k)))
