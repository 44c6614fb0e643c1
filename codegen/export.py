"""Save a kernel as a shared library with a plain C entry point and a header.

The optimized module is emitted as position-independent object code, its segment symbols
prefixed with the kernel's name (so several kernels link into one program), and linked with
a small generated C wrapper: `int NAME(const float *A, ..., float *O)` allocates the
kernel's workspaces, runs the segments in order and returns 0 (-1 if scratch memory could not be
allocated). A parallel segment keeps the tuned parallelism: its range is cut into chunks, several
per thread, that OpenMP threads take dynamically, as codegen.runtime's pool does for the Kernel
(OMP_NUM_THREADS threads, all cores by default). Workspaces are per call, so a program may call
the function from several threads at once.
"""

from __future__ import annotations

import re
import subprocess
import warnings
from pathlib import Path

import llvmlite.binding as llvm

_C_TYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t"}
CHUNKS_PER_THREAD = 4  # as codegen.runtime: a core that runs slow for a while delays one small chunk

# Runs a parallel segment's [0, extent) in near-equal chunks taken dynamically by OpenMP threads
# (on the calling thread alone where the library was built without OpenMP).
_RUN_PARALLEL = """\
static void run_parallel(void (*segment)(int64_t, int64_t, void **), int64_t extent, void **buffers) {{
#ifdef _OPENMP
    int64_t chunks = (int64_t)omp_get_max_threads() * {chunks};
    if (chunks > extent) chunks = extent;
    if (chunks <= 1) {{
        segment(0, extent, buffers);
        return;
    }}
    #pragma omp parallel for schedule(dynamic, 1)
    for (int64_t chunk = 0; chunk < chunks; ++chunk)
        segment(extent * chunk / chunks, extent * (chunk + 1) / chunks, buffers);
#else
    segment(0, extent, buffers);
#endif
}}
"""


def _object_code(kernel, name):
    """PIC object code of the kernel's optimized module, segment symbols renamed name_seg_k."""
    text = kernel.compiled.llvm_ir
    for symbol, _ in kernel.compiled.segments:
        text = re.sub(rf"@{symbol}\b", f"@{name}_{symbol}", text)
    module = llvm.parse_assembly(text)
    target = llvm.Target.from_default_triple()
    machine = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                           features=llvm.get_host_cpu_features().flatten(),
                                           opt=3, reloc="pic", codemodel="default")
    return machine.emit_object(module)


def _prototype(kernel, name):
    params = []
    for index, buffer in enumerate(kernel.params):
        const = "const " if index < len(kernel.lowered.inputs) else ""
        params.append(f"{const}{_C_TYPES[buffer.dtype]} *{buffer.name}")
    return f"int {name}({', '.join(params)})"


def header_text(kernel, name):
    guard = f"{name.upper()}_H"
    shapes = "\n".join(f" *   {b.name}: {b.dtype}{list(b.shape)}, "
                       f"{'input' if i < len(kernel.lowered.inputs) else 'output'}"
                       for i, b in enumerate(kernel.params))
    return f"""/* {kernel.task} compiled by flexsched for this CPU.
 * Arrays are row-major and contiguous:
{shapes}
 * Parallel loops run on OpenMP threads (OMP_NUM_THREADS, all cores by default); scratch memory is
 * per call, so several threads may call it at once. Returns 0, or -1 if scratch memory could not
 * be allocated. */
#ifndef {guard}
#define {guard}
#include <stdint.h>
#ifdef __cplusplus
extern "C" {{
#endif
{_prototype(kernel, name)};
#ifdef __cplusplus
}}
#endif
#endif
"""


def wrapper_text(kernel, name):
    lines = ['#include <stdlib.h>', "#ifdef _OPENMP", "#include <omp.h>", "#endif", f'#include "{name}.h"', ""]
    lines += [f"void {name}_{symbol}(int64_t begin, int64_t end, void **buffers);"
              for symbol, _ in kernel.compiled.segments]
    if any(extent for _, extent in kernel.compiled.segments):
        lines += ["", _RUN_PARALLEL.format(chunks=CHUNKS_PER_THREAD)]
    lines += ["", _prototype(kernel, name) + " {"]
    workspaces = kernel.lowered.workspaces
    for index, buffer in enumerate(workspaces):
        lines.append(f"    void *ws{index} = malloc({buffer.size} * sizeof({_C_TYPES[buffer.dtype]}));")
    if workspaces:
        lines.append("    if (" + " || ".join(f"!ws{i}" for i in range(len(workspaces))) + ") {")
        lines += [f"        free(ws{i});" for i in range(len(workspaces))] + ["        return -1;", "    }"]
    pointers = [f"(void *){b.name}" for b in kernel.params] + [f"ws{i}" for i in range(len(workspaces))]
    lines.append(f"    void *buffers[{max(1, len(pointers))}] = {{{', '.join(pointers) or '0'}}};")
    for symbol, extent in kernel.compiled.segments:
        if extent:
            lines.append(f"    run_parallel({name}_{symbol}, {extent}, buffers);")
        else:
            lines.append(f"    {name}_{symbol}(0, 1, buffers);")
    lines += [f"    free(ws{i});" for i in range(len(workspaces))]
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def save_shared_library(kernel, directory, name=None, compiler="cc"):
    """Write lib<name>.so and <name>.h into directory; returns their paths."""
    name = name or kernel.lowered.func.name
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"library name {name!r} must be a C identifier")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    header, wrapper = directory / f"{name}.h", directory / f"{name}_wrapper.c"
    obj, library = directory / f"{name}_kernel.o", directory / f"lib{name}.so"
    header.write_text(header_text(kernel, name))
    wrapper.write_text(wrapper_text(kernel, name))
    obj.write_bytes(_object_code(kernel, name))
    command = [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(wrapper), str(obj), "-lm"]
    result = subprocess.run(command[:1] + ["-fopenmp"] + command[1:], capture_output=True, text=True)
    if result.returncode != 0:
        openmp_error = result.stderr
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode == 0 and "run_parallel(" in wrapper.read_text():
            warnings.warn(f"{compiler} -fopenmp failed ({_last_line(openmp_error)}); {library.name} runs its parallel "
                          "loops on the calling thread", RuntimeWarning, stacklevel=2)
    if result.returncode != 0:
        raise RuntimeError(f"linking {library.name} failed: {_last_line(result.stderr)}")
    return library, header


def _last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no message"
