"""Targets as capabilities: space generation reads these numbers, never a target's name."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace

from .errors import FlexschedError


class TargetError(FlexschedError, ValueError):
    """An unknown target or a capability that does not make sense."""


@dataclass(frozen=True)
class Target:
    """What a device can do; fields a kind does not use stay 0."""

    name: str                          # "llvm", "cuda", "fpga" or "fpga:<device>"
    kind: str                          # "cpu", "gpu", "fpga"
    device: str                        # human-readable description
    cores: int = 1                     # CPU threads that run a parallel loop
    vector_lanes: int = 1              # float32 lanes of the widest vector unit
    vector_registers: int = 0          # CPU: architectural vector registers (accumulators live there)
    max_threads_per_block: int = 0     # GPU
    max_shared_memory_bytes: int = 0   # GPU, per block
    max_registers_per_thread: int = 0  # GPU
    warp_size: int = 0                 # GPU
    dsp_slices: int = 0                # FPGA
    bram18k_blocks: int = 0            # FPGA, 18 Kb each
    dsps_per_fma: int = 0              # FPGA, DSP slices of one float32 multiply-add

    def to_dict(self):
        return asdict(self)

    @classmethod
    def from_dict(cls, data):
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise TargetError(f"target: unknown field(s) {', '.join(sorted(unknown))}")
        return cls(**data)

    def with_(self, **changes):
        """A copy with some capabilities changed (e.g. fewer threads per block)."""
        return replace(self, **changes)


def _host_vector_unit():
    """(float32 lanes, vector registers) of the host's widest vector unit, from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), [])
    except OSError:
        return 4, 16
    if "avx512f" in flags:
        return 16, 32   # zmm0-31
    if "avx2" in flags or "avx" in flags:
        return 8, 16    # ymm0-15
    return 4, 16        # xmm0-15 (x86-64 SSE), a safe guess elsewhere


def host_cpu():
    """The machine this runs on, for the llvm back end."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    lanes, registers = _host_vector_unit()
    return Target("llvm", "cpu", f"host CPU ({cores} cores, {lanes} float32 lanes, {registers} vector registers)",
                  cores=cores, vector_lanes=lanes, vector_registers=registers)


def nvidia_gpu(part=None):
    """A GPU target from flexsched.gpus; no part means the H100 (SXM5). The name carries the part,
    so the GPU model and compiler find its rates and architecture."""
    from .gpus import DEFAULT_GPU, DEVICES

    key = (part or DEFAULT_GPU).lower()
    if key not in DEVICES:
        raise TargetError(f"unknown GPU '{part}'; choose one of {', '.join(DEVICES)}")
    device = DEVICES[key]
    description = "NVIDIA H100 (sm_90)" if part is None else f"{device.part} ({device.arch})"
    return Target("cuda" if part is None else f"cuda:{key}", "gpu", description,
                  max_threads_per_block=device.max_threads_per_block,
                  max_shared_memory_bytes=device.shared_bytes_per_block,
                  max_registers_per_thread=device.max_registers_per_thread, warp_size=device.warp_size)


def nvidia_h100():
    return nvidia_gpu()


def gpu_device(target):
    """The GpuDevice a GPU target names."""
    from .gpus import DEFAULT_GPU, DEVICES

    target = get_target(target)
    if target.kind != "gpu":
        raise TargetError(f"target '{target.name}' is not a GPU")
    return DEVICES[target.name.split(":", 1)[1] if ":" in target.name else DEFAULT_GPU]


def fpga(part=None):
    """An FPGA target from the parts fpga_model registers (flexsched.plugins); no part means its default,
    the VU9P (the paper's)."""
    from .plugins import devices

    parts, default = devices("fpga")
    key = (part or default).lower()
    if key not in parts:
        raise TargetError(f"unknown FPGA device '{part}'; choose one of {', '.join(parts)}")
    # The name carries the part so that an evaluator can find the device's clock and memory.
    return Target("fpga" if part is None else f"fpga:{key}", "fpga", **parts[key])


def xilinx_vu9p():
    return fpga()


_TARGETS = {"llvm": host_cpu, "cuda": nvidia_h100, "fpga": xilinx_vu9p}


def get_target(name):
    """The target called name: llvm (this CPU), cuda (an H100) or cuda:<gpu>, fpga (a VU9P) or
    fpga:<device>."""
    if isinstance(name, Target):
        return name
    if isinstance(name, str) and name.startswith("fpga:"):
        return fpga(name.split(":", 1)[1])
    if isinstance(name, str) and name.startswith("cuda:"):
        return nvidia_gpu(name.split(":", 1)[1])
    if name not in _TARGETS:
        raise TargetError(f"unknown target '{name}'; choose one of {', '.join(_TARGETS)}")
    return _TARGETS[name]()


def target_names():
    return tuple(_TARGETS)
