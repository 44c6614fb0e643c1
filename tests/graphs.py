"""Multi-node computations defined here, not in the library, and the points of a space that
stress lowering across nodes: producers attached inside their consumers, splits that pad their
loop (and so need a guard), inputs packed at every level, all at once.

The CPU, GPU and FPGA validity sweeps share them, so every back end promises the same thing:
every point of every space computes the reference's answer.
"""

import numpy as np

import flexsched as fs
from flexsched.ops.common import pad
from space.knobs import ChoiceKnob, SplitKnob

from cases import LocalTask


def depthwise_separable(C=4, H=9, W=11, K=6):
    """A padded depthwise 3x3 convolution feeding a 1x1 convolution: pad P, depthwise D, pointwise O."""
    I = fs.placeholder((1, C, H, W), name="I")
    Wd = fs.placeholder((C, 1, 3, 3), name="Wd")
    Wp = fs.placeholder((K, C, 1, 1), name="Wp")
    P = pad(I, (0, 0, 1, 1), ("n", "c", "h", "w"), name="P")
    r, s = fs.reduce_axis(3, "r"), fs.reduce_axis(3, "s")
    D = fs.compute((1, C, H, W), lambda n, c, h, w: fs.sum(P[n, c, h + r, w + s] * Wd[c, 0, r, s], axis=[r, s]),
                   name="D", axis_names=("n", "c", "h", "w"))
    rc = fs.reduce_axis(C, "rc")
    O = fs.compute((1, K, H, W), lambda n, k, h, w: fs.sum(D[n, rc, h, w] * Wp[k, rc, 0, 0], axis=rc),
                   name="O", axis_names=("n", "k", "h", "w"))
    return LocalTask("depthwise_separable", (I, Wd, Wp), (O,))


def conv_bias_relu(C=3, H=7, W=9, K=5):
    """A padded 3x3 convolution, a per-channel bias and a ReLU: four nodes."""
    I = fs.placeholder((1, C, H, W), name="I")
    Wt = fs.placeholder((K, C, 3, 3), name="Wt")
    bias = fs.placeholder((K,), name="bias")
    P = pad(I, (0, 0, 1, 1), ("n", "c", "h", "w"), name="P")
    rc, r, s = fs.reduce_axis(C, "rc"), fs.reduce_axis(3, "r"), fs.reduce_axis(3, "s")
    conv = fs.compute((1, K, H, W), lambda n, k, h, w: fs.sum(P[n, rc, h + r, w + s] * Wt[k, rc, r, s],
                                                              axis=[rc, r, s]), name="conv")
    biased = fs.compute((1, K, H, W), lambda n, k, h, w: conv[n, k, h, w] + bias[k], name="biased")
    relu = fs.compute((1, K, H, W), lambda n, k, h, w: fs.max(biased[n, k, h, w], 0.0), name="relu")
    return LocalTask("conv_bias_relu", (I, Wt, bias), (relu,))


def softmax_chain(N=9, M=37):
    """Softmax over the rows of X as four nodes: row maximum, shifted exponent, row sum, quotient."""
    X = fs.placeholder((N, M), name="X")
    j, q = fs.reduce_axis(M, "j"), fs.reduce_axis(M, "q")
    row_max = fs.compute((N,), lambda i: fs.max(X[i, j], axis=j), name="row_max")
    E = fs.compute((N, M), lambda i, c: fs.exp(X[i, c] - row_max[i]), name="E")
    total = fs.compute((N,), lambda i: fs.sum(E[i, q], axis=q), name="total")
    S = fs.compute((N, M), lambda i, c: E[i, c] / total[i], name="S")
    return LocalTask("softmax", (X,), (S,))


def matmul_relu():
    A, B = fs.placeholder((19, 23), name="A"), fs.placeholder((23, 21), name="B")
    k = fs.reduce_axis(23, "k")
    M = fs.compute((19, 21), lambda i, j: fs.sum(A[i, k] * B[k, j], axis=k), name="M")
    return LocalTask("matmul_relu", (A, B), (fs.compute((19, 21), lambda i, j: fs.max(M[i, j], 0.0), name="R"),))


def stencil():
    X = fs.placeholder((17, 15), name="X")
    return LocalTask("stencil", (X,), (fs.compute((15, 13), lambda i, j: (X[i, j + 1] + X[i + 2, j + 1] + X[i + 1, j]
                                                                        + X[i + 1, j + 2]) * 0.25, name="S"),))


def max_pooling():
    """3x3 max pooling with stride 2 and a padding node of -inf, over 1 x 5 x 13 x 11."""
    I = fs.placeholder((1, 5, 13, 11), name="I")
    P = fs.compute((1, 5, 15, 13),
                   lambda b, c, h, w: fs.select(fs.all_of(h >= 1, h < 14, w >= 1, w < 12), I[b, c, h - 1, w - 1],
                                                float("-inf")), name="P")
    rh, rw = fs.reduce_axis(3, "rh"), fs.reduce_axis(3, "rw")
    O = fs.compute((1, 5, 7, 6), lambda b, c, h, w: fs.max(P[b, c, h * 2 + rh, w * 2 + rw], axis=[rh, rw]), name="O")
    return LocalTask("maxpool", (I,), (O,))


GRAPHS = {"depthwise_separable": depthwise_separable, "conv_bias_relu": conv_bias_relu,
          "softmax": softmax_chain, "matmul_relu": matmul_relu, "stencil": stencil, "maxpool": max_pooling}


