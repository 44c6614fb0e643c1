"""Matrix operators: GMV, GMM, BIL and the block circulant matrix BCM."""

from ..functions import sum
from ..registry import register_task
from ..tensor import compute, placeholder, reduce_axis
from .common import check_at_least, require


@register_task("GMV")
def gmv(N, K):
    """Matrix-vector product: O[i] = sum_k A[i,k] B[k]."""
    check_at_least(1, N=N, K=K)
    A = placeholder((N, K), name="A")
    B = placeholder((K,), name="B")
    k = reduce_axis(K, "rk")
    O = compute((N,), lambda i: sum(A[i, k] * B[k], axis=k), name="O")
    return A, B, O


@register_task("GMM")
def gmm(M, K, N):
    """Matrix-matrix product: O[i,j] = sum_k A[i,k] B[k,j]."""
    check_at_least(1, M=M, K=K, N=N)
    A = placeholder((M, K), name="A")
    B = placeholder((K, N), name="B")
    k = reduce_axis(K, "rk")
    O = compute((M, N), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="O")
    return A, B, O


@register_task("BIL")
def bil(N, K, M, L):
    """Bilinear: O[i,j] = sum_k sum_l A[i,k] B[j,k,l] C[i,l]."""
    check_at_least(1, N=N, K=K, M=M, L=L)
    A = placeholder((N, K), name="A")
    B = placeholder((M, K, L), name="B")
    C = placeholder((N, L), name="C")
    k = reduce_axis(K, "rk")
    l = reduce_axis(L, "rl")  # noqa: E741 - the paper's name
    O = compute((N, M), lambda i, j: sum(A[i, k] * B[j, k, l] * C[i, l], axis=[k, l]), name="O")
    return A, B, C, O


@register_task("BCM")
def bcm(rows, cols, block):
    """Block circulant matrix times a vector; each block's first column is a stored vector."""
    check_at_least(1, rows=rows, cols=cols, block=block)
    require(rows % block == 0, f"argument 'rows'={rows} is not a multiple of 'block'={block}")
    require(cols % block == 0, f"argument 'cols'={cols} is not a multiple of 'block'={block}")
    W = placeholder((rows // block, cols // block, block), name="W")
    X = placeholder((cols,), name="X")
    k = reduce_axis(cols, "rk")
    O = compute((rows,), lambda i: sum(W[i // block, k // block, (i - k) % block] * X[k], axis=k),
                name="O")
    return W, X, O
