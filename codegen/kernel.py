"""Kernels: a task built under a schedule for a target, callable on the target's arrays."""

from __future__ import annotations

import functools
import re
import threading
import time
from dataclasses import replace

import numpy as np

from analysis import analyze
from flexsched.errors import EvaluationError
from flexsched.schedule import Schedule
from flexsched.target import get_target

from .backend import CompileReport, backend_for
from .layout import from_blocked, to_blocked
from .lower import lower


class Kernel:
    """A compiled computation; call it with inputs then outputs (it writes the outputs in place).

    The arrays live where the back end computes: numpy arrays or CPU torch tensors for llvm,
    cupy arrays or CUDA torch tensors for cuda. run() takes and returns numpy arrays on any target.
    """

    def __init__(self, task, schedule, lowered, compiled, target, backend):
        self.task = task
        self.schedule = schedule
        self.lowered = lowered
        self.compiled = compiled
        self.target = target
        self.backend = backend
        self.origin = ""      # where the schedule came from, for people (flexsched.build says)
        self.record = None    # the tuning record whose schedule this is, where one was applied
        self.lower_seconds = 0.0                # what build() spent lowering (0 for kernels made otherwise)
        self.compile_report = CompileReport()   # and compiling, phase by phase
        # Intermediate stages at root, allocated on a thread's first call: one set per thread, since
        # calls from several threads run at once (the back ends release the GIL).
        self._local = threading.local()

    @functools.cached_property
    def params(self):
        """The user-visible parameters: inputs, then outputs, in the caller's shapes."""
        views = self._views
        return tuple(replace(b, shape=views[b.name]) if b.name in views else b for b in self._kernel_params)

    @property
    def _kernel_params(self):
        """The parameters as the compiled code declares them (merged axes merged)."""
        count = len(self.lowered.inputs) + len(self.lowered.outputs)
        return self.lowered.func.params[:count]

    @functools.cached_property
    def _views(self):
        """{name: caller's shape} of the parameters passed as a reshape of the kernel's (not blocked);
        kept, since every call of the kernel asks."""
        blocked = self.blocked
        return {name: shape for name, shape in self.lowered.views if name not in blocked}

    def __call__(self, *arrays):
        if len(arrays) != len(self.params):
            names = ", ".join(b.name for b in self.params)
            raise ValueError(f"kernel takes {len(self.params)} arrays ({names}), got {len(arrays)}")
        workspaces = getattr(self._local, "workspaces", None)
        if workspaces is None:
            workspaces = self._local.workspaces = [self.backend.empty(b.shape, b.dtype)
                                                   for b in self.lowered.workspaces]
        views = self._views
        if views:
            arrays = [_reshaped(array, b.name, views[b.name], b.shape) if b.name in views else array
                      for array, b in zip(arrays, self._kernel_params)]
        self.compiled(*arrays, *workspaces)

    @property
    def signature(self):
        """The parameters as the caller passes them, a blocked one with its logical shape."""
        blocked = self.blocked
        return ", ".join(f"{b.name}: {b.dtype}{list(b.shape)}"
                         + (f" (blocked: logical {list(blocked[b.name].logical_shape)}, {blocked[b.name].blocks})"
                            if b.name in blocked else "")
                         for b in self.params)

    @property
    def blocked(self):
        """{parameter name: layout.BlockedParam} of the inputs and outputs passed blocked."""
        return {param.name: param for param in self.lowered.blocked}

    def arguments(self, inputs):
        """The inputs copied to the kernel's memory (converted ahead of time to the blocked
        layout where the interface asks for one), followed by fresh output arrays there, each
        filled with unwritten(): freed memory comes back holding an earlier kernel's outputs, which
        an element this kernel fails to write would pass a check with."""
        inputs = self._blocked_inputs(inputs)
        outputs = [self.backend.empty(b.shape, b.dtype) for b in self.params[len(inputs):]]
        for output in outputs:
            output.fill(unwritten(output.dtype))
        return [self.backend.to_device(array) for array in inputs] + outputs

    def run(self, *inputs):
        """Outputs for these numpy inputs, as numpy arrays in the caller's layout (copied to and
        from the device)."""
        arrays = self.arguments(inputs)
        self(*arrays)
        return self._logical_outputs([self.backend.to_host(array) for array in arrays[len(inputs):]])

    def _blocked_inputs(self, inputs):
        """Caller's input arrays, the ones the interface takes blocked converted to that layout."""
        blocked, views = self.blocked, dict(self.lowered.views)
        return [to_blocked(_logical(array, blocked[b.name].logical_shape if b.name in views else None),
                           blocked[b.name].blockings) if b.name in blocked else array
                for b, array in zip(self.params, inputs)]

    def _logical_outputs(self, outputs):
        """Output arrays in the caller's layout (the blocked ones converted back)."""
        blocked, views = self.blocked, dict(self.lowered.views)
        params = self.params[len(self.params) - len(outputs):]
        return [_logical(from_blocked(array, blocked[b.name].logical_shape, blocked[b.name].blockings),
                         views.get(b.name)) if b.name in blocked else _logical(array, views.get(b.name))
                for b, array in zip(params, outputs)]

    def emulate(self, *inputs):
        """Outputs for these numpy inputs, computed by interpreting the kernel's loop IR on this
        CPU (a GPU kernel's threads run in barrier-separated phases, races reported)."""
        from .interpret import run

        views = self._views
        inputs = [_reshaped(np.ascontiguousarray(array), b.name, views[b.name], b.shape) if b.name in views else array
                  for array, b in zip(self._blocked_inputs(inputs), self._kernel_params)]
        arrays = [*inputs, *(np.empty(b.shape, dtype=b.dtype) for b in self.lowered.func.params[len(inputs):])]
        run(self.lowered.func, arrays)
        return self._logical_outputs(arrays[len(inputs):len(self.params)])

    @property
    def loop_ir(self):
        """The loop nest the back end compiled, as readable text."""
        return str(self.lowered.func)

    @property
    def source(self):
        """The code the back end compiled: LLVM IR (optimised) for llvm, CUDA C for cuda."""
        return self.compiled.source

    def assembly(self):
        """What the compiler made of it: host assembly for llvm, PTX for cuda."""
        return self.compiled.assembly()

    @property
    def llvm_ir(self):
        return self.compiled.llvm_ir

    def asm(self):
        return self.compiled.asm()

    def save(self, directory, name=None):
        """Write lib<name>.so with a plain C function and <name>.h; returns (library, header)."""
        from .export import save_shared_library

        if self.backend.kind != "cpu":
            raise ValueError(f"save() writes a CPU shared library; a {self.target.name} kernel's code is in "
                             "kernel.source")
        return save_shared_library(self, directory, name)