def stress_points(space, count, seed):
    """Random points with every producer attached inside its consumer where it may be, every
    split that can pad its loop padded, and every input packed somewhere: the combination whose
    interactions lowering must get right."""
    rng = np.random.default_rng(seed)
    points = []
    for _ in range(count):
        point = list(space.random_point(rng))
        for position, knob in enumerate(space.knobs):
            if isinstance(knob, SplitKnob):
                guarded = [index for index in range(knob.num_values) if knob.is_guarded(index)]
                if guarded:
                    point[position] = int(rng.choice(guarded))
            elif knob.kind == "attach" and "at" in knob.values:
                point[position] = knob.values.index("at")
            elif knob.kind == "cache_read":
                point[position] = int(rng.integers(1, knob.num_values)) if knob.num_values > 1 else 0
        points.append(tuple(point))
    return points


def covering_points(space, seed):
    """For every value of every choice knob, a random point that takes it."""
    rng = np.random.default_rng(seed)
    points = []
    for position, knob in enumerate(space.knobs):
        if isinstance(knob, ChoiceKnob):
            for index in range(knob.num_values):
                point = list(space.random_point(rng))
                point[position] = index
                points.append(tuple(point))
    return points


# ---------------------------------------------------------------- random small graphs

def _elementwise(prev, how, tag):
    ops = {"affine": lambda x: x * 2.0 + 1.0, "relu": lambda x: fs.max(x, 0.0), "exp": lambda x: fs.exp(-fs.abs(x))}
    return fs.compute(prev.shape, lambda *idx: ops[how](prev[idx]), name=f"{how}{tag}")


def _pad_last(prev, width, tag):
    pads = (0,) * (len(prev.shape) - 1) + (width,)
    return pad(prev, pads, tuple("abcd"[:len(prev.shape)]), name=f"padded{tag}")


def _shift_sum(prev, tag):
    *lead, last = prev.shape
    return fs.compute((*lead, last - 1), lambda *idx: prev[idx] + prev[(*idx[:-1], idx[-1] + 1)], name=f"shifted{tag}")


def _row_centre(prev, tag):
    *lead, last = prev.shape
    k = fs.reduce_axis(last, "k")
    total = fs.compute(tuple(lead), lambda *idx: fs.sum(prev[(*idx, k)], axis=k), name=f"row_sum{tag}")
    return fs.compute(prev.shape, lambda *idx: prev[idx] - total[idx[:-1]] * (1.0 / last), name=f"centred{tag}")


def _matmul(prev, width, inputs, tag):
    *lead, last = prev.shape
    W = fs.placeholder((last, width), name=f"W{tag}")
    inputs.append(W)
    k = fs.reduce_axis(last, "k")
    return fs.compute((*lead, width), lambda *idx: fs.sum(prev[(*idx[:-1], k)] * W[k, idx[-1]], axis=k),
                      name=f"product{tag}")


def build_small_graph(shape, steps):
    """A LocalTask from an input shape and steps such as ("pad", 2) or ("matmul", 5); a step
    that does not fit the shape so far (a shift of a single column) is left out."""
    X = fs.placeholder(tuple(shape), name="X")
    inputs, prev = [X], X
    for tag, (kind, argument) in enumerate(steps):
        if kind == "elementwise":
            prev = _elementwise(prev, argument, tag)
        elif kind == "pad":
            prev = _pad_last(prev, argument, tag)
        elif kind == "shift" and prev.shape[-1] >= 2:
            prev = _shift_sum(prev, tag)
        elif kind == "centre" and len(prev.shape) >= 2:
            prev = _row_centre(prev, tag)
        elif kind == "matmul":
            prev = _matmul(prev, argument, inputs, tag)
    if prev is X:
        prev = _elementwise(X, "affine", "")
    return LocalTask("random_graph", inputs, (prev,))


def small_graphs():
    """A hypothesis strategy of random small graphs (1-3 steps over a 1-3 dimensional input)."""
    from hypothesis import strategies as st

    step = st.one_of(st.tuples(st.just("elementwise"), st.sampled_from(["affine", "relu", "exp"])),
                     st.tuples(st.just("pad"), st.integers(1, 2)), st.tuples(st.just("shift"), st.none()),
                     st.tuples(st.just("centre"), st.none()), st.tuples(st.just("matmul"), st.integers(1, 9)))
    shape = st.lists(st.integers(1, 11), min_size=1, max_size=3)
    return st.builds(build_small_graph, shape, st.lists(step, min_size=1, max_size=3))


# ---------------------------------------------------------------- checking loop IR

def task_named(name):
    """A library operator at its small test shape, or a graph defined here."""
    from flexsched.registry import get_task

    from cases import SHAPES

    return GRAPHS[name]() if name in GRAPHS else get_task(name, *SHAPES[name])


def assert_interprets_to_reference(task, func, schedule, seed=0):
    """The loop IR run by the interpreter (which raises on a race, a divergent barrier or an
    out-of-bounds access) computes the reference's outputs."""
    from codegen.interpret import run

    inputs = task.random_inputs(seed)
    # A kernel whose axes merged declares its parameters merged: the same memory, reshaped.
    arrays = [*(a.reshape(b.shape) for a, b in zip(inputs, func.params)),
              *(np.empty(b.shape, dtype=b.dtype) for b in func.params[len(inputs):])]
    run(func, arrays)
    for out, ref in zip(arrays[len(inputs):], task.evaluate(*inputs)):
        out = out.reshape(ref.shape)
        scale = max(1.0, float(np.abs(ref[np.isfinite(ref)]).max()))
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * scale, err_msg=f"{task} under\n{schedule.to_json()}")
