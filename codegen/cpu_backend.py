"""The CPU back end: LLVM IR from codegen.llvm_backend compiled for this host (MCJIT), called
through a pointer table, its parallel segments spread over a thread pool (codegen.runtime)."""

from __future__ import annotations

import ctypes
import functools
import threading
from dataclasses import dataclass, replace

import llvmlite.binding as llvm
import numpy as np

from codegen import runtime
from codegen.backend import Backend, register_backend
from codegen.code_size import MAX_EMITTED_INSTRUCTIONS, MAX_EMITTED_STORES, emitted_copies, roll_to_fit
from codegen.ir import CodegenError, PrimFunc
from codegen.legalize import legalize
from codegen.llvm_backend import ModuleBuilder, check_loops, signature, written_buffers
from flexsched.errors import EvaluationError

_ITEM_SIZES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}
_SEGMENT_PROTOTYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)


@functools.cache
def _initialise_llvm():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def _target_machine():
    """A fresh machine for this host (an MCJIT engine takes ownership of the one it is given)."""
    _initialise_llvm()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=_host_features(),
                                        opt=3, codemodel="jitdefault")


@functools.cache
def _host_features():
    return llvm.get_host_cpu_features().flatten()


@functools.cache
def host_register_lanes():
    """32-bit lanes of this host's widest vector registers."""
    features = _host_features().split(",")
    return 16 if "+avx512f" in features else 8 if "+avx" in features else 4


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
    """A kernel's optimised module as object code for this host, with what running it needs:
    picklable, so the isolated worker can compile and the caller load (CompiledFunc)."""

    func: PrimFunc
    unoptimized_ir: str
    llvm_ir: str               # the optimised module the object code was generated from
    object_code: bytes
    segments: tuple            # (symbol, parallel extent or None), run in order
    fallbacks: tuple           # vectorized loops that run lane by lane, and why
    host: tuple                # (CPU name, features) the code was generated for


def _this_host():
    return llvm.get_host_cpu_name(), _host_features()


def generate_machine_code(func, unoptimized_ir, opt_level, segments, fallbacks):
    """Optimise the module at -O<opt_level> and generate its object code for this host."""
    machine = _target_machine()
    module = llvm.parse_assembly(unoptimized_ir)
    module.verify()
    _optimize(module, machine, opt_level)
    return MachineCode(func, unoptimized_ir, str(module), machine.emit_object(module), tuple(segments),
                       tuple(fallbacks), _this_host())


class CompiledFunc:
    """A kernel compiled for this CPU; call it with one array per parameter to run it in place."""

    def __init__(self, code):
        if code.host != _this_host():
            raise CodegenError(f"kernel '{code.func.name}' was compiled for CPU '{code.host[0]}' with other "
                               f"features than this host's ('{_this_host()[0]}')")
        self.code = code
        triple, layout = _host_layout()
        # MCJIT needs a module to start from; the kernel arrives as object code, linked in as it is.
        self._engine = llvm.create_mcjit_compiler(
            llvm.parse_assembly(f'target triple = "{triple}"\ntarget datalayout = "{layout}"\n'), _target_machine())
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(code.object_code))
        self._engine.finalize_object()
        self._segments = [(_SEGMENT_PROTOTYPE(self._engine.get_function_address(symbol)), extent)
                          for symbol, extent in code.segments]
        self._written = written_buffers(code.func.body)
        self._asm = None

    func = property(lambda self: self.code.func)
    unoptimized_ir = property(lambda self: self.code.unoptimized_ir)
    llvm_ir = property(lambda self: self.code.llvm_ir)
    segments = property(lambda self: self.code.segments)
    fallbacks = property(lambda self: self.code.fallbacks)

    def asm(self):
        """The host assembly of the optimized module."""
        if self._asm is None:
            self._asm = _target_machine().emit_assembly(llvm.parse_assembly(self.llvm_ir))
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


def _is_torch_tensor(value):
    return type(value).__module__.startswith("torch") and hasattr(value, "data_ptr")


def _memory_span(array, param, written):
    """(address, bytes) of an argument, after checking it has exactly the parameter's layout."""
    name = param.name
    if isinstance(array, np.ndarray):
        dtype, shape, address = str(array.dtype), array.shape, array.ctypes.data
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


def clear_cache():
    """Forget compiled kernels (a long search would otherwise keep every candidate's machine code)."""
    with _cache_lock:
        _cache.clear()


def compile_func(func: PrimFunc, opt_level=3, legalised=False) -> CompiledFunc:
    """Compile a kernel for this CPU (legalised first unless the back end's passes already did,
    so hand-written loop IR compiles too); identical kernels (same LLVM IR, level and host)
    compile once."""
    text, builder, func = _module_text(func, opt_level, legalised)
    key = (text, opt_level, *_this_host())
    with _cache_lock:
        compiled = _cache.get(key)
        if compiled is None:
            code = generate_machine_code(func, text, opt_level, builder.segments, builder.fallbacks)
            compiled = _cache[key] = CompiledFunc(code)
    return compiled


def machine_code(func: PrimFunc, opt_level=3, legalised=False) -> MachineCode:
    """What compile_func compiles, as object code not yet loaded (for building in another process)."""
    text, builder, func = _module_text(func, opt_level, legalised)
    return generate_machine_code(func, text, opt_level, builder.segments, builder.fallbacks)


def _module_text(func, opt_level, legalised):
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
    while True:
        builder = ModuleBuilder(func, triple, layout, host_register_lanes())
        text = str(builder.build())
        instructions, copies = _instruction_count(text), emitted_copies(func.body)
        if instructions <= MAX_EMITTED_INSTRUCTIONS or copies <= 1:
            return text, builder, func
        # Instructions grow with the stores laid out: roll to the budget's share, then emit again.
        allowed = max(1, copies * MAX_EMITTED_INSTRUCTIONS // instructions)
        rolled = roll_to_fit(func.body, min(allowed, copies - 1))
        if rolled is func.body:
            return text, builder, func
        func = replace(func, body=rolled)


def _instruction_count(text):
    """Instructions in LLVM IR text (each sits on an indented line inside a function body)."""
    return text.count("\n  ")


class CpuBackend(Backend):
    """Kernels for this CPU: legalised loop IR, LLVM at -O3, numpy arrays or CPU torch tensors."""

    kind = "cpu"

    def passes(self, target):
        return (legalize,)

    def compile(self, func, target):
        return compile_func(func, legalised=True)

    def compile_artifact(self, func, target):
        return machine_code(func, legalised=True)

    def load_artifact(self, artifact, target):
        return CompiledFunc(artifact)

    def preload(self):
        _host_layout()


register_backend(CpuBackend())
