"""A static GPU cost model, after Tuna (sec. III-B): a kernel's time predicted from its PTX, what
ptxas reports of it and its loop IR, so schedules can be tuned for a GPU on a machine without one.

Per launch:
- instruction mix per thread: every PTX instruction weighted by how often a thread executes its
  source line (the CUDA printer's line weights: the extents of the loops around it that nvcc
  keeps as loops), grouped into FP32, integer, special-function, shared, global, local (spills)
  and other instructions;
- occupancy: resident blocks per SM from threads, registers (allocated per warp in units of 256),
  shared memory and the block limit; waves of blocks over the SMs;
- shared-memory bank conflicts and global-memory coalescing from the loop IR: each access's
  addresses evaluated for the 32 threads of the first warp give the bank replays and the 32-byte
  sectors a warp instruction touches;
- time: the busiest SM's blocks times the slowest pipe (FP32, integer, SFU, issue, shared), or
  its blocks' latency in rounds of the resident ones (a block's warps issue one instruction a
  cycle, wait out dependent FMA chains over the register tile and one memory round trip per
  barrier phase), whichever is longer; the L2 and DRAM traffic over the bandwidth of the SMs
  in use; plus a launch overhead.
The figures are the model's, not measurements: rank correlation with real timings is what it is
for, and it has to be checked on a GPU (experiments/gpu_benchmark.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from flexsched.errors import FlexschedError
from flexsched.expr import Load, as_expr, walk
from flexsched.numpy_expr import eval_expr

from .gpu_lower import BLOCK_AXES, THREAD_AXES
from .ir import Allocate, For, IfThenElse, Seq, Store

SECTOR_BYTES = 32
REGISTER_UNIT = 256          # registers are allocated per warp in units of this many
SHARED_RESERVED_BYTES = 1024  # per block, by the runtime (sm_80 and later)
INTEGER_DIVISION_COST = 20   # PTX div/rem on integers expand to about this many instructions
FLOAT_DIVISION_COST = 8


@dataclass(frozen=True)
class LaunchEstimate:
    """The model's view of one launch."""

    entry: str
    blocks: int
    threads: int
    registers: int
    shared_bytes: int
    blocks_per_sm: int
    waves: int
    limited_by: str             # what caps resident blocks: threads, registers, shared, blocks
    instructions: dict          # per thread, by class
    shared_conflict: float      # average replays per shared access (1 = none)
    coalescing: float           # distinct bytes the threads ask for over bytes the 32-byte sectors move (1 = perfect)
    l2_bytes: float
    dram_bytes: float
    cycles: dict                # per-SM cycles by limit: fp32, integer, sfu, issue, shared, latency
    seconds: float
    bound: str


@dataclass(frozen=True)
class Estimate:
    """The model's prediction for a kernel: seconds and each launch's figures."""

    seconds: float
    launches: tuple

    @property
    def bound(self):
        return max(self.launches, key=lambda launch: launch.seconds).bound if self.launches else "none"

    def to_dict(self):
        return {"seconds": self.seconds, "bound": self.bound, "launches": [asdict(l) for l in self.launches]}


class ModelError(FlexschedError, ValueError):
    """A kernel the model cannot price (it cannot launch on the device: one line saying why)."""


def estimate(module, device):
    """Estimate of a CudaModule (its PTX and ptxas figures must be known) on a GpuDevice."""
    if module.unit is None:
        raise ModelError("the GPU model needs the kernel's PTX; nvcc is not installed")
    launches = []
    for name, launch in module.cuda.entries:
        kernel = module.unit.kernels.get(name)
        if kernel is None:
            raise ModelError(f"nvcc produced no entry '{name}'")
        launches.append(_launch_estimate(name, launch, kernel, module.cuda.line_weights, device))
    return Estimate(sum(l.seconds for l in launches), tuple(launches))


def instruction_mix(kernel, weights):
    """Per-thread executions of each class of PTX instruction."""
    mix = dict.fromkeys(("fp32", "integer", "sfu", "shared", "global_load", "global_store", "local", "barrier",
                         "other"), 0.0)
    for opcode, line in kernel.instructions:
        weight = weights.get(line, 1)
        kind, cost = _classify(opcode)
        mix[kind] += weight * cost
    return mix


