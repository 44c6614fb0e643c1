"""The roofs a kernel's speed is judged against: peak arithmetic (GFLOPS) and peak memory
bandwidth (GB/s) of a target, and which of the two binds a task of a given arithmetic intensity.

A GPU's roofs are its datasheet figures (flexsched.gpus). A CPU's are measured on this host,
once per process: the FMA roof with a JIT-compiled loop of independent vector FMA chains on
every core, the memory roof with large array copies on every core (read + write bytes). A core's
speed flips between levels for seconds at a time, so a measurement can only be too low: given a
file, the roof kept there is the best ever measured on this CPU, and each measurement can raise it.
"""

from __future__ import annotations

import ctypes
import functools
import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from flexsched.target import get_target

MAX_FMA_CHAINS = 16         # independent accumulators: more than the 8 that hide FMA latency on two pipes
# Vector registers the FMA loop needs besides its accumulators: its two constant operands, and slack
# for the loop itself. With 16 accumulators on a 16-register target (AVX2) LLVM spilled one chain to
# the stack, and the roof read 98 instead of 172 GFLOPS on a 2-core Zen 3.
FMA_SPARE_REGISTERS = 4
FMA_ITERATIONS = 1_000_000  # per call, per core: a few milliseconds (2-4 on the x86 hosts measured)
COPY_BYTES = 64 * 2**20     # per core: beyond the last-level cache
ROUNDS = 5                  # best of: a core's speed flips between levels for seconds at a time


@dataclass(frozen=True)
class Roof:
    """Peak GFLOPS and GB/s of a target, and where the figures come from."""

    peak_gflops: float
    peak_gbps: float
    source: str
    cache_bytes: int = 0   # the last-level cache: data that fit there can beat the DRAM roof

    @property
    def ridge(self):
        """FLOP per byte at which the two roofs meet: below it memory binds, above it arithmetic."""
        return self.peak_gflops / self.peak_gbps

    def bound(self, flops, bytes_moved):
        """'compute' or 'memory': the roof that binds a task with this much work and traffic."""
        if bytes_moved <= 0:
            return "compute"
        return "memory" if flops / bytes_moved < self.ridge else "compute"

    def attainable_gflops(self, flops, bytes_moved):
        """The roofline: min(peak GFLOPS, intensity x peak GB/s)."""
        if bytes_moved <= 0:
            return self.peak_gflops
        return min(self.peak_gflops, flops / bytes_moved * self.peak_gbps)

    def to_dict(self):
        return {"peak_gflops": self.peak_gflops, "peak_gbps": self.peak_gbps, "source": self.source,
                "cache_bytes": self.cache_bytes}


def roof_for(target="llvm", keep_in=None):
    """The Roof of a target: datasheet figures for a GPU, measured figures for this CPU (raised to
    the best kept in the JSON file `keep_in`, which is updated); None for kinds without one here
    (an FPGA design's bound comes from its model)."""
    target = get_target(target)
    if target.kind == "gpu":
        from flexsched.target import gpu_device

        device = gpu_device(target)
        return Roof(device.peak_gflops, device.memory_gbps, f"{device.part} datasheet", device.l2_bytes)
    if target.kind == "cpu":
        measured = measured_cpu_roof(target.cores, target.vector_lanes, target.vector_registers)
        return _best_kept(measured, keep_in, _cpu_key(target)) if keep_in else measured
    return None


def _cpu_key(target):
    """Which CPU a kept roof belongs to: LLVM's name for the host CPU, cores and vector lanes."""
    import llvmlite.binding as llvm

    return f"{llvm.get_host_cpu_name()} x{target.cores} ({target.vector_lanes} lanes)"


def _best_kept(measured, path, key):
    """The higher of each roof measured now and kept in the file under key; the file keeps the best."""
    try:
        with open(path) as kept_file:
            kept = json.load(kept_file)
    except (OSError, ValueError):
        kept = {}
    previous = kept.get(key) if isinstance(kept.get(key), dict) else {}
    best = Roof(max(measured.peak_gflops, float(previous.get("peak_gflops", 0))),
                max(measured.peak_gbps, float(previous.get("peak_gbps", 0))),
                measured.source.replace("measured on", "best measured on", 1), measured.cache_bytes)
    if best.to_dict() != previous:
        kept[key] = best.to_dict()
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            partial = f"{path}.{os.getpid()}.partial"
            with open(partial, "w") as out:
                json.dump(kept, out, indent=1)
            os.replace(partial, path)   # whole or not at all: a reader never sees half a file
        except OSError:
            pass   # the roof is a reading aid: an unwritable cache only means measuring again
    return best


def fma_chains(registers):
    """Independent FMA chains for a target with this many vector registers: as many as fit beside
    the loop's other operands, so that no accumulator lives on the stack."""
    return max(1, min(MAX_FMA_CHAINS, (registers or 16) - FMA_SPARE_REGISTERS))


@functools.cache
def measured_cpu_roof(cores, lanes, registers=16):
    """This host's FMA and copy roofs on `cores` threads (measured once per process)."""
    gflops = fma_gflops(cores, lanes, registers)
    gbps = _copy_gbps(cores)
    return Roof(gflops, gbps, f"measured on this CPU: {fma_chains(registers)} FMA chains of {lanes} float32 lanes "
                              f"and array copies, on {cores} thread(s)", last_level_cache_bytes())


def last_level_cache_bytes():
    """The largest cache of CPU 0, from Linux's sysfs (0 where it does not say)."""
    sizes = []
    for index in range(8):
        try:
            with open(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size") as size_file:
                text = size_file.read().strip()
        except OSError:
            break
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=0)


