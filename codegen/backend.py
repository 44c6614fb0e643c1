"""Back ends by target kind: the passes that finish a lowered kernel, its compilation, and how it
runs and is timed.

A back end registers itself under a target kind in flexsched.plugins (codegen.cpu_backend as "cpu",
codegen.cuda_backend as "gpu", named there by codegen.targets); build() and the measurement worker
look it up, importing its module on first use, so llvmlite or cupy load only where a kernel needs them.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from flexsched import plugins
from flexsched.errors import FlexschedError


# Bytes a host array's first element is aligned to: a cache line, and an AVX-512 vector. numpy aligns
# to 16 only, so where a kernel's vector loads and stores fell on line boundaries changed with where
# an array landed; torch's allocator aligns to 64. (The searched bests of YOLO C2, C6, C9 and GMM
# ran alike side by side on arrays 16 bytes off a line, within the rounds' noise.)
HOST_ALIGNMENT = 64


def aligned_empty(shape, dtype, alignment=HOST_ALIGNMENT):
    """An uninitialised C-contiguous numpy array whose first element lies on an alignment-byte boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def is_aligned(array, alignment=HOST_ALIGNMENT):
    """Whether a numpy array is C-contiguous and starts on an alignment-byte boundary."""
    return array.flags.c_contiguous and array.ctypes.data % alignment == 0


class BackendError(FlexschedError, RuntimeError):
    """No back end for a target, or one that cannot run here (one line saying why)."""


@dataclass(frozen=True)
class CompileReport:
    """Where one compilation's time went, in seconds, and which cache supplied its machine code."""

    emit_seconds: float = 0.0          # the back end's source: LLVM IR, CUDA C
    optimize_seconds: float = 0.0      # the compiler's optimisation (LLVM's -O3 passes; all of nvcc)
    machine_code_seconds: float = 0.0  # object code made (or read from a cache) and loaded
    cached: str = ""                   # "" (compiled), "memory" or "disk"


class Backend(ABC):
    """How kernels of one target kind are finished, compiled, run and timed."""

    kind: str = ""

    def passes(self, target):
        """Loop-IR passes (PrimFunc -> PrimFunc) that run after lowering, in order."""
        return ()

    @abstractmethod
    def compile(self, func, target):
        """An object that runs func when called with one array per parameter (in place)."""

    def compile_with_report(self, func, target):
        """(compile()'s result, a CompileReport); back ends that know their phases split the time."""
        started = time.perf_counter()
        compiled = self.compile(func, target)
        return compiled, CompileReport(optimize_seconds=time.perf_counter() - started)

    def compile_artifact(self, func, target):
        """What compile() makes, as a picklable value (the isolated build compiles in a worker)."""
        return self.compile(func, target)

    def compile_artifact_with_report(self, func, target):
        """(compile_artifact()'s result, a CompileReport); back ends that know their phases split the time."""
        started = time.perf_counter()
        artifact = self.compile_artifact(func, target)
        return artifact, CompileReport(optimize_seconds=time.perf_counter() - started)

    def load_artifact(self, artifact, target):
        """The runnable object compile() would have made, from what compile_artifact() made."""
        return artifact

    def unavailable(self, target):
        """Why this machine cannot run the kernels ('' when it can)."""
        return ""

    def empty(self, shape, dtype):
        """An uninitialised array in the memory the kernels read (host memory, aligned)."""
        return aligned_empty(shape, dtype)

    def to_device(self, array):
        """A host array in the kernels' memory: itself when aligned, else an aligned copy."""
        array = np.asarray(array)
        if is_aligned(array):
            return array
        copy = aligned_empty(array.shape, array.dtype)
        np.copyto(copy, array)
        return copy

    def to_host(self, array):
        """A kernel's array as a numpy array."""
        return np.asarray(array)

    def time_runs(self, run, number):
        """Seconds per call of run(), over number calls back to back."""
        started = time.perf_counter()
        for _ in range(number):
            run()
        return (time.perf_counter() - started) / number

    def preload(self):
        """Import what compiling needs, before the measurement worker limits its memory."""

    def healthy(self):
        """Whether this process can still run kernels (a GPU fault spoils the whole context)."""
        return True


def register_backend(backend):
    """Make a Backend instance the one for its kind (a later registration replaces it)."""
    if not backend.kind:
        raise BackendError(f"{type(backend).__name__} names no target kind")
    plugins.register_backend(backend.kind, backend)
    return backend


def loaded_backends():
    """The back ends registered so far in this process."""
    return plugins.loaded_backends()


def backend_for(kind):
    """The back end registered for a target kind (a Target or its kind), importing its module on first use."""
    try:
        return plugins.backend(kind)
    except plugins.PluginError as err:
        raise BackendError(str(err)) from None
