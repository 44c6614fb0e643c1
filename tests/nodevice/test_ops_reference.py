"""The operator library (flexsched/ops) checked against independent implementations.

Every registered operator is built with small, awkward shapes (odd and prime extents,
stride 2, padding, dilation, groups, batch 2, ...), evaluated with the reference
evaluator on seeded random float32 inputs, and compared to an implementation written
here without flexsched: torch.nn.functional in float64 for the matrix and convolution
operators, explicit numpy loops for the block-circulant matrix (BCM) and the shift
operator (SHO).
"""

import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from flexsched.registry import get_task, list_tasks

OPERATORS = ("GMV", "GMM", "BIL", "C1D", "T1D", "C2D", "T2D", "C3D", "T3D",
             "GRP", "DEP", "DIL", "BCM", "SHO")


# ---------------------------------------------------------------------------
# Independent implementations. Each takes the inputs as float64 torch tensors,
# in the order of task.inputs, followed by the task's positional arguments, and
# returns the expected output (torch tensor or numpy array).
# ---------------------------------------------------------------------------

def ref_gmv(A, B, N, K):
    return A @ B


def ref_gmm(A, B, M, K, N):
    return A @ B


def ref_bil(A, B, C, N, K, M, L):
    return F.bilinear(A, C, B)


def ref_c1d(I, W, B, C, L, K, k, stride=1, pad=0, dilation=1):
    return F.conv1d(I, W, stride=stride, padding=pad, dilation=dilation)


def ref_t1d(I, W, B, C, L, K, k, stride=1, pad=0):
    return F.conv_transpose1d(I, W, stride=stride, padding=pad)


def ref_c2d(I, W, B, C, H, Wd, K, k, stride=1, pad=0, dilation=1):
    return F.conv2d(I, W, stride=stride, padding=pad, dilation=dilation)


def ref_t2d(I, W, B, C, H, Wd, K, k, stride=1, pad=0):
    return F.conv_transpose2d(I, W, stride=stride, padding=pad)


def ref_c3d(I, W, B, C, D, H, Wd, K, k, stride=1, pad=0, dilation=1):
    return F.conv3d(I, W, stride=stride, padding=pad, dilation=dilation)


def ref_t3d(I, W, B, C, D, H, Wd, K, k, stride=1, pad=0):
    return F.conv_transpose3d(I, W, stride=stride, padding=pad)


def ref_grp(I, W, B, C, H, Wd, K, k, stride=1, pad=0, groups=1):
    return F.conv2d(I, W, stride=stride, padding=pad, groups=groups)


def ref_dep(I, W, B, C, H, Wd, multiplier, k, stride=1, pad=0):
    return F.conv2d(I, W, stride=stride, padding=pad, groups=C)


def ref_dil(I, W, B, C, H, Wd, K, k, stride=1, pad=0, dilation=2):
    return F.conv2d(I, W, stride=stride, padding=pad, dilation=dilation)


