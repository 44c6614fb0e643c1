"""Targets as capabilities: space generation reads these numbers, never a target's name."""

from __future__ import annotations

import functools
import os
from dataclasses import asdict, dataclass, replace

from . import cpus
from .errors import FlexschedError


class TargetError(FlexschedError, ValueError):
    """An unknown target or a capability that does not make sense."""


@dataclass(frozen=True)
class Target:
    """What a device can do; fields a kind does not use stay 0."""

    name: str                          # "llvm" (this host), "llvm -mcpu=...", "cuda", "fpga" or "fpga:<device>"
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
    cpu: str = ""                      # CPU: LLVM's name of the processor the code is for ("znver4")
    features: str = ""                 # CPU: LLVM's features the code may use (flexsched.cpus, canonical)

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

    def identity(self):
        """What records keep of a target: its fields, with a CPU's feature string as a short digest."""
        data = self.to_dict()
        features = data.pop("features")
        if not self.cpu:
            del data["cpu"]
        elif features:
            data["features_digest"] = cpus.digest(features)
        return data


LLVM_OPTIONS = ("-mcpu", "-mattr", "-num-cores")
# Set to a CPU target string ("llvm -mattr=-avx512f"), it is what the bare name "llvm" means: the whole
# suite or a run can then generate code for fewer features than the host has.
LLVM_TARGET_VARIABLE = "FLEXSCHED_LLVM_TARGET"


def host_cores():
    """The cores this process may run on (its affinity, not the machine's total)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cpu_target(text="llvm"):
    """A CPU target from a TVM-style string: "llvm" (this host) with -mcpu=NAME, -mattr=+F,-G, -num-cores=N."""
    # -mattr turns features on or off, from the host's when -mcpu is the host's or absent. The host
    # itself is named "llvm"; any other CPU by its canonical string.
    return _cpu_target(" ".join(text.split()), host_cores())


@functools.lru_cache(maxsize=64)
def _cpu_target(text, cores_here):
    words = text.split()
    if not words or words[0] != "llvm":
        raise TargetError(f"target '{text}': a CPU target starts with 'llvm'")
    options = {}
    for word in words[1:]:
        key, _, value = word.partition("=")
        if key in options:
            raise TargetError(f"target '{text}': {key} is given twice")
        if key not in LLVM_OPTIONS or not value:
            raise TargetError(f"target '{text}': '{word}' is not one of -mcpu=NAME, -mattr=+FEATURE,-FEATURE, "
                              "-num-cores=N")
        options[key] = value
    try:
        changes = cpus.parse(options.get("-mattr", ""))
    except cpus.FeatureError as err:
        raise TargetError(f"target '{text}': {err}") from None
    cores = options.get("-num-cores", str(cores_here))
    if not cores.isdigit() or int(cores) < 1:
        raise TargetError(f"target '{text}': -num-cores must be a whole number of at least 1, got '{cores}'")
    host_name, host_features = cpus.host()
    cpu = options.get("-mcpu", host_name)
    # On the host's CPU the code gets the host's features with the changes; another CPU gets its
    # own (LLVM knows them by name) with the changes.
    features = cpus.canonical(cpus.apply(cpus.parse(host_features), changes) if cpu == host_name else changes)
    lanes, registers = cpus.vector_unit(cpu, cpus.parse(features))
    cores = int(cores)
    units = f"{cores} cores, {lanes} float32 lanes, {registers} vector registers"
    if cpu == host_name and features == host_features and cores == cores_here:
        return Target("llvm", "cpu", f"host CPU ({units})", cores=cores, vector_lanes=lanes,
                      vector_registers=registers, cpu=cpu, features=features)
    name = " ".join(["llvm", f"-mcpu={cpu}", *([f"-mattr={cpus.canonical(changes)}"] if changes else []),
                     *([f"-num-cores={cores}"] if "-num-cores" in options else [])])
    return Target(name, "cpu", f"{cpu} CPU ({units})", cores=cores, vector_lanes=lanes,
                  vector_registers=registers, cpu=cpu, features=features)


def host_cpu():
    """The machine this runs on, for the llvm back end."""
    return cpu_target("llvm")


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
    """An FPGA target from the parts fpga_model registers (flexsched.plugins); no part: the VU9P (the paper's)."""
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
    """The target called name: llvm ($FLEXSCHED_LLVM_TARGET, else this CPU), llvm -mcpu=..., cuda[:gpu], fpga[:part]."""
    if isinstance(name, Target):
        return name
    if name == "llvm" and os.environ.get(LLVM_TARGET_VARIABLE, "").strip():
        try:
            return cpu_target(os.environ[LLVM_TARGET_VARIABLE].strip())
        except TargetError as err:
            raise TargetError(f"{LLVM_TARGET_VARIABLE}: {err}") from None
    if isinstance(name, str) and name.startswith("llvm "):
        return cpu_target(name)
    if isinstance(name, str) and name.startswith("fpga:"):
        return fpga(name.split(":", 1)[1])
    if isinstance(name, str) and name.startswith("cuda:"):
        return nvidia_gpu(name.split(":", 1)[1])
    if name not in _TARGETS:
        raise TargetError(f"unknown target '{name}'; choose one of {', '.join(_TARGETS)}")
    return _TARGETS[name]()


def target_names():
    return tuple(_TARGETS)
