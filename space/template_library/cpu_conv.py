"""CPU templates for the convolutions, in the structure of TVM's x86 direct conv2d schedule: a
register tile of output channels (rows, unrolled) by output columns (one or two vectors) kept in
registers over the whole reduction (input channels split in two, then the kernel taps), the
outer tiles fused with the other spatial loops and run in parallel. One helper serves every
convolution: plain, transposed, grouped, depthwise and dilated, in 1, 2 and 3 dimensions."""

from flexsched.schedule import CacheWrite, ComputeAt, Fuse, Parallel, Reorder, Schedule, Split, Unroll, Vectorize

from ..template import register_template
from .cpu_linalg import MAX_TILE_ROWS, UNROLL_CHOICES, vector_split
from .producers import producer_steps


def conv_register_blocked(cfg, info, target):
    """Register-blocked direct convolution: channels x vectorised columns held over rc, taps, rc.

    Knobs: the channel, column and input-channel tiles, and whether the last tap loop is unrolled."""
    node = info.node("O")
    b, k, *rest = node.spatial
    *middle, col = rest                  # the vector runs along the last (contiguous) output axis
    rc, *taps = node.reduce
    lanes = max(1, target.vector_lanes)
    tile_k = cfg.split("tile_k", k.extent, 3, caps=(None, None, MAX_TILE_ROWS))
    tile_col = vector_split(cfg, "tile_" + col.name, col.extent, lanes)
    tile_rc = cfg.split("tile_rc", rc.extent, 2)
    unroll_tap = cfg.choice("unroll_tap", UNROLL_CHOICES)  # TVM's unroll_kw
    kk, cc, mids = k.name, col.name, [loop.name for loop in middle]
    outer = (b.name, f"{kk}.0", *mids, f"{cc}.0")
    local = "O.local"
    steps = producer_steps(info) + [
        CacheWrite("O", "local"), Split("O", kk, tile_k), Split("O", cc, tile_col),
        Reorder("O", (*outer, f"{kk}.1", f"{cc}.1", f"{kk}.2", f"{cc}.2")),
        Fuse("O", outer), Parallel("O", "+".join(outer)),
        Vectorize("O", f"{cc}.2"), Unroll("O", f"{kk}.2"),
        ComputeAt(local, "O", f"{cc}.1"),
        Split(local, rc.name, tile_rc),
        # Length-1 loops of the tile first; then rc outer, the taps, rc inner, as TVM orders them.
        Reorder(local, (b.name, *mids, f"{rc.name}.0", *(t.name for t in taps), f"{rc.name}.1", kk, cc)),
        Vectorize(local, cc), Unroll(local, kk)]
    if unroll_tap and taps and taps[-1].extent > 1:
        steps.append(Unroll(local, taps[-1].name))
    return Schedule(tuple(steps))


for _op in ("C1D", "T1D", "C2D", "T2D", "C3D", "T3D", "GRP", "DEP", "DIL"):
    register_template(_op, name="conv_register_blocked", kinds=("cpu",), default=True)(conv_register_blocked)
