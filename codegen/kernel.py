"""Kernels: a task built under a schedule for a target, callable on numpy arrays and torch tensors."""

from __future__ import annotations

import numpy as np

from analysis import analyze
from flexsched.schedule import Schedule
from flexsched.target import get_target

from .lower import lower


class Kernel:
    """A compiled computation; call it with inputs then outputs (it writes the outputs in place)."""

    def __init__(self, task, schedule, lowered, compiled, target):
        self.task = task
        self.schedule = schedule
        self.lowered = lowered
        self.compiled = compiled
        self.target = target
        # Intermediate stages at root live in workspaces the kernel owns, allocated once.
        self._workspaces = [np.empty(b.shape, dtype=b.dtype) for b in lowered.workspaces]

    @property
    def params(self):
        """The user-visible parameters: inputs, then outputs."""
        count = len(self.lowered.inputs) + len(self.lowered.outputs)
        return self.lowered.func.params[:count]

    def __call__(self, *arrays):
        if len(arrays) != len(self.params):
            names = ", ".join(b.name for b in self.params)
            raise ValueError(f"kernel takes {len(self.params)} arrays ({names}), got {len(arrays)}")
        self.compiled(*arrays, *self._workspaces)

    def run(self, *inputs):
        """Outputs for these inputs, in freshly allocated arrays."""
        outputs = [np.empty(b.shape, dtype=b.dtype) for b in self.params[len(inputs):]]
        self(*inputs, *outputs)
        return outputs

    @property
    def loop_ir(self):
        """The lowered loop nest as readable text."""
        return str(self.lowered.func)

    @property
    def llvm_ir(self):
        return self.compiled.llvm_ir

    def asm(self):
        return self.compiled.asm()

    def save(self, directory, name=None):
        """Write lib<name>.so with a plain C function and <name>.h; returns (library, header)."""
        from .export import save_shared_library

        return save_shared_library(self, directory, name)


def build(task, schedule=None, target="llvm", name=None):
    """Lower task under schedule (a Schedule, its JSON, or None for the naive nest) and compile it."""
    target = get_target(target)
    if target.kind != "cpu":
        raise ValueError(f"target '{target.name}' has no back end that runs here yet; use llvm")
    if schedule is None:
        schedule = Schedule()
    elif isinstance(schedule, str):
        schedule = Schedule.from_json(schedule)
    state = schedule.apply(analyze(task))
    lowered = lower(task, state, name=name or _kernel_name(task))
    from .llvm_backend import compile_func  # llvmlite loads only when a kernel is built

    return Kernel(task, schedule, lowered, compile_func(lowered.func), target)


def _kernel_name(task):
    return "".join(ch if ch.isalnum() else "_" for ch in str(task)).strip("_") or "kernel"
