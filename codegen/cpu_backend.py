"""The CPU back end: codegen.llvm_backend's IR compiled for the target's CPU, run here through MCJIT."""

# The code is for the target's CPU and features (this host's unless the target names others); it is
# loaded only where this host can run it, called through a pointer table, and its parallel segments
# are spread over a thread pool (codegen.runtime).

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import itertools
import threading
import time
import weakref
import zlib
from dataclasses import dataclass, replace

import llvmlite.binding as llvm
import numpy as np

from codegen import kernel_cache, runtime
from codegen.backend import Backend, CompileReport, register_backend
from codegen.code_size import (MAX_EMITTED_INSTRUCTIONS, MAX_EMITTED_STORES, ROLL_MARGIN, emitted_copies,
                                roll_to_budget, roll_to_fit)
from codegen.ir import CodegenError, PrimFunc
from codegen.legalize import legalize
from codegen.kept_scratch import RELEASE_SCRATCH
from codegen.llvm_backend import InstructionLimitReached, ModuleBuilder, check_loops, signature, written_buffers
from codegen.peel import peel_tails
from codegen.version import version_tiles
from flexsched import cpus
from flexsched.errors import EvaluationError

_ITEM_SIZES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}
_NUMPY_DTYPES = {name: np.dtype(name) for name in _ITEM_SIZES}
_SEGMENT_PROTOTYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
_RELEASE_PROTOTYPE = ctypes.CFUNCTYPE(None)


# LLVM's -O3 unrolls a loop whose unrolled body it prices under 300; the schedule already unrolls
# what it chooses, and with its address arithmetic shared an unrolled tile's serial loops price so
# low that -O3 unrolled them whole: 0.4-1.0 s of machine code for a 1x1 convolution's candidate
# instead of 0.02-0.07 s, no faster. -O2's 150 keeps the small loops it still unrolls (the
# searched bests ran as fast side by side).
UNROLL_THRESHOLD = 150
# -O3 also unswitches loops on conditions that are invariant but not trivially so, cloning the loop
# nest once per outcome: on the YOLO 3 x 3 layers that took 40% or more of the optimisation (LLVM's
# pass timings), 0.8-1.0 s a candidate on C4 and C6 instead of 0.4-0.5, and the searched kernels ran
# as fast without it (side by side, within 2%). A cost threshold of 1 leaves the trivial unswitching,
# which clones nothing. (0 is out of the pass's range.)
UNSWITCH_THRESHOLD = 1


@functools.cache
def _initialise_llvm():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.set_option("", f"-unroll-threshold-aggressive={UNROLL_THRESHOLD}")
    llvm.set_option("", f"-unswitch-threshold={UNSWITCH_THRESHOLD}")


def machine_of(target=None):
    """(CPU name, feature string) the code for target is generated for; the host's where it names none."""
    if target is None or not target.cpu:
        return cpus.host()
    return target.cpu, target.features


# LLVM's AMD Zen 4 and 5 scheduling model (znver4, znver5) has the pre-register-allocation scheduler hoist
# a large unrolled tile's loads ahead of its multiply-adds until they spill: a 1 x 1 convolution's 8 x 32
# register tile, its reduction unrolled 32 steps, kept 278 stack references in its hot block and ran at
# 0.67-0.71 of oneDNN, against none and 0.86-0.94 with the generic x86-64-v4 model (same instructions, on
# Zen 5; searched bests within 4% either way). Their AVX-512 code is scheduled by that model. AVX2 code keeps the CPU's own: with 16 registers the generic
# x86-64-v3 model spilled a 12-accumulator tile that Zen's schedules in registers.
_GENERICALLY_SCHEDULED = ("znver4", "znver5")


def scheduling_cpu(cpu, features):
    """The CPU whose scheduling model LLVM generates code for (CPU, features) with."""
    if cpu in _GENERICALLY_SCHEDULED and cpus.vector_unit(cpu, cpus.parse(features)) == (16, 32):
        return "x86-64-v4"
    return cpu


def create_machine(cpu, features, **options):
    """An LLVM target machine for the host's triple: features' instructions, scheduled as scheduling_cpu says."""
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=scheduling_cpu(cpu, features), features=features, opt=3, **options)


def _target_machine(machine=None):
    """A fresh LLVM machine for (CPU, features), the host's by default."""
    # Fresh each time: an MCJIT engine takes ownership of the machine it is given.
    _initialise_llvm()
    cpu, features = machine or cpus.host()
    return create_machine(cpu, features, codemodel="jitdefault")


