"""A static CPU cost model, after Tuna (sec. III-A): a kernel's time predicted from the assembly
LLVM makes of it and from its loop IR, without running it.

Per segment (a top-level loop nest, its outer loop spread over the cores when parallel):
- instruction mix: the optimised module's assembly for the target's CPU (codegen.cpu_backend.
  assembly), the natural loops of its control flow (codegen.x86_asm) weighted by their trip
  counts: from each loop's counter where the assembly says it, else from the loop-IR loop it lines
  up with (see _resolve_trips), a loop behind a branch at the share of iterations that take it
  (branch_share); the parallel loop runs the chunks the busiest core takes
  (codegen.runtime's chunking); instruction classes from codegen.x86_instructions;
- compute cycles: each loop body's instructions over the core's pipes (FMA, vector ALU, shuffle,
  load and store ports, issue width, a 512-bit operation taking two slots where the data path
  is 256 bits wide) or the chains it carries into its next pass (dependence_chains), whichever
  is longer, plus waits on masked stores, times how often the body runs; calls to the C library
  at a fixed price; the bodies holding FMAs scaled to run the loop IR's multiply-adds where the
  trip counts said otherwise (_recounted_fma_cycles), a vectorised loop's in the lanes its
  vectors take;
- data movement: bytes brought into L1, L2 and the core's share of the last-level cache by the
  busiest core's share of the nest (codegen.cache_model), over each level's bandwidth;
- time: the larger of compute and the slowest level plus half the smaller (MEMORY_OVERLAP), and
  the cost of calling the segment and of handing chunks to the thread pool.
The target says the vector width, the cores and the CPU (whose caches flexsched.cpus lists);
nothing is read from the machine this runs on. Its figures rank schedules; the absolute times
are rough (docs/results/cpu_model.md has its rank correlation with measurements).
"""

from __future__ import annotations

import functools
import math
import operator
import re
from dataclasses import asdict, dataclass

import numpy as np

from flexsched import cpus
from flexsched.affine import affine_form
from flexsched.errors import FlexschedError
from flexsched.expr import Binary, Compare, Logical

from . import x86_asm, x86_instructions
from .cache_model import Cache, CacheModel
from .ir import Allocate, For, IfThenElse, Seq, Store
from .kept_scratch import GIVE_SCRATCH, TAKE_SCRATCH
from .runtime import CHUNKS_PER_THREAD
from .vectorize import MAX_VECTOR_LANES, padded_lanes, vectorize_blocker

_COMPARISONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
                "!=": operator.ne}
BRANCH_SHARE_POINTS = 1 << 16   # iterations branch_share counts at most