def _classify(opcode):
    """(class, issue cost) of a PTX opcode."""
    parts = opcode.split(".")
    head = parts[0]
    if head in ("ld", "st", "ldu", "atom", "red"):
        space = parts[1] if len(parts) > 1 else ""
        if space == "shared":
            return "shared", 1
        if space == "local":
            return "local", 1
        if space == "global":
            return ("global_load" if head in ("ld", "ldu") else "global_store"), 1
        return "other", 1   # ld.param
    if head == "bar" or head == "barrier":
        return "barrier", 1
    is_float = any(part in ("f32", "f64", "f16") for part in parts)
    if head in ("ex2", "lg2", "rsqrt", "sin", "cos", "rcp", "sqrt", "tanh"):
        return "sfu", 1
    if head in ("div", "rem"):
        return ("fp32", FLOAT_DIVISION_COST) if is_float else ("integer", INTEGER_DIVISION_COST)
    if is_float and head in ("fma", "add", "sub", "mul", "mad", "neg", "abs", "min", "max", "setp", "selp",
                             "testp", "copysign"):
        return "fp32", 1
    if head in ("add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "not", "min", "max", "setp", "selp",
                "neg", "abs", "cvt", "mul24", "mad24", "shf", "prmt", "lop3", "bfe", "bfi", "popc", "clz"):
        return "integer", 1
    return "other", 1