def register_lanes(machine=None):
    """32-bit lanes of the widest vector registers of (CPU, features), the host's by default."""
    return _vector_unit(machine)[0]


def _vector_unit(machine=None):
    """(32-bit lanes, vector registers) of the widest vector unit of (CPU, features), the host's by default."""
    cpu, features = machine or cpus.host()
    return cpus.vector_unit(cpu, cpus.parse(features))


@functools.cache
def host_register_lanes():
    """32-bit lanes of this host's widest vector registers."""
    return register_lanes()


def cannot_run_here(machine):
    """Why this host cannot run code generated for (CPU, features) ('' when it can): one line."""
    host_cpu, host_features = cpus.host()
    cpu, features = machine
    if cpu != host_cpu:
        return f"the code is for CPU '{cpu}', not this host's '{host_cpu}'"
    missing = sorted(cpus.enabled(features) - cpus.enabled(host_features))
    if missing:
        shown = ", ".join(f"+{feature}" for feature in missing[:5]) + (", ..." if len(missing) > 5 else "")
        return f"the code uses features this host's CPU '{host_cpu}' lacks ({shown})"
    return ""


@functools.cache
def _host_layout():
    """(triple, data layout) of this host, which the vectorizer's cost model needs in the module."""
    machine = _target_machine()
    return machine.triple, str(machine.target_data)


def _optimize(module, machine, opt_level):
    """Run LLVM's standard -O<opt_level> module pipeline (new pass manager), with both vectorizers on."""
    tuning = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    if opt_level >= 2:
        tuning.loop_vectorization = True
        tuning.slp_vectorization = True
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)


@dataclass(frozen=True)
class MachineCode:
    """A kernel's optimised module as object code for a CPU, with what running it needs: picklable,
    so the isolated worker can compile and the caller load (CompiledFunc)."""

    func: PrimFunc
    unoptimized_ir: str
    llvm_ir: str               # the optimised module the object code was generated from
    object_code: bytes
    segments: tuple            # (symbol, parallel extent or None), run in order
    fallbacks: tuple           # vectorized loops that run lane by lane, and why
    host: tuple                # (CPU name, features) the code was generated for


def generate_machine_code(func, unoptimized_ir, opt_level, segments, fallbacks, machine=None, timings=None):
    """The module optimised at -O<opt_level>, as object code for (CPU, features), the host's by default;
    a `timings` dict gets the seconds of "optimize" (parsing included) and "object"."""
    machine = machine or cpus.host()
    started = time.perf_counter()
    target_machine = _target_machine(machine)
    module = llvm.parse_assembly(unoptimized_ir)
    module.verify()
    _optimize(module, target_machine, opt_level)
    optimized = time.perf_counter()
    code = MachineCode(func, unoptimized_ir, str(module), target_machine.emit_object(module), tuple(segments),
                       tuple(fallbacks), tuple(machine))
    if timings is not None:
        timings["optimize"], timings["object"] = optimized - started, time.perf_counter() - optimized
    return code