# ---------------------------------------------------------------- the core, in a few named numbers
# Throughputs per cycle of a current x86-64 core (Zen 3/4, Skylake to Sapphire Rapids, from the
# vendors' optimisation guides and Agner Fog's tables), in operations of the data path's width.
FMA_PIPES = 2             # FMA / multiply / add units
VECTOR_PIPES = 4          # every vector ALU operation (FMA, logic, integer, shuffle) shares these
SHUFFLE_PIPES = 1         # shuffles, broadcasts from a register, inserts and extracts
LOAD_PORTS = 2
STORE_PORTS = 1
ISSUE_WIDTH = 4           # instructions the front end sustains per cycle
FMA_LATENCY = 4           # cycles before a dependent FMA can start (an accumulator chain)
# Cores whose FMA takes 5 cycles (Agner Fog's tables): on the 2-core Zen 2, JIT loops of 2, 4, 6
# and 8 independent FMA chains ran at 0.20, 0.40, 0.60 and 0.80 of 10 chains' rate, as 5-cycle
# chains on two pipes would (experiments/fma_chains.py), where 4 cycles made the model say 0.25-0.89.
FMA_LATENCIES = dict.fromkeys(("haswell", "broadwell", "znver1", "znver2"), 5)
# A loop whose carried chains and busiest pipe need about the same cycles runs slower than either
# says: its cycles are the CHAIN_OVERLAP-norm of the two. JIT loops of independent FMA chains on a
# Xeon (Emerald Rapids), 256- and 512-bit alike, ran at 0.50-0.54, 0.71-0.76, 0.88-0.89 and 1.0 of
# the pipes' rate with 4, 6, 8 and 10 chains, where the larger of the two bounds says 0.5, 0.75, 1.0
# and 1.0; this norm says 0.50, 0.73, 0.89 and 0.96 (experiments/fma_chains.py).
CHAIN_OVERLAP = 6
ADD_LATENCY = 3
STORE_FORWARD_LATENCY = 8  # a load of a value stored just before, forwarded from the store queue
# A load of what a masked store wrote gets nothing forwarded: it waits until the store reaches
# L1, and such waits do not overlap. Fitted to two YOLO C13 schedules that accumulate into memory
# under a lane mask (8 and 12 such loads a loop pass took 114 and 195 cycles on the 2-core Zen 4).
MASKED_STORE_FORWARD_CYCLES = 15
DIVIDE_SLOTS = 8          # a vector divide or square root holds an FP pipe about this long
CALL_CYCLES = 40          # a C library math call (expf, tanhf) per element
ALLOCATION_CYCLES = 200   # malloc or free of a scratch buffer
COPY_BYTES_PER_CYCLE = 32  # memcpy / memset that LLVM made of a copy or zeroing loop
# Data paths narrower than the widest vectors: Zen 4 runs a 512-bit operation as two 256-bit halves.
DATAPATH_BITS = {"znver4": 256}
# Bandwidth into each cache level, bytes per cycle per core, and DRAM's share per core.
L2_BYTES_PER_CYCLE = 64   # L2 -> L1: a line a cycle (Zen 4, Skylake-SP and later)
L3_BYTES_PER_CYCLE = 16   # L3 -> L2: half the guides' 32, as sustained over many cores' traffic
DRAM_BYTES_PER_CYCLE = 3  # about 10 GB/s per core of a loaded server socket
# How much of the shorter of compute and data movement hides under the longer (1: all, max of
# the two; 0: none, their sum). Out-of-order cores and prefetchers hide part of it; of 0.25, 0.5,
# 0.75 and 1, 0.5 ranked the measured candidates of docs/results/cpu_model.md best.
MEMORY_OVERLAP = 0.5
CLOCK_HZ = 3.5e9          # a typical sustained clock of a current x86-64 core under vector load
SEGMENT_CALL_SECONDS = 1e-6    # one call of a segment through ctypes
PARALLEL_SECONDS = 15e-6       # waking the thread pool and collecting its chunks
_LIBRARY_ALLOCATIONS = ("malloc", "aligned_alloc", "free")
# The module's own functions that take and give back kept heap scratch (LLVM may clone them with a
# suffix): priced as one allocation, which they make when no kept buffer is free.
_SCRATCH_HELPERS = (TAKE_SCRATCH, GIVE_SCRATCH)
_LIBRARY_COPIES = ("memcpy", "memset", "memmove")


class ModelError(FlexschedError, ValueError):
    """A kernel the CPU model cannot price (one line saying why)."""


@dataclass(frozen=True)
class SegmentEstimate:
    """The model's view of one segment, for the busiest core."""

    symbol: str
    parallel_extent: int          # 0 for a segment that runs once on one core
    calls: int                    # calls of the segment the busiest core makes
    instructions: dict            # dynamic instructions by class (fma, load, store, shuffle, gather, ...)
    fma_lanes: float              # multiply-adds the FMAs do (lanes x FMAs)
    cycles: dict                  # compute cycles by limit (pipes, latency) summed over loop bodies
    compute_cycles: float
    bytes: dict                   # bytes into l1, l2, l3 (from the level below)
    unresolved_loops: int         # loops of the assembly whose trip count neither it nor the loop IR said
    seconds: float
    bound: str
    multiply_adds: float = 0.0    # multiply-adds of the loop IR the busiest core runs (what fma_lanes should be)


@dataclass(frozen=True)
class Estimate:
    """The model's prediction for a kernel: seconds per call and each segment's figures."""

    seconds: float
    segments: tuple

    @property
    def bound(self):
        return max(self.segments, key=lambda s: s.seconds).bound if self.segments else "none"

    @property
    def unresolved_loops(self):
        """Loops whose trip count the model took as 1, not knowing it: the time is then a guess from below."""
        return sum(segment.unresolved_loops for segment in self.segments)

    def to_dict(self):
        return {"seconds": self.seconds, "bound": self.bound, "unresolved_loops": self.unresolved_loops,
                "segments": [asdict(s) for s in self.segments]}


@dataclass(frozen=True)
class Core:
    """What the model takes from a target: vector data path, cores, caches."""

    datapath_bits: int
    cores: int
    caches: cpus.Caches
    lanes: int = 1   # float32 lanes of the widest vector
    fma_latency: int = FMA_LATENCY

    @classmethod
    def of(cls, target):
        if target.kind != "cpu":
            raise ModelError(f"target '{target.name}' is not a CPU")
        return cls(DATAPATH_BITS.get(target.cpu, 32 * target.vector_lanes), max(1, target.cores),
                   cpus.caches(target.cpu), max(1, target.vector_lanes),
                   FMA_LATENCIES.get(target.cpu, FMA_LATENCY))


