"""The library contender: the PyTorch call a user would make instead of tuning a task.

Each registered operator with a PyTorch equivalent maps to one call of its input tensors (matmul,
mv, einsum, conv*d, conv_transpose*d); the call is checked against the task's reference before it
is timed, in this process, with TF32 off on CUDA (the tuned kernels compute in full float32).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import FlexschedError


class LibraryError(FlexschedError):
    """The library call could not be made, or its result differs from the reference."""


@dataclass(frozen=True)
class LibraryCall:
    """What PyTorch call stands for a task: its readable name and a function of the input tensors."""

    name: str
    function: object


def _conv(dims, transposed=False):
    def make(a):
        def call(i, w):
            import torch.nn.functional as F

            if transposed:
                return getattr(F, f"conv_transpose{dims}d")(i, w, stride=a["stride"], padding=a["pad"])
            return getattr(F, f"conv{dims}d")(i, w, stride=a["stride"], padding=a["pad"],
                                              dilation=a.get("dilation", 1), groups=a.get("groups", 1))
        return LibraryCall(f"torch.nn.functional.conv{'_transpose' if transposed else ''}{dims}d", call)
    return make


def _torch(name, *extra):
    def make(_args):
        import torch

        function = getattr(torch, name)
        return LibraryCall(f"torch.{name}", lambda *tensors: function(*extra, *tensors))
    return make


def _depthwise(a):
    call = _conv(2)({**a, "groups": a["C"]})
    return LibraryCall(call.name + " (groups=C)", call.function)


# Argument names are the registered definitions' (flexsched/ops); inputs come in definition order.
_CALLS = {
    "GMM": _torch("matmul"),
    "GMV": _torch("mv"),
    "BIL": _torch("einsum", "ik,jkl,il->ij"),
    "C1D": _conv(1), "C2D": _conv(2), "C3D": _conv(3),
    "T1D": _conv(1, True), "T2D": _conv(2, True), "T3D": _conv(3, True),
    "GRP": _conv(2), "DIL": _conv(2), "DEP": _depthwise,
}


def library_call(task):
    """The LibraryCall of a task, or None when PyTorch has no single call for its operator."""
    from .registry import task_definition

    make = _CALLS.get(task.name)
    if make is None:
        return None
    names = [param.name for param in task_definition(task.name).params]
    return make(dict(zip(names, task.args)))


def torch_device(target):
    """The torch device of a target ('cpu' or 'cuda'); TF32 is turned off for CUDA."""
    from .target import get_target

    kind = get_target(target).kind
    if kind == "cpu":
        return "cpu"
    if kind == "gpu":
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        return "cuda"
    raise LibraryError(f"no library call runs on {kind} targets")


def checked_library(task, target, inputs, reference):
    """An explore.side_by_side.Timed of the task's library call on its input arrays (named by the call),
    after checking its result against the reference; None when the operator has no library call."""
    import torch

    from codegen.measure import compare_outputs
    from explore.side_by_side import Timed

    found = library_call(task)
    if found is None:
        return None
    device = torch_device(target)
    tensors = [torch.from_numpy(array).to(device) for array in inputs]
    with torch.no_grad():
        result = found.function(*tensors)
    mismatch = compare_outputs([result.cpu().numpy()], reference[:1], [t.name for t in task.outputs[:1]])
    if mismatch:
        raise LibraryError(f"{found.name} differs from the reference of {task}: {mismatch}")

    def call():
        with torch.no_grad():
            found.function(*tensors)
    return Timed(found.name, call, _time_runs_for(device))


def _time_runs_for(device):
    if device == "cpu":
        from explore.side_by_side import wall_clock_runs

        return wall_clock_runs
    return cuda_event_seconds


def cuda_event_seconds(call, number):
    """Seconds per call of call(), number calls back to back between two CUDA events on torch's stream."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(number):
        call()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / number
