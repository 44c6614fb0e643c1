"""@flexsched.jit: a Python function that builds a computation from its arguments' shapes, tuned on
the first call for each new shape and reused after (in memory, and across processes through the
tuning database), in the spirit of Triton's autotuner."""

from __future__ import annotations

import functools
import inspect
import threading

_DTYPES = ("float32", "float64", "int32", "int64")


def jit(func=None, *, target="llvm", trials=20, key=None, method="q", database=None, **options):
    """Decorator: call the function with numpy arrays or CPU torch tensors (and plain int, float,
    str or bool values) and get its outputs computed by a tuned kernel.

    The decorated function is called once per new key with a placeholder in place of each array
    argument (named after the parameter, with the array's shape and dtype; other values are passed
    as they are) and returns the output tensor(s) of its computation, or a Task. The key is every
    array's shape and dtype and every other value, plus key(*args) if given (for anything else the
    computation depends on). For a new key the kernel comes from the tuning database if it holds a
    record of this computation on this target; otherwise it is tuned now (`trials` points, `method`,
    further options passed to optimize) and the result stored there. Results are numpy arrays for
    numpy inputs, torch tensors for torch inputs; one output is returned alone, several as a tuple."""
    if func is None:
        return lambda f: jit(f, target=target, trials=trials, key=key, method=method, database=database, **options)
    return TunedFunction(func, target, trials, key, method, database, options)


class TunedFunction:
    """A jit-decorated function: its kernels by key, tuned or looked up once per key."""

    def __init__(self, func, target, trials, key, method, database, options):
        functools.update_wrapper(self, func)
        self.func = func
        self.target = target
        self.trials = trials
        self.key = key
        self.method = method
        self.database = database
        self.options = options
        self.tunings = 0   # searches run by this object (a key found in the database needs none)
        self._parameters = list(inspect.signature(func).parameters)
        self._kernels = {}
        self._lock = threading.Lock()

    def __call__(self, *args):
        cache_key = self.cache_key(*args)
        kernel = self._kernels.get(cache_key)
        if kernel is None:
            with self._lock:  # several threads with a new key: one tunes, the others wait for it
                kernel = self._kernels.get(cache_key)
                if kernel is None:
                    kernel = self._kernels[cache_key] = self.kernel_for(*args)
        return run_kernel(kernel, [arg for arg in args if _is_array(arg)], self.__name__)

    def cache_key(self, *args):
        parts = []
        for arg in args:
            if _is_array(arg):
                parts.append(("array", tuple(arg.shape), _dtype_of(arg)))
            else:
                parts.append(("value", type(arg).__name__, arg))
        return tuple(parts) + ((("key", self.key(*args)),) if self.key else ())

    def task_for(self, *args):
        """The Task the function builds for these arguments' shapes and dtypes."""
        from .registry import Task, task_from_tensors
        from .tensor import placeholder

        if len(args) > len(self._parameters):
            raise TypeError(f"{self.__name__} takes {len(self._parameters)} arguments, got {len(args)}")
        values, placeholders = [], []
        for name, arg in zip(self._parameters, args):
            if _is_array(arg):
                dtype = _dtype_of(arg)
                if dtype not in _DTYPES:
                    raise TypeError(f"argument '{name}' of {self.__name__} has dtype {dtype}; "
                                    f"kernels take {', '.join(_DTYPES)}")
                placeholders.append(placeholder(tuple(arg.shape), dtype=dtype, name=name))
                values.append(placeholders[-1])
            else:
                values.append(arg)
        built = self.func(*values)
        if isinstance(built, Task):
            return built
        outputs = (built,) if not isinstance(built, (tuple, list)) else tuple(built)
        return task_from_tensors((*placeholders, *outputs), name=self.__name__)

    def kernel_for(self, *args):
        """The kernel for these arguments: the database's best schedule, else one tuned now."""
        from .api import build, optimize

        task = self.task_for(*args)
        kernel = build(task, self.target, database=self.database)
        if kernel.record is not None:
            return kernel
        self.tunings += 1
        result = optimize(task, self.target, trials=self.trials, method=self.method, database=self.database,
                          build_kernel=False, **self.options)
        kernel = build(task, self.target, schedule=result.schedule)
        kernel.origin = f"{task}: tuned now, {result.gflops:.2f} GFLOPS in {result.trials} trials"
        return kernel


def run_kernel(kernel, arrays, what):
    """The kernel's outputs for these input arrays: torch tensors if any input is one, else numpy."""
    from .torch_ops import check_inputs

    check_inputs(kernel, arrays, what)
    outputs = kernel.params[len(kernel.lowered.inputs):]
    if any(_is_torch(array) for array in arrays):
        import torch

        inputs = [torch.as_tensor(array).contiguous() for array in arrays]
        results = [torch.empty(tuple(b.shape), dtype=getattr(torch, b.dtype)) for b in outputs]
    else:
        import numpy as np

        inputs = [np.ascontiguousarray(array) for array in arrays]
        results = [np.empty(b.shape, dtype=b.dtype) for b in outputs]
    kernel(*inputs, *results)
    return results[0] if len(results) == 1 else tuple(results)


def _is_array(value):
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, (int, float, str, bool))


def _is_torch(value):
    return type(value).__module__.startswith("torch")


def _dtype_of(array):
    return str(array.dtype).removeprefix("torch.")
