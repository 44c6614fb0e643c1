"""Convolutions in 1, 2 and 3 spatial dimensions: plain, transposed, grouped, depthwise, dilated.

Layouts follow PyTorch (NC + spatial); every padded input is its own node, and a
transposed convolution is expand (insert stride-1 zeros), pad, then a convolution with
the flipped kernel, as in the paper's mini-graphs.
"""

from ..functions import all_of, select, sum
from ..registry import register_task
from ..tensor import compute, placeholder, reduce_axis
from .common import check_at_least, pad, require

_SPATIAL_NAMES = {1: ("l",), 2: ("h", "w"), 3: ("d", "h", "w")}


def _output_size(field, size, kernel, stride, padding, dilation):
    out = (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    require(out >= 1, f"argument '{field}'={size} is too small for kernel {kernel} with padding "
                      f"{padding} and dilation {dilation}: no output")
    return out


def conv_nd(I, W, stride=1, padding=0, dilation=1, groups=1):  # noqa: E741
    """O[b,k,x..] = sum_rc,r.. pad(I)[b, group(k)*Cg + rc, x*stride + r*dilation ..] W[k,rc,r..]."""
    batch, channels, *sizes = I.shape
    out_channels, group_channels, *kernel = W.shape
    names = _SPATIAL_NAMES[len(sizes)]
    P = pad(I, (0, 0, *[padding] * len(sizes)), ("b", "c", *names))
    out_sizes = [_output_size(n.upper(), size, k, stride, padding, dilation)
                 for n, size, k in zip(names, sizes, kernel)]
    rc = reduce_axis(group_channels, "rc")
    taps = [reduce_axis(k, f"r{n}") for n, k in zip(names, kernel)]
    per_group = out_channels // groups

    def body(b, k, *xs):
        channel = rc if groups == 1 else (k // per_group) * group_channels + rc
        window = [x * stride + r * dilation for x, r in zip(xs, taps)]
        return sum(P[(b, channel, *window)] * W[(k, rc, *taps)], axis=[rc, *taps])

    return compute((batch, out_channels, *out_sizes), body, name="O", axis_names=("b", "k", *names))


def conv_transpose_nd(I, W, stride=1, padding=0):  # noqa: E741
    """PyTorch's conv_transpose: expand by stride, pad by k-1-padding, convolve with W flipped."""
    batch, channels, *sizes = I.shape
    _, out_channels, *kernel = W.shape
    names = _SPATIAL_NAMES[len(sizes)]
    for n, k in zip(names, kernel):
        require(padding <= k - 1, f"argument 'pad'={padding} must be at most k-1={k - 1} "
                                  f"for a transposed convolution")
    expanded = [(size - 1) * stride + 1 for size in sizes]

    def expand_body(b, c, *xs):
        source = I[(b, c, *[x // stride for x in xs])]
        if stride == 1:
            return source
        return select(all_of(*[x % stride == 0 for x in xs]), source, 0.0)

    E = compute((batch, channels, *expanded), expand_body, name="expand", axis_names=("b", "c", *names))
    P = pad(E, (0, 0, *[k - 1 - padding for k in kernel]), ("b", "c", *names))
    out_sizes = [e + 2 * (k - 1 - padding) - k + 1 for e, k in zip(expanded, kernel)]
    rc = reduce_axis(channels, "rc")
    taps = [reduce_axis(k, f"r{n}") for n, k in zip(names, kernel)]

    def body(b, k, *xs):
        flipped = [kk - 1 - r for kk, r in zip(kernel, taps)]
        return sum(P[(b, rc, *[x + r for x, r in zip(xs, taps)])] * W[(rc, k, *flipped)], axis=[rc, *taps])

    return compute((batch, out_channels, *out_sizes), body, name="O", axis_names=("b", "k", *names))


def _conv_task(B, C, sizes, K, k, stride, pad_, dilation=1, groups=1):
    """Placeholders I, W and the output of a (grouped, dilated) convolution."""
    check_at_least(1, B=B, C=C, K=K, k=k, stride=stride, dilation=dilation, groups=groups)
    check_at_least(1, **sizes)
    check_at_least(0, pad=pad_)
    require(C % groups == 0, f"argument 'C'={C} is not a multiple of 'groups'={groups}")
    require(K % groups == 0, f"argument 'K'={K} is not a multiple of 'groups'={groups}")
    I = placeholder((B, C, *sizes.values()), name="I")  # noqa: E741
    W = placeholder((K, C // groups, *[k] * len(sizes)), name="W")
    return I, W, conv_nd(I, W, stride, pad_, dilation, groups)


def _transposed_task(B, C, sizes, K, k, stride, pad_):
    check_at_least(1, B=B, C=C, K=K, k=k, stride=stride)
    check_at_least(1, **sizes)
    check_at_least(0, pad=pad_)
    I = placeholder((B, C, *sizes.values()), name="I")  # noqa: E741
    W = placeholder((C, K, *[k] * len(sizes)), name="W")
    return I, W, conv_transpose_nd(I, W, stride, pad_)


@register_task("C1D")
def c1d(B, C, L, K, k, stride=1, pad=0, dilation=1):
    """1D convolution: O[b,k,l] = sum_rc,rl pad(I)[b,rc,l*stride+rl*dilation] W[k,rc,rl]."""
    return _conv_task(B, C, {"L": L}, K, k, stride, pad, dilation)


@register_task("T1D")
def t1d(B, C, L, K, k, stride=1, pad=0):
    """Transposed 1D convolution (PyTorch conv_transpose1d, weight C x K x k)."""
    return _transposed_task(B, C, {"L": L}, K, k, stride, pad)


@register_task("C2D")
def c2d(B, C, H, W, K, k, stride=1, pad=0, dilation=1):
    """2D convolution: O[b,k,h,w] = sum_rc,rh,rw pad(I)[b,rc,h*s+rh,w*s+rw] W[k,rc,rh,rw]."""
    return _conv_task(B, C, {"H": H, "W": W}, K, k, stride, pad, dilation)


@register_task("T2D")
def t2d(B, C, H, W, K, k, stride=1, pad=0):
    """Transposed 2D convolution (PyTorch conv_transpose2d, weight C x K x k x k)."""
    return _transposed_task(B, C, {"H": H, "W": W}, K, k, stride, pad)


@register_task("C3D")
def c3d(B, C, D, H, W, K, k, stride=1, pad=0, dilation=1):
    """3D convolution over depth, height and width."""
    return _conv_task(B, C, {"D": D, "H": H, "W": W}, K, k, stride, pad, dilation)


@register_task("T3D")
def t3d(B, C, D, H, W, K, k, stride=1, pad=0):
    """Transposed 3D convolution (PyTorch conv_transpose3d)."""
    return _transposed_task(B, C, {"D": D, "H": H, "W": W}, K, k, stride, pad)


@register_task("GRP")
def grp(B, C, H, W, K, k, stride=1, pad=0, groups=1):
    """Group convolution: channels split into `groups` independent convolutions."""
    return _conv_task(B, C, {"H": H, "W": W}, K, k, stride, pad, groups=groups)


@register_task("DEP")
def dep(B, C, H, W, multiplier, k, stride=1, pad=0):
    """Depthwise convolution: `multiplier` filters per input channel (groups = C)."""
    check_at_least(1, multiplier=multiplier)
    return _conv_task(B, C, {"H": H, "W": W}, C * multiplier, k, stride, pad, groups=C)


@register_task("DIL")
def dil(B, C, H, W, K, k, stride=1, pad=0, dilation=2):
    """Dilated 2D convolution: kernel taps spaced `dilation` apart."""
    return _conv_task(B, C, {"H": H, "W": W}, K, k, stride, pad, dilation)
