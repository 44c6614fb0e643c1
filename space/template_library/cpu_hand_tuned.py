"""The paper's hand-tuned CPU baselines for BCM and SHO: fixed, hand-picked tile factors (the
knobs have one value each), the inner axis vectorised and the tile unrolled; the only choice
left is whether one inner loop is unrolled."""

from flexsched.schedule import Fuse, Parallel, Reorder, Schedule, Split, Unroll, Vectorize

from ..template import register_template
from .cpu_linalg import register_blocked_1d
from .producers import producer_steps

UNROLL_CHOICES = (1, 0)  # hand-picked: unrolled; the other value lets a search check it


def _vector_factors(extent, vectors, lanes):
    """(outer, inner): inner holds `vectors` vectors of lanes (or the whole loop when shorter)."""
    inner = min(extent, vectors * lanes) if extent >= lanes else extent
    return -(-extent // inner), inner


def _fixed(cfg, name, value):
    return cfg.choice(name, (tuple(value),))


@register_template("BCM", name="hand_tuned", kinds=("cpu",), default=True)
def bcm_hand_tuned(cfg, info, target):
    """Fixed tiles: parallel rows, two vectors of rows in registers over all columns, one block unrolled."""
    node = info.node("O")
    (i,), (rk,) = node.spatial, node.reduce
    chunks, inner = _vector_factors(i.extent, 2, max(1, target.vector_lanes))
    middle = 2 if chunks % 2 == 0 else 1  # two register tiles per parallel task
    tile_i = _fixed(cfg, "tile_i", (chunks // middle, middle, inner))
    block = info.tensor("W").shape[-1]  # W is rows/block x cols/block x block
    tile_k = _fixed(cfg, "tile_rk", (rk.extent // block, block))
    unroll_k = cfg.choice("unroll_k", UNROLL_CHOICES)
    return Schedule(tuple(register_blocked_1d("O", i.name, rk.name, tile_i, tile_k, unroll_k)))


@register_template("SHO", name="hand_tuned", kinds=("cpu",), default=True)
def sho_hand_tuned(cfg, info, target):
    """Fixed tiles: padding at root, parallel rows, columns by 4 unrolled, channels by one vector."""
    node = info.node("O")
    b, h, w, c = (loop.name for loop in node.spatial)
    tile_c = _fixed(cfg, "tile_c", _vector_factors(node.spatial[3].extent, 1, max(1, target.vector_lanes)))
    width = node.spatial[2].extent
    tile_w = _fixed(cfg, "tile_w", (-(-width // min(4, width)), min(4, width)))
    unroll_w = cfg.choice("unroll_w", UNROLL_CHOICES)
    steps = producer_steps(info) + [
        Split("O", c, tile_c), Split("O", w, tile_w),
        Reorder("O", (b, h, f"{w}.0", f"{c}.0", f"{w}.1", f"{c}.1")),
        Fuse("O", (b, h)), Parallel("O", f"{b}+{h}"), Vectorize("O", f"{c}.1")]
    if unroll_w and tile_w[1] > 1:
        steps.append(Unroll("O", f"{w}.1"))
    return Schedule(tuple(steps))