# ---------------------------------------------------------------- entry points

def estimate(task, schedule=None, target="llvm"):
    """Estimate of task under schedule (a Schedule, its JSON or None) on a CPU target, in this process."""
    from flexsched.target import get_target

    from .cpu_backend import assembly
    from .kernel import lower_for

    target = get_target(target)
    core = Core.of(target)
    _check_x86()
    _, lowered = lower_for(task, schedule, target)
    return estimate_assembly(assembly(lowered.func, legalised=True, target=target), core)


def _check_x86():
    """ModelError unless LLVM makes x86-64 code here (the model reads x86 assembly)."""
    import llvmlite.binding as llvm

    triple = llvm.get_default_triple()
    if not triple.startswith("x86_64"):
        raise ModelError(f"the CPU model reads x86-64 assembly, but LLVM here makes code for {triple}")


def estimate_in_worker(task, schedule_json, target_dict):
    """estimate(), as its to_dict(), for a codegen.worker call (an LLVM crash or hang kills only the worker)."""
    from flexsched.target import Target

    return estimate(task, schedule_json, Target.from_dict(target_dict)).to_dict()


def estimate_assembly(code, core):
    """Estimate of a codegen.cpu_backend.Assembly on a Core."""
    from .llvm_backend import segments as segments_of

    functions = x86_asm.parse(code.text)
    parts = []
    for (symbol, extent), stmt in zip(code.segments, segments_of(code.func.body)):
        if symbol not in functions:
            raise ModelError(f"the assembly has no function '{symbol}'")
        parts.append(_segment(symbol, extent, stmt, functions, core))
    return Estimate(sum(part.seconds for part in parts), tuple(parts))


# ---------------------------------------------------------------- one segment

def _segment(symbol, parallel_extent, stmt, functions, core):
    function, body = _body_function(symbol, functions)
    outlined = _outlined_loop(stmt) if parallel_extent else None
    chunks = _busiest_core_chunks(parallel_extent, core.cores) if parallel_extent else [None]
    active = min(core.cores, parallel_extent) if parallel_extent else 1
    macs = _multiply_adds(stmt, outlined, sum(chunks) if outlined is not None else None, core.lanes)
    trips, parallel_loop, unresolved = _resolve_trips(body, stmt, outlined)
    tally = _Tally()
    for chunk in chunks:   # each chunk is a call of the segment, its parallel loop over the chunk
        _function_cycles(function, functions, {**trips, parallel_loop: chunk}, core, tally, 1.0)
    extents = {outlined.var.name: sum(chunks)} if outlined is not None else None
    model = CacheModel(stmt, extents)
    caches = core.caches
    moved = {"l1": model.moved(Cache(caches.l1, caches.l1_ways)), "l2": model.moved(Cache(caches.l2, caches.l2_ways)),
             "l3": model.moved(Cache(caches.l3 / active))}
    compute = (tally.total_cycles + _recounted_fma_cycles(tally, macs)) / CLOCK_HZ
    memory = {"L2": moved["l1"] / (L2_BYTES_PER_CYCLE * CLOCK_HZ), "L3": moved["l2"] / (L3_BYTES_PER_CYCLE * CLOCK_HZ),
              "DRAM": moved["l3"] / (DRAM_BYTES_PER_CYCLE * CLOCK_HZ)}
    slowest = max(memory, key=memory.get)
    overhead = len(chunks) * SEGMENT_CALL_SECONDS + (PARALLEL_SECONDS if parallel_extent else 0.0)
    seconds = max(compute, memory[slowest]) + (1 - MEMORY_OVERLAP) * min(compute, memory[slowest]) + overhead
    # The bound: the compute limit that took the most cycles, or the level data came from slowest.
    bound = max(tally.cycles, key=tally.cycles.get, default="issue") if compute >= memory[slowest] else slowest
    return SegmentEstimate(symbol, parallel_extent or 0, len(chunks), {k: round(v) for k, v in tally.mix.items()},
                           tally.fma_lanes, {k: round(v) for k, v in tally.cycles.items()}, compute * CLOCK_HZ,
                           {k: float(v) for k, v in moved.items()}, unresolved, seconds, bound, macs)


def _body_function(symbol, functions):
    """(the segment's function, the function holding its loops: the internal body when LLVM did
    not inline it)."""
    function = functions[symbol]
    for _, callee in function.calls:
        if callee == f"{symbol}_body" and callee in functions:
            return function, functions[callee]
    return function, function


