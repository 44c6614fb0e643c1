"""A user-defined task outside the operator library, for test_registry.py.

Importing this module registers USER_ROWSUM. Its Task.ref() names this module
("user_tasks" when tests/nodevice is on sys.path), so a fresh process that has the
directory on PYTHONPATH can re-create the task from the ref alone.
"""

from flexsched import compute, placeholder, reduce_axis, sum
from flexsched.registry import register_task


@register_task("USER_ROWSUM")
def user_rowsum(N, M, scale=2.0):
    """Scaled row sums plus a bias: O[i] = scale * sum_j X[i, j] + Bias[i]."""
    X = placeholder((N, M), name="X")
    bias = placeholder((N,), name="Bias")
    j = reduce_axis(M, "j")
    S = compute((N,), lambda i: sum(X[i, j], axis=j), name="S")
    O = compute((N,), lambda i: S[i] * scale + bias[i], name="O")
    return X, bias, O
