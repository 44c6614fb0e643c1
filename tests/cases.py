"""Test cases several test folders share: small shapes of the 14 library operators, a wrapper
that makes a computation built in a test look like a registered task, and a process probe."""

import os

import numpy as np

import flexsched as fs

# Small shapes with the features that stress lowering: strides, padding, dilation, groups,
# awkward (prime) extents, several nodes.
SHAPES = {
    "GMV": (37, 24), "GMM": (20, 33, 17), "BIL": (5, 6, 7, 3), "C1D": (1, 5, 19, 6, 3, 2, 1),
    "T1D": (1, 4, 9, 5, 3, 2, 1), "C2D": (1, 3, 11, 9, 8, 3, 2, 1), "T2D": (1, 3, 5, 6, 4, 3, 2, 1),
    "C3D": (1, 2, 5, 6, 5, 3, 3, 1, 1), "T3D": (1, 2, 3, 4, 3, 2, 2, 2, 0), "GRP": (1, 8, 7, 7, 8, 3, 1, 1, 4),
    "DEP": (1, 3, 9, 9, 2, 3, 2, 1), "DIL": (1, 3, 10, 10, 4, 3, 1, 2, 2), "BCM": (24, 16, 4),
    "SHO": (1, 7, 6, 20, 3),
}


class LocalTask:
    """A computation built in a test, not in the registry: nothing under test may depend on the library."""

    def __init__(self, name, inputs, outputs):
        self.name, self.inputs, self.outputs = name, tuple(inputs), tuple(outputs)
        self.tensors = self.inputs + self.outputs

    def random_inputs(self, seed=0):
        rng = np.random.default_rng(seed)
        return [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in self.inputs]

    def evaluate(self, *arrays):
        return fs.evaluate(list(self.outputs), dict(zip(self.inputs, arrays)))

    def __str__(self):
        return self.name


def is_running(pid):
    """Whether pid is a live process (a zombie nobody reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def child_processes():
    """The live child processes of this process (their pids), read from /proc."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            children.append(int(entry))
    return children