def _outlined_loop(stmt):
    while isinstance(stmt, Allocate):
        stmt = stmt.body
    return stmt if isinstance(stmt, For) and stmt.kind == "parallel" else None


def _busiest_core_chunks(extent, cores):
    """Lengths of the chunks the busiest core runs: codegen.runtime's chunks, each taken by the
    core that is free first."""
    parts = max(1, min(cores * CHUNKS_PER_THREAD, extent))
    base, extra = divmod(extent, parts)
    lengths = [base + (1 if index < extra else 0) for index in range(parts)]
    loads = [[] for _ in range(max(1, min(cores, parts)))]
    for length in lengths:
        min(loads, key=sum).append(length)
    return max(loads, key=sum)


def _recounted_fma_cycles(tally, macs):
    """Cycles to add (or take away) so that the loop bodies holding FMAs run the loop IR's
    multiply-adds, not the count the trip counts gave them: where the assembly's loops line up
    wrongly with the IR's (LLVM laid out a tile's partial copy before its whole one, or kept both
    in one loop), its FMAs were counted twice or not at all, and the kernel priced at half or
    several times its speed. The work itself is known exactly; the time per FMA the assembly
    gave is kept."""
    if tally.fma_lanes <= 0 or macs <= 0:
        return 0.0
    return tally.fma_cycles * (macs / tally.fma_lanes - 1.0)


def _multiply_adds(stmt, outlined=None, chunk=None, lanes=1):
    """Multiply-adds (a store of a sum with a product in it) the loop IR runs, its parallel loop
    over `chunk` iterations, a branch at the share of iterations that take it (branch_share), a
    vectorised loop in the lanes the back end computes for it (padded_lanes): an FMA takes its pipe
    for every lane, masked or not (14 columns in 16 lanes counted as 14 priced YOLO C12's searched
    best at 0.69 of its time)."""
    total = 0.0
    stack = [(stmt, {}, 1.0)]
    while stack:
        node, ranges, weight = stack.pop()
        if isinstance(node, For) and node.kind == "vectorized":
            # Lane 0 stands for the vector: a guard on the lanes is a mask, the FMA runs whole.
            taken = padded_lanes(node.extent, lanes)
            stack.append((node.body, {**ranges, node.var.name: 1}, weight * taken))
        elif isinstance(node, For):
            extent = chunk if node is outlined and chunk is not None else node.extent
            stack.append((node.body, {**ranges, node.var.name: node.extent}, weight * extent))
        elif isinstance(node, Seq):
            stack.extend((part, ranges, weight) for part in node.stmts)
        elif isinstance(node, Allocate):
            stack.append((node.body, ranges, weight))
        elif isinstance(node, IfThenElse):
            taken = branch_share(node.cond, ranges)
            stack.append((node.then_body, ranges, weight * taken))
            if node.else_body is not None:
                stack.append((node.else_body, ranges, weight * (1.0 - taken)))
        elif isinstance(node, Store) and _is_multiply_add(node.value):
            total += weight
    return total


def _is_multiply_add(value):
    return isinstance(value, Binary) and value.op == "+" and any(
        isinstance(part, Binary) and part.op == "*" for part in (value.a, value.b))


# ---------------------------------------------------------------- trip counts

def _depths(loops, depth=0):
    """{asm loop: how many loops enclose it}."""
    found = {}
    for loop in loops:
        found[loop] = depth
        found.update(_depths(loop.children, depth + 1))
    return found


def _asm_loops(loops):
    """Loops of the assembly in pre-order."""
    found = []
    for loop in loops:
        found.append(loop)
        found.extend(_asm_loops(loop.children))
    return found