def ref_bcm(W, X, rows, cols, block):
    """Dense M with M[i, j] = W[i // block, j // block, (i - j) mod block], then M @ X."""
    W, X = W.numpy(), X.numpy()
    M = np.zeros((rows, cols))
    for i in range(rows):
        for j in range(cols):
            M[i, j] = W[i // block, j // block, (i - j) % block]
    return M @ X


def ref_sho(I, B, H, W, C, k):
    """Channel c is shifted by (dy, dx) from shift index c % (k*k); zeros come in at the edges."""
    I = I.numpy()
    O = np.zeros_like(I)
    for c in range(C):
        s = c % (k * k)
        dy, dx = s // k - k // 2, s % k - k // 2
        # O[:, h, w, c] = I[:, h + dy, w + dx, c] for the h, w whose source is inside the image.
        h0, h1 = max(0, -dy), min(H, H - dy)
        w0, w1 = max(0, -dx), min(W, W - dx)
        if h1 > h0 and w1 > w0:
            O[:, h0:h1, w0:w1, c] = I[:, h0 + dy:h1 + dy, w0 + dx:w1 + dx, c]
    return O


REFERENCES = {
    "GMV": ref_gmv, "GMM": ref_gmm, "BIL": ref_bil,
    "C1D": ref_c1d, "T1D": ref_t1d, "C2D": ref_c2d, "T2D": ref_t2d,
    "C3D": ref_c3d, "T3D": ref_t3d, "GRP": ref_grp, "DEP": ref_dep, "DIL": ref_dil,
    "BCM": ref_bcm, "SHO": ref_sho,
}


def check(task_name, args, reference_fn, seed=0):
    """Build the task, evaluate it on random inputs and compare to reference_fn in float64.

    Returns the seconds task.evaluate took.
    """
    task = get_task(task_name, *args)
    arrays = task.random_inputs(seed=seed)
    assert all(a.dtype == np.float32 for a in arrays)
    start = time.perf_counter()
    outputs = task.evaluate(*arrays)
    elapsed = time.perf_counter() - start
    assert len(outputs) == 1, f"{task}: expected one output, got {len(outputs)}"
    out = np.asarray(outputs[0])
    assert out.dtype == np.float32

    ref = reference_fn(*(torch.from_numpy(a).double() for a in arrays), *args)
    ref = ref.numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    assert out.shape == ref.shape, f"{task}: output shape {out.shape}, expected {ref.shape}"
    assert tuple(task.outputs[0].shape) == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(ref).max())),
                               err_msg=str(task))
    return elapsed


# ---------------------------------------------------------------------------
# Cases: (operator, positional args), with ids saying what each one exercises.
# ---------------------------------------------------------------------------

def case(name, args, label):
    return pytest.param(name, args, id=f"{name}-{label}")


