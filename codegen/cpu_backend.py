"""The CPU back end: LLVM IR from codegen.llvm_backend compiled for this host (MCJIT), called
through a pointer table, its parallel segments spread over a thread pool (codegen.runtime)."""

from __future__ import annotations

import ctypes
import functools
import threading

import llvmlite.binding as llvm
import numpy as np

from codegen import runtime
from codegen.backend import Backend, register_backend
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


class CompiledFunc:
    """A kernel compiled for this CPU; call it with one array per parameter to run it in place."""

    def __init__(self, func, unoptimized_ir, opt_level, segments, fallbacks):
        self.func = func
        self.unoptimized_ir = unoptimized_ir
        self.fallbacks = tuple(fallbacks)   # vectorized loops that run lane by lane, and why
        machine = _target_machine()
        module = llvm.parse_assembly(unoptimized_ir)
        module.verify()
        _optimize(module, machine, opt_level)
        self.llvm_ir = str(module)
        self._engine = llvm.create_mcjit_compiler(module, machine)
        self._engine.finalize_object()
        self.segments = tuple(segments)  # (symbol, parallel extent or None), run in order
        self._segments = [(_SEGMENT_PROTOTYPE(self._engine.get_function_address(symbol)), extent)
                          for symbol, extent in segments]
        self._written = written_buffers(func.body)
        self._asm = None

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
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    for param in func.params:
        if param.dtype not in _ITEM_SIZES:
            raise CodegenError(f"parameter '{param.name}' has dtype {param.dtype!r}; "
                               f"expected one of {', '.join(_ITEM_SIZES)}")
    check_loops(func.body)
    func = func if legalised else legalize(func)
    triple, layout = _host_layout()
    builder = ModuleBuilder(func, triple, layout, host_register_lanes())
    text = str(builder.build())
    key = (text, opt_level, llvm.get_host_cpu_name(), _host_features())
    with _cache_lock:
        compiled = _cache.get(key)
        if compiled is None:
            compiled = _cache[key] = CompiledFunc(func, text, opt_level, builder.segments, builder.fallbacks)
    return compiled


class CpuBackend(Backend):
    """Kernels for this CPU: legalised loop IR, LLVM at -O3, numpy arrays or CPU torch tensors."""

    kind = "cpu"

    def passes(self, target):
        return (legalize,)

    def compile(self, func, target):
        return compile_func(func, legalised=True)

    def preload(self):
        _host_layout()


register_backend(CpuBackend())
