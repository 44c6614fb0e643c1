"""The analytical FPGA model: a design's latency and resources without synthesis.

A design (a point of an FPGA space) runs each root node as a three-stage coarse-grained
pipeline (FlexTensor sec. 5.2, Fig. 4c; the model of Zhang et al., FPGA'15): a *round* reads
the input tiles one outer iteration needs into on-chip buffers (R), computes the tile on the
PE array (C), and writes the output tile back once its reduction is complete (W, amortised
over the reduce rounds). Buffers are double-buffered, so rounds overlap:

    cycles = (rounds - 1) * max(R, C, W / reduce_rounds, DDR) + R + C + W

where DDR is the round's traffic at the shared off-chip bandwidth. Tiles, PE counts, data
volumes and buffer sizes come from the analyzer's loops and affine accesses, never from the
operator, so any computation the DSL expresses is modelled.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from analysis import analyze
from flexsched.expr import Binary, Call, Reduce, walk
from flexsched.reference import topological_order

from .devices import BRAM18K_BITS, get_device

DTYPE_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "bool": 1}
PARTS = 3  # every split loop is outer / tile / PE


@dataclass(frozen=True)
class ModelParams:
    """What the model cannot know from the design: latencies and how well memory is used."""

    clock_mhz: float | None = None   # None: the device's default clock
    memory_efficiency: float = 0.8   # sustained / peak DDR bandwidth (refresh, page misses, AXI overhead)
    ddr_latency_ns: float = 300.0    # first word of a burst; paid once per stage of a round
    port_bytes: int = 64             # one 512-bit AXI master per buffered tensor
    fmul_latency: int = 4            # float32 operator latencies typical of Vitis HLS at 200-300 MHz
    fadd_latency: int = 7
    buffer_latency: int = 2          # BRAM read and write around the datapath
    lutram_elements: int = 64        # smaller banks become LUTRAM / registers, not BRAM


@dataclass(frozen=True)
class NodeEstimate:
    """One root node's accelerator: its pipeline and resources."""

    name: str
    pe: int                 # multiply-add lanes (product of the PE factors)
    ii: int                 # initiation interval the pipelined tile loop achieves
    rounds: int             # outer iterations (spatial x reduce)
    read_cycles: float      # per round
    compute_cycles: float   # per round
    write_cycles: float     # per output tile
    cycles: float
    dsp: int
    bram: int
    bytes_read: int
    bytes_written: int
    bound: str              # "read", "compute" or "write"


@dataclass(frozen=True)
class Estimate:
    """A whole design: latency, throughput, resources; `reason` says why it does not fit."""

    feasible: bool
    reason: str
    cycles: float
    seconds: float
    gflops: float
    dsp: int
    bram: int
    bytes_read: int
    bytes_written: int
    bandwidth_gbps: float
    bandwidth_use: float     # of the device's peak DDR bandwidth
    bound: str
    clock_mhz: float
    device: str
    nodes: tuple = field(default=())

    def details(self):
        """A JSON-ready dict (the evaluator's details)."""
        data = asdict(self)
        data["latency_s"] = data.pop("seconds")
        data["nodes"] = [asdict(node) for node in self.nodes]
        return data


@dataclass(frozen=True)
class _Dim:
    """One dimension of an access: the loops it moves with (|coefficient|) and its extent."""

    affine: bool
    terms: tuple    # ((loop, |coefficient|), ...) when affine
    loops: tuple    # every loop the index uses
    extent: int


@dataclass(frozen=True)
class _Access:
    tensor: str
    dims: tuple
    element_bytes: int


@dataclass(frozen=True)
class _Ops:
    """float operators one iteration of a node's body executes."""

    mul: int = 0
    add: int = 0
    other: int = 0   # math calls: costed like a multiply-add

    def __add__(self, other):
        return _Ops(self.mul + other.mul, self.add + other.add, self.other + other.other)


@dataclass(frozen=True)
class _NodePlan:
    """What the model needs of one node, computed once per task."""

    name: str
    loops: tuple        # (name, extent, kind) of loops with extent > 1
    reads: tuple        # _Access
    write: _Access
    ops: _Ops
    producers: tuple    # nodes it reads (inlined ones add their operators to its PEs)
    reduction: bool
    flops: int