class CompiledFunc:
    """A kernel compiled for a CPU, called with one array per parameter (in place); elsewhere it refuses to run."""

    def __init__(self, code):
        self.code = code
        self._written = written_buffers(code.func.body)
        self._asm = None
        self._segments = None
        self._engine = None
        if not cannot_run_here(code.host):
            self._load()

    def _load(self):
        """Link the object code into an MCJIT engine of this host; CodegenError if it cannot run here."""
        reason = cannot_run_here(self.code.host)
        if reason:
            raise CodegenError(f"kernel '{self.code.func.name}' cannot run here: {reason}")
        triple, layout = _host_layout()
        # MCJIT needs a module to start from; the kernel arrives as object code, linked in as it is.
        self._engine = llvm.create_mcjit_compiler(
            llvm.parse_assembly(f'target triple = "{triple}"\ntarget datalayout = "{layout}"\n'),
            _target_machine(self.code.host))
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(self.code.object_code))
        self._engine.finalize_object()
        self._segments = [(_SEGMENT_PROTOTYPE(self._engine.get_function_address(symbol)), extent)
                          for symbol, extent in self.code.segments]
        release = self._engine.get_function_address(RELEASE_SCRATCH)
        if release:
            # The kept scratch buffers go with the kernel; the engine, which holds the code, after them.
            weakref.finalize(self, _release_scratch, _RELEASE_PROTOTYPE(release), self._engine).atexit = False

    func = property(lambda self: self.code.func)
    unoptimized_ir = property(lambda self: self.code.unoptimized_ir)
    llvm_ir = property(lambda self: self.code.llvm_ir)
    segments = property(lambda self: self.code.segments)
    fallbacks = property(lambda self: self.code.fallbacks)

    def asm(self):
        """The assembly of the optimized module for the CPU it was compiled for."""
        if self._asm is None:
            self._asm = _target_machine(self.code.host).emit_assembly(llvm.parse_assembly(self.llvm_ir))
        return self._asm

    @property
    def source(self):
        return self.llvm_ir

    def assembly(self):
        return self.asm()

    def __call__(self, *arrays):
        params = self.func.params
        if len(arrays) != len(params):
            names = ", ".join(p.name for p in params)
            raise TypeError(f"kernel '{self.func.name}' takes {len(params)} arguments ({names}), got {len(arrays)}")
        if self._segments is None:
            self._load()
        spans = [_memory_span(array, param, param in self._written) for array, param in zip(arrays, params)]
        self._check_disjoint(spans)
        table = (ctypes.c_void_p * max(1, len(params)))(*(start for start, _ in spans))
        address = ctypes.addressof(table)
        for kernel, parallel_extent in self._segments:
            if parallel_extent is None:
                kernel(0, 1, address)
            else:
                runtime.default_pool().run(kernel, parallel_extent, address)

    def _check_disjoint(self, spans):
        """Refuse a written argument that overlaps another: the kernel declares its buffers noalias."""
        params = self.func.params
        for i, (start_i, size_i) in enumerate(spans):
            for j in range(i + 1, len(spans)):
                start_j, size_j = spans[j]
                written = [p.name for p in (params[i], params[j]) if p in self._written]
                if written and start_i < start_j + size_j and start_j < start_i + size_i:
                    raise EvaluationError(f"arguments '{params[i].name}' and '{params[j].name}' overlap in memory, "
                                          f"but the kernel writes '{written[0]}' and assumes distinct buffers")

    def __repr__(self):
        return f"<CompiledFunc {signature(self.func)}>"


def _release_scratch(release, engine):
    """Free a kernel's kept scratch; the engine is an argument only to outlive the call."""
    release()


def _is_torch_tensor(value):
    return type(value).__module__.startswith("torch") and hasattr(value, "data_ptr")


def _memory_span(array, param, written):
    """(address, bytes) of an argument, after checking it has exactly the parameter's layout."""
    name = param.name
    if isinstance(array, np.ndarray):
        # Comparing dtype objects takes nanoseconds, str() of one microseconds (a tenth of a small call's overhead).
        dtype = param.dtype if array.dtype == _NUMPY_DTYPES.get(param.dtype) else str(array.dtype)
        shape, address = array.shape, array.ctypes.data
        contiguous, writable = array.flags.c_contiguous, array.flags.writeable
    elif _is_torch_tensor(array):
        if array.device.type != "cpu":
            raise EvaluationError(f"argument '{name}' is on {array.device}; the llvm back end needs CPU memory")
        dtype, shape, address = str(array.dtype).removeprefix("torch."), tuple(array.shape), array.data_ptr()
        contiguous, writable = array.is_contiguous(), True
    else:
        raise TypeError(f"argument '{name}' must be a numpy array or a CPU torch tensor, got {type(array).__name__}")
    expected_shape = tuple(param.shape)
    if dtype != param.dtype:
        raise EvaluationError(f"argument '{name}' has dtype {dtype}, expected {param.dtype}")
    if tuple(shape) != expected_shape:
        raise EvaluationError(f"argument '{name}' has shape {tuple(shape)}, expected {expected_shape}")
    if not contiguous:
        raise EvaluationError(f"argument '{name}' is not C-contiguous")
    if written and not writable:
        raise EvaluationError(f"argument '{name}' is read-only, but the kernel writes it")
    return address, param.size * _ITEM_SIZES[param.dtype]


_cache = {}
_cache_lock = threading.Lock()
# The kernel cache's entries: object code generated as _target_machine generates it, and the optimised IR.
_DISK_FORMAT = (f"cpu-2 generic-zen-schedule jitdefault unroll-threshold={UNROLL_THRESHOLD} "
                f"unswitch-threshold={UNSWITCH_THRESHOLD}")


