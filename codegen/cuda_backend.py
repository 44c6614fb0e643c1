"""The GPU back end: GPU lowering passes, CUDA C, nvcc to PTX and machine code (no GPU needed), and
launches through cupy where a GPU is present (codegen.cuda_runtime)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from flexsched.expr import Load, as_expr, walk
from flexsched.target import gpu_device

from . import cuda_runtime
from .backend import Backend, register_backend
from .cuda import cuda_source
from .gpu_lower import lower_gpu
from .ir import For, Store, walk_stmts
from .legalize import legalize
from .nvcc import CudaCompileError, compile_units, find_nvcc


class CudaModule:
    """A compiled GPU kernel: its CUDA C, PTX and ptxas figures, run on cupy arrays or CUDA torch
    tensors (one per parameter: inputs, outputs, workspaces), launch after launch."""

    def __init__(self, func, source, arch, unit=None):
        self.func = func
        self.cuda = source          # CudaSource: text, entries, line weights
        self.arch = arch
        self.unit = unit            # nvcc's CompiledUnit (None where nvcc is absent)
        self._written = {node.buffer for node in walk_stmts(func.body) if isinstance(node, Store)}
        self._vectorised = _vector_accessed(func)   # parameters read or written 16 bytes at a time
        self._kernels = None

    @property
    def source(self):
        return self.cuda.text

    def assembly(self):
        """The PTX nvcc made of the source."""
        if self.unit is None:
            raise CudaCompileError("no PTX: nvcc is not installed here (the source still runs through NVRTC "
                                   "on a machine with cupy)")
        return self.unit.ptx

    @property
    def resources(self):
        """{entry name: nvcc.Resources} (registers, spills, shared memory) as ptxas reports them."""
        return {} if self.unit is None else {name: kernel.resources for name, kernel in self.unit.kernels.items()}

    @property
    def launches(self):
        return tuple(launch for _, launch in self.cuda.entries)

    def __call__(self, *arrays):
        params = self.func.params
        if len(arrays) != len(params):
            names = ", ".join(p.name for p in params)
            raise TypeError(f"kernel '{self.func.name}' takes {len(params)} arguments ({names}), got {len(arrays)}")
        device = [cuda_runtime.as_device_array(array, param.name, param.shape, param.dtype, param in self._written)
                  for array, param in zip(arrays, params)]
        self._check_distinct(device)
        for array, param in zip(device, params):
            if param in self._vectorised and array.data.ptr % 16:
                raise ValueError(f"argument '{param.name}' does not start on a 16-byte boundary, but the kernel "
                                 "copies it in vectors (pass a fresh or contiguous allocation, not an offset view)")
        kernels = self._load()
        with cuda_runtime.stream_for(arrays):
            for name, launch in self.cuda.entries:
                kernels[name](launch.grid, launch.block, tuple(device), shared_mem=launch.shared_bytes)

    def _load(self):
        if self._kernels is None:
            names = [name for name, _ in self.cuda.entries]
            unit = self.unit
            self._kernels = cuda_runtime.load_kernels(
                names, cubin=unit.cubin if unit else None, ptx=unit.ptx if unit else None,
                source=None if unit else self.cuda.text, arch=self.arch)
            for name, launch in self.cuda.entries:
                if launch.shared_bytes > 48 * 1024:  # beyond the default, by opt-in
                    self._kernels[name].max_dynamic_shared_size_bytes = launch.shared_bytes
        return self._kernels

    def _check_distinct(self, device):
        """Refuse a written argument that shares memory with another: the kernel says __restrict__."""
        params = self.func.params
        spans = [(array.data.ptr, array.data.ptr + array.nbytes) for array in device]
        for i, (start_i, end_i) in enumerate(spans):
            for j in range(i + 1, len(spans)):
                start_j, end_j = spans[j]
                if (params[i] in self._written or params[j] in self._written) and start_i < end_j and start_j < end_i:
                    raise ValueError(f"arguments '{params[i].name}' and '{params[j].name}' overlap in GPU memory, "
                                     "but the kernel writes one of them and assumes distinct buffers")

    def __repr__(self):
        return f"<CudaModule {self.func.name}: {len(self.cuda.entries)} launch(es), {self.arch}>"


def _vector_accessed(func):
    """Global buffers a vectorised loop of func loads or stores."""
    found = set()
    for loop in walk_stmts(func.body):
        if isinstance(loop, For) and loop.kind == "vectorized":
            for store in walk_stmts(loop.body):
                if isinstance(store, Store):
                    found.add(store.buffer)
                    found |= {node.tensor for node in walk(as_expr(store.value, store.buffer.dtype))
                              if isinstance(node, Load)}
    return {buffer for buffer in found if buffer.scope == "global"}


def cuda_source_of(func):
    """CudaSource of a GPU-lowered, legalised function (parameters it never writes are const)."""
    written = {node.buffer for node in walk_stmts(func.body) if isinstance(node, Store)}
    return cuda_source(func, read_only={param for param in func.params if param not in written})


def compile_module(func, target):
    """A CudaModule with its PTX and machine code for the target's architecture (nvcc where it is
    installed; without nvcc the module keeps its source for NVRTC)."""
    arch = gpu_device(target).arch
    source = cuda_source_of(func)
    unit = None
    if find_nvcc() is not None:
        (unit,) = compile_units([source.text], arch, keep_machine_code=True)
        if isinstance(unit, CudaCompileError):
            raise unit
    return CudaModule(func, source, arch, unit)


def modules_for(task, schedules, target, workers=2):
    """A CudaModule (PTX and ptxas figures, no machine code) for each schedule of task, or the
    exception that stopped it; nvcc compiles them as `workers` batches side by side."""
    from analysis import analyze
    from .kernel import lower_for

    info = analyze(task)
    arch = gpu_device(target).arch
    prepared = []
    for schedule in schedules:
        try:
            _, lowered = lower_for(task, schedule, target, name=f"candidate{len(prepared)}", info=info)
            prepared.append((lowered.func, cuda_source_of(lowered.func)))
        except Exception as err:  # noqa: BLE001 - a schedule that does not lower is that point's failure
            prepared.append(err)
    pending = [i for i, item in enumerate(prepared) if not isinstance(item, Exception)]
    groups = [pending[k::max(1, workers)] for k in range(max(1, workers))]
    groups = [group for group in groups if group]
    with ThreadPoolExecutor(max_workers=max(1, len(groups))) as pool:  # nvcc runs outside the GIL
        compiled = pool.map(lambda group: compile_units([prepared[i][1].text for i in group], arch), groups)
        for group, units in zip(groups, compiled):
            for i, unit in zip(group, units):
                func, source = prepared[i]
                prepared[i] = unit if isinstance(unit, Exception) else CudaModule(func, source, arch, unit)
    return prepared


class CudaBackend(Backend):
    """Kernels for NVIDIA GPUs through CUDA C; arrays are cupy arrays or CUDA torch tensors."""

    kind = "gpu"

    def passes(self, target):
        return (lower_gpu, legalize)

    def compile(self, func, target):
        return compile_module(func, target)

    def unavailable(self, target):
        return cuda_runtime.unavailable_reason()

    def empty(self, shape, dtype):
        return cuda_runtime.cupy_module().empty(shape, dtype=dtype)

    def to_device(self, array):
        return cuda_runtime.cupy_module().asarray(array)

    def to_host(self, array):
        return cuda_runtime.cupy_module().asnumpy(array) if not isinstance(array, np.ndarray) else array

    def time_runs(self, run, number):
        return cuda_runtime.time_runs(run, number)

    def preload(self):
        if not cuda_runtime.unavailable_reason():
            cuda_runtime.cupy_module().cuda.Device().synchronize()   # creates the context

    def healthy(self):
        return bool(cuda_runtime.unavailable_reason()) or cuda_runtime.healthy()


register_backend(CudaBackend())
