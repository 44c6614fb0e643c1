"""Save a kernel as a shared library with a plain C entry point and a header.

The optimized module is emitted as position-independent object code, its segment symbols
prefixed with the kernel's name (so several kernels link into one program), and linked with
a small generated C wrapper: `int NAME(const float *A, ..., float *O)` allocates the
kernel's workspaces, runs the segments in order on the calling thread and returns 0
(-1 if scratch memory could not be allocated).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import llvmlite.binding as llvm

_C_TYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t"}


def _object_code(kernel, name):
    """PIC object code of the kernel's optimized module, segment symbols renamed name_seg_k."""
    text = kernel.compiled.llvm_ir
    for symbol, _ in kernel.compiled.segments:
        text = re.sub(rf"@{symbol}\b", f"@{name}_{symbol}", text)
    module = llvm.parse_assembly(text)
    target = llvm.Target.from_default_triple()
    cpu, features = kernel.compiled.code.host   # the CPU the kernel was compiled for
    machine = target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="pic", codemodel="default")
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
 * Runs on the calling thread; returns 0, or -1 if scratch memory could not be allocated. */
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
    lines = ['#include <stdlib.h>', f'#include "{name}.h"', ""]
    lines += [f"void {name}_{symbol}(int64_t begin, int64_t end, void **buffers);"
              for symbol, _ in kernel.compiled.segments]
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
        lines.append(f"    {name}_{symbol}(0, {extent or 1}, buffers);")
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
    result = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(wrapper), str(obj), "-lm"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"linking {library.name} failed: {result.stderr.strip().splitlines()[-1:]}")
    return library, header