def fma_gflops(cores, lanes, registers=16):
    """Best of ROUNDS: every core runs the FMA loop at once; 2 FLOP per lane per FMA."""
    with FmaOnEveryCore(cores, lanes, registers) as run:
        best = 0.0
        for _ in range(ROUNDS):
            started = time.perf_counter()
            run()
            best = max(best, run.flops / (time.perf_counter() - started) / 1e9)
    return best


class FmaOnEveryCore:
    """A call that runs the FMA loop once on each of `cores` threads at once, and the FLOP that does:
    the roof a parallel kernel meets, to time in the same phase of the host as a kernel. Given
    `seconds`, a call is made to last about that long: a short one (2 ms with AVX2 code) timed right
    after PyTorch shared the second core with its OpenMP threads still spinning, and read half the roof."""

    def __init__(self, cores, lanes, registers=16, seconds=None):
        chains = fma_chains(registers)
        self._loop = _fma_loop(lanes, chains)
        self._sink = (ctypes.c_float * lanes)()
        self._cores = cores
        self._pool = ThreadPoolExecutor(max_workers=cores)
        self.iterations = FMA_ITERATIONS
        if seconds:
            self()   # warm-up: the pool's threads start
            started = time.perf_counter()
            self()
            self.iterations = max(1, int(FMA_ITERATIONS * seconds / (time.perf_counter() - started)))
        self.flops = cores * 2.0 * lanes * chains * self.iterations

    def __call__(self):
        list(self._pool.map(lambda _: self._loop(self.iterations, self._sink), range(self._cores)))

    def close(self):
        self._pool.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _copy_gbps(cores):
    """Best of ROUNDS: every core copies its own large array at once; bytes read plus bytes written."""
    sources = [np.ones(COPY_BYTES // 4, dtype=np.float32) for _ in range(cores)]
    targets = [np.empty_like(source) for source in sources]
    best = 0.0
    with ThreadPoolExecutor(max_workers=cores) as pool:
        for _ in range(ROUNDS):
            started = time.perf_counter()
            list(pool.map(lambda pair: np.copyto(pair[1], pair[0]), zip(sources, targets)))
            best = max(best, cores * 2 * COPY_BYTES / (time.perf_counter() - started) / 1e9)
    return best


@functools.cache
def _fma_loop(lanes, chains):
    """A native `void fma_loop(i64 iterations, float *sink)` of `chains` independent vector FMA
    chains (the sink keeps LLVM from deleting them); ctypes drops the GIL while it runs."""
    import llvmlite.binding as llvm

    from .cpu_backend import _target_machine   # this host's CPU and features, as kernels are built for

    module = llvm.parse_assembly(fma_loop_ir(lanes, chains))
    module.verify()
    engine = llvm.create_mcjit_compiler(module, _target_machine())
    engine.finalize_object()
    function = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(engine.get_function_address("fma_loop"))
    _keep_alive.append(engine)
    return lambda iterations, sink: function(iterations, ctypes.addressof(sink))


def fma_loop_ir(lanes, chains):
    """LLVM IR text of the FMA loop: each chain multiplies by just below 1 and adds 1 (no overflow)."""
    vector = f"<{lanes} x float>"
    one = f"{vector} {_splat(lanes, 1.0)}"
    scale = f"{vector} <{', '.join(['float 0x3FEFFFFFE0000000'] * lanes)}>"
    phis = "\n".join(f"  %acc{c} = phi {vector} [ {_splat(lanes, 1.0)}, %entry ], [ %next{c}, %loop ]"
                      for c in range(chains))
    fmas = "\n".join(f"  %next{c} = call {vector} @llvm.fma.v{lanes}f32({vector} %acc{c}, {scale}, {one})"
                     for c in range(chains))
    total = ["%next0"]
    sums = []
    for c in range(1, chains):
        sums.append(f"  %sum{c} = fadd {vector} {total[-1]}, %next{c}")
        total.append(f"%sum{c}")
    return f"""
declare {vector} @llvm.fma.v{lanes}f32({vector}, {vector}, {vector})
define void @fma_loop(i64 %n, ptr %sink) {{
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
{phis}
{fmas}
  %i.next = add i64 %i, 1
  %done = icmp sge i64 %i.next, %n
  br i1 %done, label %exit, label %loop
exit:
{chr(10).join(sums)}
  store {vector} {total[-1]}, ptr %sink, align 4
  ret void
}}
"""


def _splat(lanes, value):
    return f"<{', '.join([f'float {value:.1f}'] * lanes)}>"


_keep_alive = []   # the engines that own the compiled loops


def describe(gflops, gbps, flops, bytes_moved, roof):
    """One line: achieved GFLOPS and GB/s, the binding roof and how close the kernel is to it."""
    text = f"{gflops:.2f} GFLOPS, {gbps:.2f} GB/s"
    if roof is None or not math.isfinite(gflops):
        return text
    which = roof.bound(flops, bytes_moved)
    attainable = roof.attainable_gflops(flops, bytes_moved)
    share = gflops / attainable if attainable > 0 else 0.0
    peak = f"{roof.peak_gbps:.0f} GB/s" if which == "memory" else f"{roof.peak_gflops:.0f} GFLOPS"
    text = f"{text}: {which}-bound, {share:.0%} of the {which} roof ({peak}, {roof.source})"
    if which == "memory" and 0 < bytes_moved <= roof.cache_bytes:
        text += (f"; its {bytes_moved / 2**20:.3g} MiB fit in the {roof.cache_bytes / 2**20:.0f} MiB last-level "
                 "cache, so it can pass the memory roof")
    return text