def _ir_loops_and_shares(stmt, outlined=None):
    """{loop: (its enclosing loops, outermost first; the share of its enclosing loop's iterations
    that reach it)} of the IR loops that stay loops in the assembly, in pre-order: counted loops of
    more than one iteration (unrolled and vector loops are laid out; a vector loop that cannot be
    one vector body and is too long to unroll stays a loop), and the parallel loop, whose bounds are
    arguments. The branches between a loop and the one enclosing it run where their conditions
    hold (branch_share)."""
    found = {}
    stack = [(stmt, (), {}, 1.0)]
    while stack:
        node, outer, ranges, share = stack.pop()
        if isinstance(node, For):
            stays = node.kind in ("serial", "parallel") or (
                node.kind == "vectorized" and node.extent > MAX_VECTOR_LANES and vectorize_blocker(node))
            ranges = {**ranges, node.var.name: node.extent}
            if stays and (node.extent > 1 or node is outlined):
                found[node] = (outer, share)
                outer, share = (*outer, node), 1.0
            stack.append((node.body, outer, ranges, share))
        elif isinstance(node, Seq):
            stack.extend((part, outer, ranges, share) for part in reversed(node.stmts))
        elif isinstance(node, Allocate):
            stack.append((node.body, outer, ranges, share))
        elif isinstance(node, IfThenElse):
            taken = branch_share(node.cond, ranges)
            if node.else_body is not None:
                stack.append((node.else_body, outer, ranges, share * (1.0 - taken)))
            stack.append((node.then_body, outer, ranges, share * taken))
    return found


def branch_share(cond, ranges):
    """The share of the iterations of the enclosing loops ({name: extent}) where cond holds, counted
    over the loops it uses where it is a conjunction of affine comparisons of at most
    BRANCH_SHARE_POINTS points; else 1 (taken always). A register tile's copy without bounds tests
    runs where the whole tile is in bounds (codegen.version), its guarded copy at the last tiles:
    counted as running every time, the guarded copy had GMM's 6-row tiles (1024 rows as 2 x 86 x 6)
    at 1.7 times the multiply-adds they do, twice the time of 4-row tiles they outran."""
    parts = []
    pending = [cond]
    while pending:
        part = pending.pop()
        if isinstance(part, Logical) and part.op == "&":
            pending += [part.a, part.b]
        elif isinstance(part, Compare) and part.op in _COMPARISONS:
            form = affine_form(part.a - part.b)
            if form is None or any(name not in ranges for name in form[0]):
                return 1.0
            parts.append((form, part.op))
        else:
            return 1.0
    names = sorted({name for (coefficients, _), _ in parts for name in coefficients})
    if math.prod(ranges[name] for name in names) > BRANCH_SHARE_POINTS:
        return 1.0
    grids = np.meshgrid(*(np.arange(ranges[name]) for name in names), indexing="ij") if names else []
    values = dict(zip(names, grids))
    holds = np.ones(grids[0].shape if grids else (), dtype=bool)
    for (coefficients, offset), op in parts:
        difference = offset + sum(coefficient * values[name] for name, coefficient in coefficients.items())
        holds &= _COMPARISONS[op](difference, 0)
    return float(np.mean(holds))


def _resolve_trips(function, stmt, outlined):
    """({asm loop: trips}, the asm loop that runs the parallel loop or None, loops left unknown).

    The parallel loop is the first outermost loop of unknown count (its bounds arrive as
    arguments). The assembly's loops of known count are aligned with the IR's, each in
    pre-order (a longest common subsequence pairing a count with an equal extent, or one it
    divides as LLVM unrolls). A loop of unknown count takes the extent of an IR loop that
    encloses the IR partners of the loops inside it and sits inside its enclosing loop's
    partner: the largest such, since LLVM unrolls the small ones away."""
    parallel_loop = None
    if outlined is not None:
        parallel_loop = next((loop for loop in function.loops if loop.trips is None), None)
    asm = [loop for loop in _asm_loops(function.loops) if loop is not parallel_loop]
    shares = _ir_loops_and_shares(stmt, outlined)
    enclosing = {node: outer for node, (outer, _) in shares.items()}
    ir = [loop for loop in enclosing if loop is not outlined]
    known = [loop for loop in asm if loop.trips is not None]
    depth = _depths(function.loops)
    partner = {known[a]: ir[i] for a, i in _align(known, ir, [depth[loop] for loop in known],
                                                   [len(enclosing[node]) for node in ir])}
    if parallel_loop is not None:
        partner[parallel_loop] = outlined
    parents = {child: loop for loop in _asm_loops(function.loops) for child in loop.children}
    trips = {loop: loop.trips for loop in asm}
    unresolved = 0
    for loop in asm:   # outer loops first
        if loop.trips is not None:
            continue
        above = parents.get(loop)
        while above is not None and above not in partner:
            above = parents.get(above)
        outer = partner.get(above)
        inner = [partner[child] for child in _asm_loops(loop.children) if child in partner]
        taken = set(partner.values())
        candidates = [node for node in ir if node not in taken
                      and (outer is None or outer in enclosing[node])
                      and all(node in enclosing[below] for below in inner)]
        if candidates:
            chosen = max(candidates, key=lambda node: node.extent)
            partner[loop] = chosen
            trips[loop] = chosen.extent
        else:
            trips[loop] = 1
            unresolved += 1
    for loop, node in partner.items():   # a loop behind a branch runs where the branch is taken
        if loop is not parallel_loop and loop in trips and shares[node][1] < 1.0:
            trips[loop] = trips[loop] * shares[node][1]
    return trips, parallel_loop, unresolved


