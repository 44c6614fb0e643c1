"""Tasks whose definition misbehaves in a worker process only, for testing isolated builds.

The test process defines them normally; a build worker re-creates each from its Task.ref(),
importing this module by name ("build_faults", found on the parent's sys.path, which pytest
gives this directory), and there the definition hangs, crashes or exhausts memory, as a
compiler would on a pathological kernel.
"""

import multiprocessing
import os
import signal
import time

import numpy as np

from flexsched import compute, placeholder, reduce_axis, sum
from flexsched.registry import register_task


def in_worker():
    """Whether this process was started by another (a worker), not the test run itself."""
    return multiprocessing.parent_process() is not None


def matmul(n):
    A = placeholder((n, n), name="A")
    B = placeholder((n, n), name="B")
    k = reduce_axis(n, "rk")
    return A, B, compute((n, n), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="O")


@register_task("HANG_IN_WORKER")
def hang_in_worker(n):
    """A matrix product whose build never finishes in a worker."""
    while in_worker():
        time.sleep(3600)
    return matmul(n)


@register_task("CRASH_IN_WORKER")
def crash_in_worker(n):
    """A matrix product whose build segfaults a worker."""
    if in_worker():
        os.kill(os.getpid(), signal.SIGSEGV)
    return matmul(n)


@register_task("GREEDY_IN_WORKER")
def greedy_in_worker(n):
    """A matrix product whose build touches 64 GiB in a worker."""
    if in_worker():
        np.ones(64 * 2**30, dtype=np.uint8)
    return matmul(n)