def _dims(access, info):
    tensor = info.tensor(access.tensor)
    dims = tuple(_Dim(index.affine, tuple((loop, abs(c)) for loop, c in index.coefficients), tuple(index.loops),
                      extent) for index, extent in zip(access.indices, tensor.shape))
    return _Access(access.tensor, dims, DTYPE_BYTES.get(tensor.dtype, 4))


def _float_ops(tensor):
    """Float multiplies, adds and calls of a tensor's body (index arithmetic is integer and free)."""
    body = tensor.body
    ops = _Ops(add=1) if isinstance(body, Reduce) and body.combiner == "sum" else _Ops()
    for node in walk(body.source if isinstance(body, Reduce) else body):
        if isinstance(node, Binary) and node.dtype.startswith("float"):
            ops += _Ops(mul=int(node.op == "*"), add=int(node.op in ("+", "-")))
        elif isinstance(node, Call):
            ops += _Ops(other=1)
    return ops


def _plans(task, info):
    tensors = {t.name: t for t in topological_order(task.outputs)}
    nodes = {node.name for node in info.nodes}
    return tuple(_NodePlan(
        node.name,
        tuple((loop.name, loop.extent, loop.kind) for loop in node.loops if loop.extent > 1),
        tuple(_dims(access, info) for access in node.reads),
        _dims(node.write, info),
        _float_ops(tensors[node.name]),
        tuple(name for name in node.inputs if name in nodes),
        bool(node.reduce),
        node.flops,
    ) for node in info.nodes)


def _span(dim, region):
    """Distinct values of one index dimension over a region {loop: trip count}."""
    if dim.affine:
        reach = 1 + sum(coefficient * (region.get(loop, 1) - 1) for loop, coefficient in dim.terms)
    else:  # // or %: at most one value per combination of its loops' values
        reach = math.prod(region.get(loop, 1) for loop in dim.loops)
    return min(reach, dim.extent)