def _align(asm, ir, asm_depths, ir_depths):
    """[(asm index, ir index)] of the best order-preserving pairing of loops of known count with
    IR loops whose extent they equal (best) or divide; among equally good pairings, the one whose
    partners sit at the most alike depths."""
    def score(a, i):
        loop, node = asm[a], ir[i]
        apart = abs(asm_depths[a] - ir_depths[i])   # a tie-breaker: fewer than 100 levels apart
        if loop.trips == node.extent:
            return 300 - apart
        if node.extent % loop.trips == 0:
            return 100 - apart
        return None

    rows, columns = len(asm), len(ir)
    best = [[0] * (columns + 1) for _ in range(rows + 1)]
    for a in range(rows - 1, -1, -1):
        for i in range(columns - 1, -1, -1):
            value = max(best[a + 1][i], best[a][i + 1])
            gain = score(a, i)
            if gain is not None:
                value = max(value, gain + best[a + 1][i + 1])
            best[a][i] = value
    pairs, a, i = [], 0, 0
    while a < rows and i < columns:
        gain = score(a, i)
        if gain is not None and best[a][i] == gain + best[a + 1][i + 1]:
            pairs.append((a, i))
            a, i = a + 1, i + 1
        elif best[a][i] == best[a + 1][i]:
            a += 1
        else:
            i += 1
    return pairs


# ---------------------------------------------------------------- cycles

class _Tally:
    """Dynamic instruction counts, FMA lanes and cycles (in all, and by the limit that set each
    block's), accumulated over the blocks the busiest core runs."""

    def __init__(self):
        self.mix = {}
        self.cycles = {}
        self.fma_lanes = 0.0
        self.fma_cycles = 0.0    # cycles of the blocks that hold FMAs
        self.total_cycles = 0.0

    def count(self, table, key, value):
        table[key] = table.get(key, 0.0) + value


def _function_cycles(function, functions, trips, core, tally, weight):
    """Add a call of function (its loops run trips[loop] times per entry) to tally, weight times."""
    own = [index for block in function.top_blocks() for index in function.block_instructions(block)]
    _block(function, own, functions, trips, core, tally, weight)
    for loop in function.loops:
        _loop_cycles(function, loop, functions, trips, core, tally, weight)


def _loop_cycles(function, loop, functions, trips, core, tally, weight):
    count = trips.get(loop) or 1
    weight *= count
    own = [index for block in loop.own_blocks() for index in function.block_instructions(block)]
    _block(function, own, functions, trips, core, tally, weight)
    for child in loop.children:
        _loop_cycles(function, child, functions, trips, core, tally, weight)


