"""Running CUDA kernels through cupy (the optional `gpu` extra), on cupy arrays or CUDA torch tensors.

Arguments are passed by device pointer, never copied: a torch tensor is viewed as a cupy array
through __cuda_array_interface__, and launches go to torch's current stream when a torch tensor
is among the arguments, so they order with the model's other kernels. Timing uses CUDA events.
Without cupy or without a GPU, every entry here raises GpuUnavailable with one line saying which.
"""

from __future__ import annotations

import functools
import os
import tempfile

from flexsched.errors import FlexschedError


class GpuUnavailable(FlexschedError, RuntimeError):
    """cupy is not installed or no CUDA device is visible."""


@functools.cache
def unavailable_reason():
    """'' when a CUDA device can run kernels here, else why not (one line)."""
    try:
        import cupy
    except ImportError:
        return "no GPU available: cupy is not installed (pip install 'flexsched[gpu]')"
    except Exception as err:  # noqa: BLE001 - a broken CUDA install is a reason too
        return f"no GPU available: cupy failed to import ({type(err).__name__}: {err})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # noqa: BLE001
        return f"no GPU available: the CUDA runtime reports {type(err).__name__}: {err}"
    return "" if count > 0 else "no GPU available: the CUDA runtime sees no device"


def cupy_module():
    """cupy, or GpuUnavailable."""
    reason = unavailable_reason()
    if reason:
        raise GpuUnavailable(reason)
    import cupy

    return cupy


def device_arch():
    """The current device's architecture as nvcc names it (sm_90 on an H100)."""
    cupy = cupy_module()
    return f"sm_{cupy.cuda.Device().compute_capability}"


def as_device_array(value, name, shape, dtype, writable):
    """A cupy view of a cupy array or CUDA torch tensor, after checking shape, dtype and layout."""
    cupy = cupy_module()
    if type(value).__module__.startswith("torch"):
        if value.device.type != "cuda":
            raise TypeError(f"argument '{name}' is on {value.device}; the cuda back end needs GPU memory")
        array = cupy.asarray(value)   # zero-copy, through __cuda_array_interface__
    elif isinstance(value, cupy.ndarray):
        array = value
    else:
        raise TypeError(f"argument '{name}' must be a cupy array or a CUDA torch tensor, got {type(value).__name__} "
                        "(Kernel.run copies numpy arrays for you)")
    if str(array.dtype) != dtype:
        raise TypeError(f"argument '{name}' has dtype {array.dtype}, expected {dtype}")
    if tuple(array.shape) != tuple(shape):
        raise TypeError(f"argument '{name}' has shape {tuple(array.shape)}, expected {tuple(shape)}")
    if not array.flags.c_contiguous:
        raise TypeError(f"argument '{name}' is not C-contiguous")
    del writable  # device memory is always writable
    return array


def stream_for(values):
    """torch's current stream when a torch tensor is among the arguments, else cupy's."""
    cupy = cupy_module()
    for value in values:
        if type(value).__module__.startswith("torch"):
            import torch

            return cupy.cuda.ExternalStream(torch.cuda.current_stream(value.device).cuda_stream)
    return cupy.cuda.get_current_stream()


def load_kernels(names, cubin=None, ptx=None, source=None, arch=None):
    """{name: cupy RawKernel} from machine code for this device, else PTX (compiled by the driver),
    else CUDA source (compiled by NVRTC, where nvcc is absent)."""
    cupy = cupy_module()
    if source is not None and cubin is None and ptx is None:
        module = cupy.RawModule(code=source, options=("--std=c++17",), backend="nvrtc")
        return {name: module.get_function(name) for name in names}
    use_cubin = cubin is not None and arch == device_arch()
    with tempfile.TemporaryDirectory(prefix="flexsched-cuda-") as directory:
        path = os.path.join(directory, "kernel.cubin" if use_cubin else "kernel.ptx")
        with open(path, "wb") as out:
            out.write(cubin if use_cubin else ptx.encode())
        module = cupy.RawModule(path=path)
        return {name: module.get_function(name) for name in names}  # loads before the file goes


def time_runs(run, number):
    """Seconds per call of run() between two CUDA events, number calls back to back."""
    cupy = cupy_module()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(number):
        run()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1e3 / number


def healthy():
    """Whether the CUDA context still works (an illegal address spoils it for good)."""
    try:
        cupy_module().cuda.runtime.deviceSynchronize()
        return True
    except Exception:  # noqa: BLE001
        return False