def _launch_estimate(name, launch, kernel, weights, device):
    threads = launch.threads
    warps = -(-threads // device.warp_size)
    registers = max(1, kernel.resources.registers)
    shared = launch.shared_bytes + kernel.resources.static_shared_bytes
    per_sm, limited_by = _resident_blocks(warps, registers, shared, device, name)
    mix = instruction_mix(kernel, weights)
    accesses = _memory_accesses(launch)
    conflict = _shared_conflict(accesses, launch, device)
    coalescing, l2_bytes = _global_traffic(accesses, launch, device)
    dram_bytes = _dram_bytes(accesses, l2_bytes, device)

    blocks = launch.blocks
    busiest = -(-blocks // device.sms)                  # blocks the busiest SM runs
    waves = -(-blocks // (device.sms * per_sm))
    resident = min(per_sm, busiest)
    spills = mix["local"]
    pipes = {
        "fp32": warps * mix["fp32"] / (device.fp32_lanes_per_sm / 32),
        "integer": warps * mix["integer"] / (device.int32_lanes_per_sm / 32),
        "sfu": warps * mix["sfu"] / (device.sfu_lanes_per_sm / 32),
        "issue": warps * sum(mix.values()) / 4,
        "shared": warps * (mix["shared"] * conflict + spills),
    }
    cycles = {pipe: busiest * value for pipe, value in pipes.items()}
    # resident blocks overlap; the busiest SM runs its blocks in ceil(busiest / resident) rounds
    cycles["latency"] = -(-busiest // resident) * _block_latency(mix, launch, device)
    sm_seconds = max(cycles.values()) / (device.clock_mhz * 1e6)
    active = min(1.0, blocks / device.sms)   # bandwidth comes with the SMs that ask for it
    memory_seconds = max(l2_bytes / (device.l2_gbps * 1e9 * active), dram_bytes / (device.memory_gbps * 1e9 * active))
    seconds = max(sm_seconds, memory_seconds) + device.launch_overhead_s
    bound = "memory" if memory_seconds > sm_seconds else max(cycles, key=cycles.get)
    return LaunchEstimate(name, blocks, threads, registers, shared, per_sm, waves, limited_by,
                          {k: round(v, 1) for k, v in mix.items()}, round(conflict, 3), round(coalescing, 3),
                          l2_bytes, dram_bytes, {k: round(v) for k, v in cycles.items()}, seconds, bound)


def _resident_blocks(warps, registers, shared, device, name):
    """(blocks resident per SM, the limit that caps them); ModelError if none fits."""
    registers_per_warp = -(-registers * device.warp_size // REGISTER_UNIT) * REGISTER_UNIT
    limits = {
        "threads": device.max_threads_per_sm // (warps * device.warp_size),
        "registers": device.registers_per_sm // (registers_per_warp * warps),
        "blocks": device.max_blocks_per_sm,
    }
    if shared:
        limits["shared"] = device.shared_bytes_per_sm // (shared + SHARED_RESERVED_BYTES)
    if registers > device.max_registers_per_thread:
        raise ModelError(f"{name}: {registers} registers per thread, over the device's {device.max_registers_per_thread}")
    limited_by = min(limits, key=limits.get)
    if limits[limited_by] < 1:
        raise ModelError(f"{name}: one block of {warps * device.warp_size} threads does not fit an SM "
                         f"({limited_by}: {registers} registers per thread, {shared} bytes of shared memory)")
    return limits[limited_by], limited_by


def _block_latency(mix, launch, device):
    """Cycles one block takes start to end with nothing else in its way: a warp issues at most one
    instruction a cycle and waits out its dependent FMA chains (one chain per register
    accumulator), and every barrier phase, plus the final stores, waits one memory round trip."""
    accumulators = max(1, _register_tile(launch.stmt))
    chains = mix["fp32"] * device.fma_latency_cycles / accumulators
    phases = mix["barrier"] / 2 if mix["barrier"] else 0
    memory = (phases + 1) * (device.global_latency_cycles + device.shared_latency_cycles * bool(phases))
    return max(sum(mix.values()), chains) + memory


def _register_tile(stmt):
    """Elements of the local buffers a thread keeps (its independent accumulators)."""
    total = 0
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, Allocate):
            if node.buffer.scope == "local":
                total += node.buffer.size
            stack.append(node.body)
        elif isinstance(node, (For,)):
            stack.append(node.body)
        elif isinstance(node, Seq):
            stack.extend(node.stmts)
        elif isinstance(node, IfThenElse):
            stack.append(node.then_body)
            if node.else_body is not None:
                stack.append(node.else_body)
    return total


# ---------------------------------------------------------------- memory accesses from the loop IR

@dataclass(frozen=True)
class _Access:
    buffer: object
    indices: tuple
    store: bool
    count: float      # executions per thread
    width: int = 1    # elements per thread per execution (a vectorised copy moves several)


def _memory_accesses(launch):
    """Every global or shared access of the launch with its executions per thread."""
    found = []

    def visit(stmt, count, width):
        if isinstance(stmt, For) and stmt.kind == "vectorized":  # one wide access per thread
            visit(stmt.body, count, width * stmt.extent)
        elif isinstance(stmt, For):
            visit(stmt.body, count if stmt.kind in BLOCK_AXES + THREAD_AXES else count * stmt.extent, width)
        elif isinstance(stmt, (Allocate,)):
            visit(stmt.body, count, width)
        elif isinstance(stmt, Seq):
            for part in stmt.stmts:
                visit(part, count, width)
        elif isinstance(stmt, IfThenElse):
            _loads(stmt.cond, count, width, found)
            visit(stmt.then_body, count, width)
            if stmt.else_body is not None:
                visit(stmt.else_body, count, width)
        elif isinstance(stmt, Store):
            for index in stmt.indices:
                _loads(as_expr(index, "int64"), count, width, found)
            _loads(as_expr(stmt.value, stmt.buffer.dtype), count, width, found)
            if stmt.buffer.scope in ("global", "shared"):
                found.append(_Access(stmt.buffer, tuple(stmt.indices), True, count, width))

    visit(launch.stmt, 1.0, 1)
    return found


def _loads(expr, count, width, found):
    for node in walk(expr):
        if isinstance(node, Load) and node.tensor.scope in ("global", "shared"):
            found.append(_Access(node.tensor, node.indices, False, count, width))


def _first_warp(launch, device):
    """Values of the thread loops' variables for the threads of the first warp (x fastest)."""
    loops = {}
    stack = [launch.stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, For):
            if node.kind in THREAD_AXES:
                loops[node.kind] = node
            stack.append(node.body)
        elif isinstance(node, Allocate):
            stack.append(node.body)
    lanes = np.arange(min(device.warp_size, launch.threads), dtype=np.int64)
    env, stride = {}, 1
    for axis in THREAD_AXES:
        loop = loops.get(axis)
        if loop is not None:
            env[id(loop.var)] = (lanes // stride) % loop.extent
            stride *= loop.extent
    return env, len(lanes)


def _addresses(access, env, lanes):
    """Flat element index of an access for each lane (other loop variables at 0), or None where an
    index depends on loaded data."""
    class _Zero(dict):
        def __missing__(self, key):
            return np.zeros(lanes, dtype=np.int64)

    values = _Zero(env)
    try:
        flat = np.zeros(lanes, dtype=np.int64)
        for index, extent in zip(access.indices, access.buffer.shape):
            value = eval_expr(as_expr(index, "int64"), values, _no_loads)
            flat = flat * extent + np.broadcast_to(np.asarray(value, dtype=np.int64), (lanes,))
        return flat
    except _DataDependent:
        return None


class _DataDependent(Exception):
    pass


def _no_loads(load, indices):
    raise _DataDependent()


def _shared_conflict(accesses, launch, device):
    """Average replays per shared-memory warp access (1 when no two lanes hit one bank at
    different words), weighted by how often each access runs."""
    env, lanes = _first_warp(launch, device)
    total = weighted = 0.0
    for access in accesses:
        if access.buffer.scope != "shared":
            continue
        flat = _addresses(access, env, lanes)
        degree = 1 if flat is None else _bank_replays(flat, access, device)
        total += access.count
        weighted += access.count * degree
    return weighted / total if total else 1.0


def _bank_replays(flat, access, device):
    """Replays of one warp access: the most distinct 4-byte words one bank must serve, over the
    words each lane moves (a 16-byte access is served a quarter of the warp at a time)."""
    words_per_lane = max(1, access.width * _item_size(access.buffer.dtype) // 4)
    first = flat * _item_size(access.buffer.dtype) // 4
    words = np.unique(np.concatenate([first + k for k in range(words_per_lane)]))
    busiest = np.bincount(words % device.shared_banks).max()
    return max(1, -(-int(busiest) // words_per_lane))


def _global_traffic(accesses, launch, device):
    """(distinct bytes asked for over bytes moved, L2 bytes of the whole launch) of its global
    accesses: each warp access moves the 32-byte sectors its lanes' elements fall in."""
    env, lanes = _first_warp(launch, device)
    warps = launch.blocks * -(-launch.threads // device.warp_size)
    used = moved = 0.0
    for access in accesses:
        if access.buffer.scope != "global":
            continue
        item = _item_size(access.buffer.dtype)
        flat = _addresses(access, env, lanes)
        if flat is None:   # data-dependent: one sector per lane
            sectors, asked = lanes, lanes * access.width * item
        else:   # elements of a lane's vector are contiguous from its address
            elements = np.unique(np.concatenate([flat + k for k in range(access.width)]))
            sectors, asked = len(np.unique(elements * item // SECTOR_BYTES)), len(elements) * item
        used += access.count * asked
        moved += access.count * sectors * SECTOR_BYTES
    return (used / moved if moved else 1.0), moved * warps


def _dram_bytes(accesses, l2_bytes, device):
    """DRAM traffic: every global buffer the launch touches once, plus the L2 traffic that misses
    when they do not fit in L2 together."""
    buffers = {access.buffer.name: access.buffer for access in accesses if access.buffer.scope == "global"}
    footprint = sum(b.size * _item_size(b.dtype) for b in buffers.values())
    miss = max(0.0, 1.0 - device.l2_bytes / footprint) if footprint else 0.0
    return footprint + max(0.0, l2_bytes - footprint) * miss


def _item_size(dtype):
    return 8 if dtype in ("float64", "int64") else 4