def unwritten(dtype):
    """What a fresh output holds until the kernel writes it: NaN, an integer type's largest value, or
    True (a boolean has no value a check could not also expect)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return np.nan
    return np.iinfo(dtype).max if dtype.kind in "iu" else True


def _reshaped(array, name, caller_shape, shape):
    """A caller's array as the kernel's parameter of merged axes: the same memory, reshaped."""
    if tuple(array.shape) != tuple(caller_shape):
        raise EvaluationError(f"argument '{name}' has shape {tuple(array.shape)}, expected {tuple(caller_shape)}")
    contiguous = array.is_contiguous() if hasattr(array, "is_contiguous") else array.flags.c_contiguous
    if not contiguous:
        raise EvaluationError(f"argument '{name}' is not C-contiguous")
    return array.reshape(shape)


def _logical(array, shape):
    """array reshaped to `shape` where one is given (between merged axes and the caller's)."""
    return array if shape is None or tuple(array.shape) == tuple(shape) else array.reshape(shape)


def build(task, schedule=None, target="llvm", name=None):
    """Lower task under schedule (a Schedule, its JSON, or None for the naive nest) and compile it
    with the target kind's back end."""
    target = get_target(target)
    backend = backend_for(target)
    started = time.perf_counter()
    schedule, lowered = lower_for(task, schedule, target, name)
    lower_seconds = time.perf_counter() - started
    compiled, report = backend.compile_with_report(lowered.func, target)
    kernel = Kernel(task, schedule, lowered, compiled, target, backend)
    kernel.lower_seconds, kernel.compile_report = lower_seconds, report
    return kernel


def lower_for(task, schedule, target, name=None, info=None):
    """(Schedule, Lowered) of task under schedule, with the target's back-end passes run: the
    loop IR the back end compiles."""
    target = get_target(target)
    if schedule is None:
        schedule = Schedule()
    elif isinstance(schedule, str):
        schedule = Schedule.from_json(schedule)
    lowered = lower(task, schedule.apply(info or analyze(task)), name=name or _kernel_name(task))
    func = lowered.func
    for finish in backend_for(target).passes(target):
        func = finish(func)
    return schedule, replace(lowered, func=func)


def _kernel_name(task):
    """A C identifier from the task's text: GMM(32, 32, 32) gives GMM_32_32_32."""
    return re.sub(r"[^A-Za-z0-9]+", "_", str(task)).strip("_") or "kernel"
