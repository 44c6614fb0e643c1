"""A user's own operator: a matrix product scaled and shifted, then clipped at zero.

Load it into the command line with `flexsched -m docs/examples/scaled_matmul.py ...`, or import it.
"""

import flexsched as fs


@fs.register_task("SCALED_MATMUL")
def scaled_matmul(M, K, N, scale=0.5):
    """relu(scale * A @ B + bias): a GEMM with its epilogue fused."""
    A = fs.placeholder((M, K), name="A")
    B = fs.placeholder((K, N), name="B")
    bias = fs.placeholder((N,), name="bias")
    k = fs.reduce_axis(K, "k")
    P = fs.compute((M, N), lambda i, j: fs.sum(A[i, k] * B[k, j], axis=k), name="P")
    Y = fs.compute((M, N), lambda i, j: fs.max(P[i, j] * scale + bias[j], 0.0), name="Y")
    return A, B, bias, Y
