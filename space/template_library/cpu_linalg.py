"""CPU templates for the linear-algebra operators, in the structure of TVM's x86 dense schedule:
a register-blocked output tile accumulated over the whole reduction, its columns vectorised and
its rows unrolled, the outer tiles fused and run in parallel; a handful of split knobs."""

from flexsched.schedule import CacheWrite, ComputeAt, Fuse, Parallel, Reorder, Schedule, Split, Unroll, Vectorize

from ..template import register_template

# Rows of the register tile: with two vectors per row, eight rows fill 16 of the vector registers.
MAX_TILE_ROWS = 8
UNROLL_CHOICES = (0, 1)  # whether the inner reduce loop is unrolled


def _register_blocked_2d(cfg, target, node, rows, cols, reduce):
    """Steps of a 2-D output `node` (loops rows, cols: (name, extent)) summing over `reduce`:
    three-level row and column tiles, the innermost kept in registers over the whole reduction."""
    lanes = max(1, target.vector_lanes)
    (row, row_extent), (col, col_extent), (red, red_extent) = rows, cols, reduce
    tile_r = cfg.split("tile_" + row, row_extent, 3, caps=(None, None, MAX_TILE_ROWS))
    tile_c = cfg.split("tile_" + col, col_extent, 3, caps=(None, None, 2 * lanes),
                       floors=(None, None, min(lanes, col_extent)), guarded=col_extent % lanes != 0)
    tile_k = cfg.split("tile_" + red, red_extent, 2)
    unroll_k = cfg.choice("unroll_k", UNROLL_CHOICES)
    local = f"{node}.local"
    outer = f"{row}.0+{col}.0"
    steps = [CacheWrite(node, "local"),
             Split(node, row, tile_r), Split(node, col, tile_c),
             Reorder(node, (f"{row}.0", f"{col}.0", f"{row}.1", f"{col}.1", f"{row}.2", f"{col}.2")),
             Fuse(node, (f"{row}.0", f"{col}.0")), Parallel(node, outer),
             Vectorize(node, f"{col}.2"), Unroll(node, f"{row}.2"),
             Split(local, red, tile_k), Reorder(local, (f"{red}.0", f"{red}.1", row, col)),
             ComputeAt(local, node, f"{col}.1"),
             Vectorize(local, col), Unroll(local, row)]
    if unroll_k and tile_k[1] > 1:
        steps.append(Unroll(local, f"{red}.1"))
    return steps


@register_template("GMM", kinds=("cpu",), default=True)
def gmm_register_blocked(cfg, info, target):
    """Register-blocked GEMM: parallel outer tiles, a row x vector tile in registers over all of K."""
    node = info.node("O")
    (i, j), (rk,) = node.spatial, node.reduce
    steps = _register_blocked_2d(cfg, target, "O", (i.name, i.extent), (j.name, j.extent), (rk.name, rk.extent))
    return Schedule(tuple(steps))