CASES = [
    # GMV(N, K)
    case("GMV", (1, 1), "1x1"),
    case("GMV", (7, 13), "prime"),
    case("GMV", (32, 5), "tall"),
    # GMM(M, K, N)
    case("GMM", (1, 1, 1), "1x1x1"),
    case("GMM", (7, 5, 3), "prime"),
    case("GMM", (16, 13, 8), "mixed"),
    case("GMM", (5, 7, 5), "square-out"),
    # BIL(N, K, M, L)
    case("BIL", (1, 1, 1, 1), "ones"),
    case("BIL", (3, 5, 4, 7), "prime"),
    case("BIL", (4, 6, 2, 3), "mixed"),
    # C1D(B, C, L, K, k, stride, pad, dilation)
    case("C1D", (1, 3, 10, 4, 3), "s1-p0"),
    case("C1D", (2, 3, 11, 5, 3, 2, 1), "b2-s2-p1"),
    case("C1D", (1, 2, 13, 3, 3, 1, 2, 2), "d2-p2"),
    case("C1D", (1, 4, 7, 2, 7, 1, 3), "k7-p3"),
    case("C1D", (1, 2, 12, 3, 3, 2, 0, 2), "s2-d2"),
    # T1D(B, C, L, K, k, stride, pad)
    case("T1D", (1, 1, 1, 1, 1), "ones"),
    case("T1D", (1, 3, 6, 4, 3), "s1-p0"),
    case("T1D", (2, 3, 7, 5, 3, 2, 1), "b2-s2-p1"),
    case("T1D", (1, 2, 5, 3, 4, 2, 3), "s2-p3-kminus1"),
    case("T1D", (1, 2, 4, 3, 2, 3, 0), "s3-gap"),
    # C2D(B, C, H, W, K, k, stride, pad, dilation)
    case("C2D", (1, 8, 10, 10, 6, 3, 2, 1), "s2-p1"),
    case("C2D", (1, 3, 7, 7, 4, 3), "prime-s1-p0"),
    case("C2D", (2, 2, 9, 11, 3, 3, 1, 2, 2), "b2-d2-p2"),
    case("C2D", (1, 4, 8, 8, 5, 1, 2, 0), "1x1-s2"),
    case("C2D", (1, 2, 7, 5, 3, 5, 1, 2), "k5-p2-nonsquare"),
    # T2D(B, C, H, W, K, k, stride, pad)
    case("T2D", (1, 3, 5, 5, 4, 3), "s1-p0"),
    case("T2D", (2, 2, 5, 7, 3, 3, 2, 1), "b2-s2-p1"),
    case("T2D", (1, 3, 4, 4, 2, 4, 2, 3), "s2-p3-kminus1"),
    case("T2D", (1, 2, 3, 5, 3, 2, 3, 0), "s3-gap"),
    # C3D(B, C, D, H, W, K, k, stride, pad, dilation)
    case("C3D", (1, 2, 5, 5, 5, 3, 3), "s1-p0"),
    case("C3D", (2, 2, 7, 6, 5, 3, 3, 2, 1), "b2-s2-p1"),
    case("C3D", (1, 1, 7, 7, 7, 2, 3, 1, 2, 2), "d2-p2"),
    # T3D(B, C, D, H, W, K, k, stride, pad)
    case("T3D", (1, 2, 3, 3, 3, 2, 3), "s1-p0"),
    case("T3D", (2, 2, 3, 4, 5, 3, 3, 2, 1), "b2-s2-p1"),
    case("T3D", (1, 1, 4, 3, 4, 2, 2, 2, 1), "k2-s2-p1"),
    # GRP(B, C, H, W, K, k, stride, pad, groups)
    case("GRP", (1, 3, 6, 6, 4, 3), "g1"),
    case("GRP", (1, 4, 8, 8, 4, 3, 1, 1, 2), "g2-p1"),
    case("GRP", (2, 8, 7, 7, 8, 3, 2, 0, 4), "b2-g4-s2"),
    case("GRP", (1, 6, 9, 9, 12, 3, 2, 1, 3), "g3-s2-p1-K2C"),
    # DEP(B, C, H, W, multiplier, k, stride, pad)
    case("DEP", (1, 3, 8, 8, 1, 3), "m1-s1-p0"),
    case("DEP", (2, 4, 7, 7, 2, 3, 2, 1), "b2-m2-s2-p1"),
    case("DEP", (1, 5, 9, 9, 2, 5, 1, 2), "m2-k5-p2"),
    # DIL(B, C, H, W, K, k, stride, pad, dilation)
    case("DIL", (1, 3, 11, 11, 4, 3), "default-d2"),
    case("DIL", (2, 2, 13, 13, 3, 3, 2, 2, 2), "b2-d2-s2-p2"),
    case("DIL", (1, 2, 15, 15, 2, 3, 1, 0, 3), "d3"),
    case("DIL", (1, 2, 9, 9, 3, 3, 1, 1, 1), "d1-p1"),
    # BCM(rows, cols, block)
    case("BCM", (8, 8, 2), "b2-square"),
    case("BCM", (12, 8, 4), "b4-tall"),
    case("BCM", (8, 16, 4), "b4-wide"),
    case("BCM", (6, 10, 2), "b2-wide"),
    case("BCM", (7, 7, 7), "one-block-prime"),
    # SHO(B, H, W, C, k)
    case("SHO", (1, 5, 5, 9, 3), "k3"),
    case("SHO", (2, 7, 6, 11, 3), "b2-k3-wrap"),
    case("SHO", (1, 6, 7, 25, 5), "k5"),
    case("SHO", (1, 2, 3, 30, 5), "k5-shift-past-edge"),
]


@pytest.mark.parametrize("name, args", CASES)
def test_matches_reference(name, args):
    check(name, args, REFERENCES[name])


def test_cases_cover_every_operator():
    assert {p.values[0] for p in CASES} == set(OPERATORS)


def test_all_operators_registered():
    registered = {definition.name for definition in list_tasks()}
    missing = set(OPERATORS) - registered
    assert not missing, f"not registered: {sorted(missing)}"


@pytest.mark.slow
def test_yolo_c2_padded_conv2d():
    """The YOLO layer C2: 1x64x112x112 -> 192 channels, 3x3, stride 1, pad 1."""
    elapsed = check("C2D", (1, 64, 112, 112, 192, 3, 1, 1), ref_c2d)
    assert elapsed < 20.0, f"YOLO C2 took {elapsed:.1f} s (limit 20 s)"
