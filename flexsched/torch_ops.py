"""Tuned CPU kernels as PyTorch operators: torch.library custom ops (flexsched::<name>) with a fake
implementation of the output shapes, so they run in eager code, inside an nn.Module and under
torch.compile, which sees them as opaque calls. Forward only: no gradient is defined."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

NAMESPACE = "flexsched"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SCHEMA_RESERVED = {"self", "out"}  # names the operator schema parser treats specially


@dataclass
class _Registered:
    identity: tuple   # what the operator computes: the computation and its parameters
    kernel: object    # the Kernel it calls (an equivalent kernel registered again replaces it)
    op: object        # torch's CustomOpDef


_OPS: dict[str, _Registered] = {}
_LOCK = threading.Lock()


def torch_op(kernel_or_task, name=None, target="llvm", database=None):
    """A PyTorch operator `flexsched::<name>` that runs a CPU kernel: call it with the input tensors
    (in the task's input order) and get the output tensor (a tuple for several). Given a task rather
    than a Kernel, it is built by flexsched.build (the tuning database's best schedule, if any).
    Registering the same computation under the same name again returns the operator it has."""
    import torch

    from codegen.kernel import Kernel

    from .api import build

    kernel = kernel_or_task if isinstance(kernel_or_task, Kernel) else build(kernel_or_task, target,
                                                                             database=database)
    if kernel.backend.kind != "cpu":
        raise ValueError(f"torch_op runs CPU kernels; this one is for {kernel.target.name}")
    if kernel.blocked:
        raise ValueError(f"torch_op passes tensors in their own layout, but this kernel takes "
                         f"{', '.join(kernel.blocked)} blocked at its interface; build it without interface=True")
    name = name or default_name(kernel.task)
    if not _NAME.fullmatch(name):
        raise ValueError(f"operator name {name!r} must be an identifier (letters, digits, _; not starting with a digit)")
    qualified = f"{NAMESPACE}::{name}"
    identity = (kernel.task.fingerprint, _signature(kernel))
    with _LOCK:
        known = _OPS.get(qualified)
        if known is not None:
            if known.identity != identity:
                raise ValueError(f"operator {qualified} is already registered for {known.kernel.task}; "
                                 "give this one another name")
            known.kernel = kernel  # the same computation, perhaps a better schedule
            return known.op
        op = torch.library.custom_op(qualified, _implementation(qualified), mutates_args=(),
                                     device_types="cpu", schema=_schema(kernel))
        op.register_fake(_fake(qualified))
        _OPS[qualified] = _Registered(identity, kernel, op)
        return op


def default_name(task):
    """An operator name from the task: 'GMM_32_32_32'; a computation given as tensors adds its fingerprint."""
    text = "_".join([task.name, *map(str, task.args)] + ([] if task.args else [task.fingerprint[:8]]))
    text = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return text if not text[:1].isdigit() else f"op_{text}"


def registered_kernel(name):
    """The Kernel that operator flexsched::<name> calls."""
    return _OPS[f"{NAMESPACE}::{name}"].kernel


def _signature(kernel):
    return tuple((b.name, tuple(b.shape), b.dtype) for b in kernel.params)


def _schema(kernel):
    inputs = kernel.params[:len(kernel.lowered.inputs)]
    names = [b.name if _NAME.fullmatch(b.name) and b.name not in _SCHEMA_RESERVED else f"input{i}"
             for i, b in enumerate(inputs)]
    count = len(kernel.params) - len(inputs)
    returns = "Tensor" if count == 1 else "(" + ", ".join(["Tensor"] * count) + ")"
    return f"({', '.join(f'Tensor {n}' for n in names)}) -> {returns}"


def check_inputs(kernel, tensors, what="kernel"):
    """The input tensors as the kernel takes them (contiguous, on the CPU), after checking their
    count, dtype and shape; one-line errors name the input."""
    inputs = kernel.params[:len(kernel.lowered.inputs)]
    if len(tensors) != len(inputs):
        raise TypeError(f"{what} takes {len(inputs)} inputs ({', '.join(b.name for b in inputs)}), got {len(tensors)}")
    checked = []
    for tensor, buffer in zip(tensors, inputs):
        dtype = str(getattr(tensor, "dtype", "")).removeprefix("torch.")
        if not hasattr(tensor, "shape") or not hasattr(tensor, "dtype"):
            raise TypeError(f"input '{buffer.name}' of {what} must be a tensor, got {type(tensor).__name__}")
        if dtype != buffer.dtype:
            raise TypeError(f"input '{buffer.name}' of {what} has dtype {dtype}, expected {buffer.dtype}")
        if tuple(tensor.shape) != tuple(buffer.shape):
            raise ValueError(f"input '{buffer.name}' of {what} has shape {tuple(tensor.shape)}, "
                             f"expected {tuple(buffer.shape)}")
        device = getattr(tensor, "device", None)
        if device is not None and getattr(device, "type", "cpu") not in ("cpu", "meta"):
            raise ValueError(f"input '{buffer.name}' of {what} is on {device}; the kernel runs on the CPU")
        checked.append(tensor)
    return checked


def _output_specs(kernel):
    return [(tuple(b.shape), b.dtype) for b in kernel.params[len(kernel.lowered.inputs):]]


def _implementation(qualified):
    def run(*tensors):
        import torch

        kernel = _OPS[qualified].kernel
        inputs = [t.contiguous() for t in check_inputs(kernel, tensors, qualified)]
        outputs = [torch.empty(shape, dtype=getattr(torch, dtype)) for shape, dtype in _output_specs(kernel)]
        kernel(*inputs, *outputs)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
    return run


def _fake(qualified):
    def shapes(*tensors):
        import torch

        kernel = _OPS[qualified].kernel
        check_inputs(kernel, tensors, qualified)
        device = tensors[0].device if tensors else "cpu"
        outputs = [torch.empty(shape, dtype=getattr(torch, dtype), device=device) for shape, dtype in _output_specs(kernel)]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
    return shapes
