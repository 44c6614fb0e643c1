"""The shift operation (ShiftNet): each channel moved by a fixed offset, no parameters."""

from ..registry import register_task
from ..tensor import compute, placeholder
from .common import check_at_least, pad


@register_task("SHO")
def sho(B, H, W, C, k):
    """Shift (NHWC): channel c moves by (s // k - k//2, s % k - k//2) with s = c mod k*k."""
    check_at_least(1, B=B, H=H, W=W, C=C, k=k)
    I = placeholder((B, H, W, C), name="I")  # noqa: E741
    half = k // 2
    P = pad(I, (0, half, half, 0), ("b", "h", "w", "c"))
    taps = k * k
    O = compute((B, H, W, C),
                lambda b, h, w, c: P[b, h + (c % taps) // k, w + (c % taps) % k, c], name="O")
    return I, O