def clear_cache():
    """Forget compiled kernels (a long search would otherwise keep every candidate's machine code)."""
    with _cache_lock:
        _cache.clear()


def compile_func(func: PrimFunc, opt_level=3, legalised=False, target=None) -> CompiledFunc:
    """A kernel compiled for the target's CPU (the host's by default); identical ones compile once."""
    return compile_with_report(func, opt_level, legalised, target)[0]


def compile_with_report(func: PrimFunc, opt_level=3, legalised=False, target=None):
    """(compile_func's CompiledFunc, a CompileReport of where its time went)."""
    # Legalised first unless the back end's passes already did, so hand-written loop IR compiles too;
    # "identical" is the same LLVM IR, level, CPU and features.
    started = time.perf_counter()
    machine = machine_of(target)
    text, builder, func = _module_text(func, opt_level, legalised, machine)
    emit_seconds = time.perf_counter() - started
    key = (text, opt_level, *machine)
    with _cache_lock:
        compiled = _cache.get(key)
        if compiled is not None:
            return compiled, CompileReport(emit_seconds, cached="memory")
        code, report = _stored_or_generated(func, text, opt_level, builder, machine, emit_seconds)
        loading = time.perf_counter()
        try:
            compiled = CompiledFunc(code)
        except Exception:  # noqa: BLE001 - an entry this LLVM cannot load is rebuilt
            if not report.cached:
                raise
            code, report = _stored_or_generated(func, text, opt_level, builder, machine, emit_seconds, stored=False)
            loading = time.perf_counter()
            compiled = CompiledFunc(code)
        _cache[key] = compiled
    return compiled, replace(report, machine_code_seconds=report.machine_code_seconds + time.perf_counter() - loading)


def machine_code(func: PrimFunc, opt_level=3, legalised=False, target=None) -> MachineCode:
    """What compile_func compiles, as object code not yet loaded (for building in another process)."""
    return machine_code_with_report(func, opt_level, legalised, target)[0]


def machine_code_with_report(func: PrimFunc, opt_level=3, legalised=False, target=None):
    """(machine_code's MachineCode, a CompileReport of where its time went; loading is the caller's)."""
    started = time.perf_counter()
    machine = machine_of(target)
    text, builder, func = _module_text(func, opt_level, legalised, machine)
    return _stored_or_generated(func, text, opt_level, builder, machine, time.perf_counter() - started)


def _stored_or_generated(func, text, opt_level, builder, machine, emit_seconds, stored=True):
    """(MachineCode of a module's text, its CompileReport): from the kernel cache on disk if it holds
    it (and `stored`), else optimised, generated and put there."""
    reading = time.perf_counter()
    code = _stored_machine_code(func, text, opt_level, builder, machine) if stored else None
    if code is not None:
        return code, CompileReport(emit_seconds, 0.0, time.perf_counter() - reading, "disk")
    timings = {}
    code = generate_machine_code(func, text, opt_level, builder.segments, builder.fallbacks, machine, timings)
    _store_machine_code(code, opt_level)
    return code, CompileReport(emit_seconds, timings["optimize"], timings["object"])


def _disk_key(text, opt_level, machine):
    """The kernel cache's key of a module: what decides its machine code, LLVM's version included."""
    version = ".".join(map(str, llvm.llvm_version_info))
    return kernel_cache.key(_DISK_FORMAT, version, str(opt_level), *machine, text)


def _stored_machine_code(func, text, opt_level, builder, machine):
    """The MachineCode of a module from the kernel cache on disk, or None."""
    blobs = kernel_cache.load(_disk_key(text, opt_level, machine))
    if blobs is None or len(blobs) != 2:
        return None
    object_code, packed_ir = blobs
    try:
        llvm_ir = zlib.decompress(packed_ir).decode()
    except (zlib.error, UnicodeDecodeError):
        return None
    return MachineCode(func, text, llvm_ir, object_code, tuple(builder.segments), tuple(builder.fallbacks),
                       tuple(machine))


def _store_machine_code(code, opt_level):
    """Keep a module's object code and optimised IR (compressed: a tenth of its size) in the kernel cache."""
    kernel_cache.store(_disk_key(code.unoptimized_ir, opt_level, code.host),
                       (code.object_code, zlib.compress(code.llvm_ir.encode(), 1)))