def _block(function, indices, functions, trips, core, tally, weight):
    """The cycles of one pass over a block's instructions (its busiest pipe and its loop-carried
    dependence chains, combined by chained_cycles, plus stalls), added weight times, with its
    instruction mix and the calls it makes."""
    slots = {"fma": 0.0, "vector": 0.0, "shuffle": 0.0, "load": 0.0, "store": 0.0}
    mix = {}
    extra = 0.0
    lanes = 0.0
    calls = dict(function.calls)
    for index in indices:
        cost = _read(function.instructions[index], core.fma_latency).cost
        width = max(1, -(-cost.bits // core.datapath_bits)) if cost.bits > 64 else 1
        kind = cost.kind
        mix[kind] = mix.get(kind, 0) + 1
        if cost.loads:
            mix["load"] = mix.get("load", 0) + cost.loads
            each = cost.bytes_loaded * 8 // cost.loads
            slots["load"] += cost.loads * max(1, -(-each // core.datapath_bits))
        if cost.stores:
            mix["store"] = mix.get("store", 0) + cost.stores
            slots["store"] += cost.stores * max(1, -(-cost.bytes_stored * 8 // core.datapath_bits))
        if kind in ("fma", "fp", "divide"):
            slots["fma"] += width * (DIVIDE_SLOTS if kind == "divide" else 1)
        if kind in ("fma", "fp", "divide", "vector", "shuffle", "gather"):
            slots["vector"] += width
        if kind == "shuffle":
            slots["shuffle"] += width
        if kind == "fma":
            lanes += cost.lanes
        if kind == "call" and index in calls:
            extra += _call_cycles(calls[index], function, index, functions, trips, core, tally, weight)
    instructions = [function.instructions[index] for index in indices]
    latency, stalls = dependence_chains(instructions, core.fma_latency)
    pipes = {
        "fma": slots["fma"] / FMA_PIPES,
        "vector": slots["vector"] / VECTOR_PIPES,
        "shuffle": slots["shuffle"] / SHUFFLE_PIPES,
        "load": slots["load"] / LOAD_PORTS,
        "store": slots["store"] / STORE_PORTS,
        "issue": len(indices) / ISSUE_WIDTH,
        "latency": latency,
    }
    limit = max(pipes, key=pipes.get)
    cycles = chained_cycles(max(value for key, value in pipes.items() if key != "latency"), latency)
    for key, value in mix.items():
        tally.count(tally.mix, key, value * weight)
    tally.count(tally.cycles, limit, cycles * weight)
    if extra:
        tally.count(tally.cycles, "calls", extra * weight)
    if stalls:
        tally.count(tally.cycles, "store-forwarding", stalls * weight)
    tally.fma_lanes += lanes * weight
    tally.total_cycles += (cycles + extra + stalls) * weight
    if lanes:
        tally.fma_cycles += (cycles + extra + stalls) * weight


def chained_cycles(pipe_cycles, chain_cycles):
    """Cycles of a loop pass that needs pipe_cycles of its busiest pipe and carries chains of
    chain_cycles: the CHAIN_OVERLAP-norm of the two, above the larger where they are close."""
    return (pipe_cycles ** CHAIN_OVERLAP + chain_cycles ** CHAIN_OVERLAP) ** (1 / CHAIN_OVERLAP)


def dependence_chains(instructions, fma_latency=FMA_LATENCY):
    """(cycles of the longest chain one pass over a loop body carries into the next, cycles
    lost to loads that wait for a masked store) of a loop body's instructions.

    Through vector registers: each value's latency from the values the pass started with
    (an FMA or add chain into one accumulator, or one passed between registers); a chain that
    ends in the register it started from is carried into the next pass. Through memory: a load
    from an address stored before it in the pass, or later in the pass when the pass leaves the
    address's registers alone (a reload from the stack aside), reads what that store wrote.
    Loads that read an address each pass carry store forwarding plus the operation per load; a
    load of what a masked store wrote gets nothing forwarded and waits for the store to reach
    the cache, and such waits do not overlap."""
    depths = {}        # vector register -> {register the pass started with: latency since}
    changed = {}       # register -> position of its last write so far in the pass
    stores = {}        # address -> (position, masked) of its last store so far in the pass
    last_store = {}    # address -> masked, of its last store in the whole pass
    links = {}         # address -> loads in the pass that read a store
    readings = [_read(instruction, fma_latency) for instruction in instructions]
    for position, reading in enumerate(readings):
        for address, masked in reading.stored:
            last_store[address] = masked
        if reading.changed is not None:
            changed[reading.changed] = position
    invariant = {address for address in last_store if not _address_registers(address) & changed.keys()}
    changed = {}
    stalls = 0.0
    for position, reading in enumerate(readings):
        _carry(reading, depths)
        for address in reading.loaded:
            if address in stores:
                stored_at, masked = stores[address]
                if any(changed.get(register, -1) > stored_at for register in _address_registers(address)):
                    continue   # the address moved on since the store
            elif address in invariant:
                masked = last_store[address]
            else:
                continue
            links[address] = links.get(address, 0) + 1
            if masked:
                stalls += MASKED_STORE_FORWARD_CYCLES
        for address, masked in reading.stored:
            stores[address] = (position, masked)
        if reading.changed is not None:
            changed[reading.changed] = position
    chains = [depth.get(register, 0) for register, depth in depths.items()]
    chains += [count * (STORE_FORWARD_LATENCY + fma_latency) for address, count in links.items()
               if address in invariant]
    return max(chains, default=0), stalls


@dataclass(frozen=True)
class _Reading:
    """What the model reads off one instruction: its Cost, the memory it reads and writes, the
    general-purpose register it changes and the vector register chain it extends."""

    cost: x86_instructions.Cost
    loaded: tuple          # plain addresses it reads
    stored: tuple          # (plain address, masked) it writes
    changed: str | None    # the general-purpose register it changes, as addresses go
    target: int | None     # the vector register whose chain it sets (_carry), None where it sets none
    sources: tuple         # the vector registers that chain continues from
    restarts: bool         # the target zeroed with itself: its chain starts afresh
    latency: int


# Instructions recur across a kernel's unrolled tiles, and dependence_chains reads each twice: each
# distinct one is read once (asked again and again, their costs, addresses and registers took a third
# of the time the model spends on a kernel's assembly).
@functools.lru_cache(maxsize=1 << 16)
def _read(instruction, fma_latency=FMA_LATENCY):
    """The _Reading of one instruction on a core whose FMA takes fma_latency cycles."""
    cost = x86_instructions.classify(instruction)
    operands = instruction.operands
    destination = instruction.destination
    target = _vector_register(destination) if operands and not cost.stores else None
    sources = [_vector_register(operand) for operand in operands[:-1]]
    restarts = target is not None and instruction.mnemonic.startswith(("vxorp", "vpxor", "vpsub")) \
        and len(set(sources)) == 1 and sources[0] == target
    if cost.kind == "fma" or ("{%k" in destination and "{z}" not in destination):
        sources.append(target)   # it reads its target too: an accumulator, or a merge under a mask
    return _Reading(cost, tuple(_loaded(instruction, cost)), tuple(_stored(instruction, cost)),
                    x86_asm.register(destination) if _changes_register(instruction) else None, target,
                    tuple(source for source in sources if source is not None), restarts,
                    {"fma": fma_latency, "fp": ADD_LATENCY}.get(cost.kind, 1))


def _changes_register(instruction):
    """Whether an instruction writes a general-purpose register (a reload from the stack keeps
    the value the register had, as far as addresses go)."""
    return bool(instruction.operands) and x86_asm.register(instruction.destination) is not None \
        and not instruction.mnemonic.startswith(("cmp", "test", "push", "j", "call", "bt")) \
        and not (instruction.mnemonic.startswith("mov") and "(%rsp)" in instruction.operands[0])


def _carry(reading, depths):
    """Update depths with the vector register an instruction writes: the latest of its register
    sources plus its latency (a load, or zeroing a register with itself, starts afresh)."""
    target = reading.target
    if target is None:
        return
    if reading.restarts:
        depths[target] = {}
        return
    merged = {}
    for source in reading.sources:
        for origin, depth in depths.get(source, {source: 0}).items():
            merged[origin] = max(merged.get(origin, 0), depth + reading.latency)
    depths[target] = merged


def _vector_register(operand):
    """The number of a vector register operand ('%zmm3 {%k1}' -> 3), else None."""
    match = re.match(r"%[xyz]mm(\d+)\b", operand)
    return int(match.group(1)) if match else None


def _plain_address(operand):
    return re.sub(r"\s*\{[^}]*\}", "", operand)


def _loaded(instruction, cost):
    """Memory operands an instruction of that Cost reads."""
    if not cost.loads or cost.kind == "gather":
        return []
    operands = instruction.operands[:-1] if cost.stores == 0 or cost.kind == "store_only" else instruction.operands
    return [_plain_address(operand) for operand in operands if "(" in operand and not operand.startswith("$")]


def _stored(instruction, cost):
    """(address, masked) of the memory operand an instruction of that Cost writes, if any."""
    if not cost.stores or not instruction.operands:
        return []
    operand = instruction.destination
    return [(_plain_address(operand), "{%k" in operand)]


@functools.lru_cache(maxsize=1 << 14)
def _address_registers(address):
    """The general-purpose registers an address is computed from."""
    return frozenset(x86_asm.register(f"%{name}") for name in re.findall(r"%(\w+)", address))


def _call_cycles(callee, function, index, functions, trips, core, tally, weight):
    """Cycles of one call: a local function's own, the C library's at fixed prices. A local
    function's cycles go straight into tally; the library's are returned."""
    if callee.startswith(_SCRATCH_HELPERS):
        return ALLOCATION_CYCLES
    if callee in functions and functions[callee] is not function:
        _function_cycles(functions[callee], functions, trips, core, tally, weight)
        return 0.0
    if callee in _LIBRARY_ALLOCATIONS:
        return ALLOCATION_CYCLES
    if callee in _LIBRARY_COPIES:
        size = _size_argument(function, index)
        return ALLOCATION_CYCLES / 4 + (size if size is not None else 4096) / COPY_BYTES_PER_CYCLE
    return CALL_CYCLES


def _size_argument(function, index):
    """The constant third argument (%rdx) set before a call, if any."""
    for position in range(index - 1, max(-1, index - 12), -1):
        instruction = function.instructions[position]
        if x86_asm.register(instruction.destination) == "rdx" and instruction.mnemonic.startswith("mov"):
            return x86_asm.immediate(instruction.operands[0])
    return None