class FpgaModel:
    """The model of one task on one device; estimate(config) is cheap (no lowering)."""

    def __init__(self, task, device, params=ModelParams(), info=None):
        self.task = task
        self.device = get_device(device)
        self.params = params
        self.info = info or analyze(task)
        self.plans = _plans(task, self.info)
        self._by_name = {plan.name: plan for plan in self.plans}
        self.clock_mhz = params.clock_mhz or self.device.clock_mhz
        clock_hz = self.clock_mhz * 1e6
        self._ddr_bytes_per_cycle = self.device.ddr_gbps * 1e9 * params.memory_efficiency / clock_hz
        self._ddr_latency = params.ddr_latency_ns * 1e-9 * clock_hz

    def estimate(self, config):
        """The Estimate of a design given as a Config or a {knob: value} dict."""
        values = dict(config) if isinstance(config, dict) else dict(config.values)
        nodes = [self._node(plan, values) for plan in self.plans
                 if values.get(f"{plan.name}.attach", "root") == "root"]
        cycles = sum(node.cycles for node in nodes)
        dsp, bram = sum(node.dsp for node in nodes), sum(node.bram for node in nodes)
        moved_read, moved_written = sum(n.bytes_read for n in nodes), sum(n.bytes_written for n in nodes)
        seconds = cycles / (self.clock_mhz * 1e6)
        bandwidth = (moved_read + moved_written) / seconds / 1e9
        slowest = max(nodes, key=lambda node: node.cycles)
        reason = self._misfit(dsp, bram)
        return Estimate(
            feasible=not reason, reason=reason, cycles=cycles, seconds=seconds if not reason else math.inf,
            gflops=self.info.flops / seconds / 1e9 if not reason else 0.0, dsp=dsp, bram=bram,
            bytes_read=moved_read, bytes_written=moved_written, bandwidth_gbps=bandwidth,
            bandwidth_use=bandwidth / self.device.ddr_gbps, bound=slowest.bound, clock_mhz=self.clock_mhz,
            device=self.device.name, nodes=tuple(nodes))

    def _misfit(self, dsp, bram):
        device = self.device
        if dsp > device.dsp_slices:
            return f"DSP: the design needs {dsp} DSP slices, the {device.name} has {device.dsp_slices}"
        if bram > device.bram18k_blocks:
            return f"BRAM: the design needs {bram} BRAM18K blocks, the {device.name} has {device.bram18k_blocks}"
        return ""

    def _ops(self, plan, values):
        """Operators per PE: the node's own plus those of producers inlined into it."""
        ops = plan.ops
        for name in plan.producers:
            if values.get(f"{name}.attach", "root") == "inline":
                ops += self._ops(self._by_name[name], values)
        return ops

    def _node(self, plan, values):
        params, device = self.params, self.device
        outer_spatial = outer_reduce = tile_trip = pe = spatial_tile = reduce_tile = reduce_pe = 1
        region, pe_of = {}, {}
        for name, extent, kind in plan.loops:
            outer, tile, lanes = values.get(f"{plan.name}.split.{name}", (extent, 1, 1))
            region[name], pe_of[name] = tile * lanes, lanes
            tile_trip, pe = tile_trip * tile, pe * lanes
            if kind == "reduce":
                outer_reduce, reduce_tile, reduce_pe = outer_reduce * outer, reduce_tile * tile, reduce_pe * lanes
            else:
                outer_spatial, spatial_tile = outer_spatial * outer, spatial_tile * tile

        read_bytes, read_port, bram = 0, 0.0, 0
        for access in plan.reads:
            elements, port, blocks = self._buffer(access, region, pe_of)
            read_bytes += elements * access.element_bytes
            read_port, bram = max(read_port, port), bram + blocks
        write_elements, write_port, blocks = self._buffer(plan.write, region, pe_of)
        write_bytes, bram = write_elements * plan.write.element_bytes, bram + blocks

        # A pipelined loop that revisits an accumulator every `distance` iterations must wait
        # for the adder: II >= fadd latency / distance (reduce tiles sit outside spatial ones).
        ii = 1
        if plan.reduction and reduce_tile > 1:
            ii = max(1, -(-params.fadd_latency // spatial_tile))
        tree = math.ceil(math.log2(reduce_pe)) if reduce_pe > 1 else 0
        depth = params.buffer_latency + (params.fmul_latency + params.fadd_latency * (1 + tree)
                                         if plan.reduction else params.fadd_latency)
        compute = tile_trip * ii + depth
        read = self._ddr_latency + max(read_bytes / self._ddr_bytes_per_cycle, read_port)
        write = self._ddr_latency + max(write_bytes / self._ddr_bytes_per_cycle, write_port)
        shared = (read_bytes + write_bytes / outer_reduce) / self._ddr_bytes_per_cycle
        rounds = outer_spatial * outer_reduce
        stages = {"read": max(read, shared), "compute": compute, "write": write / outer_reduce}
        bound = max(stages, key=stages.get)
        cycles = (rounds - 1) * stages[bound] + read + compute + write

        ops = self._ops(plan, values)
        dsp_per_pe = (ops.mul * device.dsps_per_fmul + ops.add * device.dsps_per_fadd
                      + ops.other * device.dsps_per_fma)
        return NodeEstimate(plan.name, pe, ii, rounds, read, compute, write, cycles, pe * dsp_per_pe, bram,
                            read_bytes * rounds, write_bytes * outer_spatial, bound)

    def _buffer(self, access, region, pe_of):
        """(elements of one tile, cycles on its AXI port, BRAM18K blocks double-buffered)."""
        spans = [_span(dim, region) for dim in access.dims]
        elements = math.prod(spans)
        # A tile arrives as runs contiguous in memory (trailing dimensions it covers whole, then
        # part of one more); each run takes whole bus beats, so short runs waste the port.
        run = 1
        for dim, span in zip(reversed(access.dims), reversed(spans)):
            run *= span
            if span < dim.extent:
                break
        port = (elements // run) * -(-run * access.element_bytes // self.params.port_bytes)
        # Partitioned by the PE lanes that index each dimension, so the array reads in parallel.
        banks = math.prod(min(span, math.prod(pe_of.get(loop, 1) for loop in dim.loops))
                          for dim, span in zip(access.dims, spans))
        per_bank = -(-elements // banks)
        if per_bank <= self.params.lutram_elements:
            return elements, port, 0
        words_per_block = BRAM18K_BITS // 36  # 512 words of 32 bits (plus parity)
        blocks = banks * -(-per_bank * max(1, access.element_bytes // 4) // words_per_block)
        return elements, port, 2 * blocks  # double-buffered: ping and pong