@dataclass(frozen=True)
class Assembly:
    """A kernel's optimised module as assembly for a CPU, with the loop IR it was emitted from
    (unrolled loops rolled back where the code-size budget asked): what the static model reads."""

    func: PrimFunc
    text: str
    segments: tuple            # (symbol, parallel extent or None), run in order
    fallbacks: tuple           # vectorized loops that run lane by lane, and why


def assembly(func: PrimFunc, opt_level=3, legalised=False, target=None) -> Assembly:
    """The assembly compile_func's machine code is made from, for the target's CPU (no object code, nothing loaded)."""
    machine = machine_of(target)
    text, builder, func = _module_text(func, opt_level, legalised, machine)
    target_machine = _target_machine(machine)
    module = llvm.parse_assembly(text)
    module.verify()
    _optimize(module, target_machine, opt_level)
    return Assembly(func, target_machine.emit_assembly(module), tuple(builder.segments), tuple(builder.fallbacks))


@contextlib.contextmanager
def _no_cycle_collection():
    """Python's cycle collector paused inside: emitting a module allocates ~10^5 objects, and the
    collections they trigger scan the whole heap (a third of the emission time, measured on the
    benchmark's 3 x 3 layers when each instruction was an llvmlite object). What is left is
    collected after, as any other garbage."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:   # a caller that had it off keeps it off
            gc.enable()


@_no_cycle_collection()
def _module_text(func, opt_level, legalised, machine):
    """(unoptimised LLVM IR, its ModuleBuilder, the legalised func), after checking func."""
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    for param in func.params:
        if param.dtype not in _ITEM_SIZES:
            raise CodegenError(f"parameter '{param.name}' has dtype {param.dtype!r}; "
                               f"expected one of {', '.join(_ITEM_SIZES)}")
    check_loops(func.body)
    func = func if legalised else legalize(func)
    triple, layout = _host_layout()
    func = replace(func, body=roll_to_fit(func.body, MAX_EMITTED_STORES))
    lanes, registers = _vector_unit(machine)
    for attempt in itertools.count():
        copies = emitted_copies(func.body)
        # A module past the budget stops being emitted there (emitting 50k instructions took 1-2 s):
        # its size is then extrapolated from the stores laid out so far.
        builder = ModuleBuilder(func, triple, layout, lanes, vector_registers=registers,
                                instruction_limit=MAX_EMITTED_INSTRUCTIONS if copies > 1 else None)
        # A module is joined into one text only once kept.
        try:
            module = builder.build()
            instructions = builder.instructions()
        except InstructionLimitReached as reached:
            module = None
            instructions = max(reached.instructions, reached.instructions * copies // reached.stores)
        if instructions <= MAX_EMITTED_INSTRUCTIONS or copies <= 1:
            return str(module), builder, func
        # Roll outermost and largest first, as far as what this emission measured of each unrolled
        # loop says is needed to fit (ROLL_MARGIN: each further attempt aims lower).
        per_copy = builder.instructions() / max(1, builder.stores)
        rolled = roll_to_budget(func.body, instructions, MAX_EMITTED_INSTRUCTIONS * ROLL_MARGIN ** attempt,
                                builder.unrolled_costs, per_copy)
        if rolled is func.body:   # nothing left to roll: the module as it is, whole
            if module is None:
                builder = ModuleBuilder(func, triple, layout, lanes, vector_registers=registers)
                module = builder.build()
            return str(module), builder, func
        func = replace(func, body=rolled)


def _instruction_count(text):
    """Instructions in LLVM IR text (each sits on an indented line inside a function body)."""
    return text.count("\n  ")


class CpuBackend(Backend):
    """Kernels for a CPU: legalised loop IR, LLVM at -O3, numpy arrays or CPU torch tensors."""

    kind = "cpu"

    def passes(self, target):
        return (peel_tails, version_tiles, legalize)

    def compile(self, func, target):
        return compile_func(func, legalised=True, target=target)

    def compile_with_report(self, func, target):
        return compile_with_report(func, legalised=True, target=target)

    def compile_artifact(self, func, target):
        return machine_code(func, legalised=True, target=target)

    def compile_artifact_with_report(self, func, target):
        return machine_code_with_report(func, legalised=True, target=target)

    def unavailable(self, target):
        return cannot_run_here(machine_of(target))

    def load_artifact(self, artifact, target):
        return CompiledFunc(artifact)

    def preload(self):
        _host_layout()


register_backend(CpuBackend())
