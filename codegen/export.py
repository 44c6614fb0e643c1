"""Save a kernel as a shared library with a plain C entry point and a header.

The optimized module is emitted as position-independent object code, its segment symbols
prefixed with the kernel's name (so several kernels link into one program), and linked with
a small generated C wrapper: `int NAME(const float *A, ..., float *O)` allocates the
kernel's workspaces, runs the segments in order and returns 0 (-1 if scratch memory could not be
allocated). A parallel segment keeps the tuned parallelism: its range is cut into chunks, several
per thread, that the caller and a pool of helper threads take from a shared counter, as
codegen.runtime's pool does for the Kernel. The pool starts on the first parallel call with
OMP_NUM_THREADS threads (all usable cores by default) and its idle threads sleep: OpenMP's default
spinning wait made calls alternating with another thread pool (the Kernel's, or a host program's)
up to 15 times slower on a 2-core machine. Workspaces are per call, and a call that finds the pool
busy with another runs its parallel segments on its own thread, so a program may call the function
from several threads at once. The scratch buffers that parallel chunks keep between calls are freed
by `void NAME_release_scratch(void)`.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import llvmlite.binding as llvm

from codegen.cpu_backend import create_machine
from codegen.kept_scratch import RELEASE_SCRATCH

_C_TYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t"}
CHUNKS_PER_THREAD = 4  # as codegen.runtime: a core that runs slow for a while delays one small chunk

# The wrapper's thread pool. Helpers join a job under the lock (working++), so a caller returns, and
# the next job is set up, only once no helper can still be running a chunk of the previous one; the
# caller takes chunks too, so a job finishes even if no helper wakes in time (or exists, after fork).
_POOL = """\
typedef void (*segment_fn)(int64_t, int64_t, void **);

static struct {{
    pthread_mutex_t lock;   /* guards the job and the counts below */
    pthread_cond_t wake, done;
    pthread_mutex_t busy;   /* held by the one call whose job the pool runs */
    pthread_once_t once;
    int threads, working;
    long generation;
    segment_fn segment;
    int64_t extent, chunks;
    void **buffers;
    atomic_llong next;
}} pool = {{.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER,
           .busy = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT}};

static void take_chunks(void) {{
    for (int64_t chunk; (chunk = atomic_fetch_add(&pool.next, 1)) < pool.chunks;)
        pool.segment(pool.extent * chunk / pool.chunks, pool.extent * (chunk + 1) / pool.chunks, pool.buffers);
}}

static void *helper(void *unused) {{
    long seen = 0;
    (void)unused;
    pthread_mutex_lock(&pool.lock);
    for (;;) {{
        while (pool.generation == seen) pthread_cond_wait(&pool.wake, &pool.lock);
        seen = pool.generation;
        pool.working++;
        pthread_mutex_unlock(&pool.lock);
        take_chunks();
        pthread_mutex_lock(&pool.lock);
        if (--pool.working == 0) pthread_cond_broadcast(&pool.done);
    }}
    return NULL;
}}

static void start_pool(void) {{
    const char *text = getenv("OMP_NUM_THREADS");
    int threads = text ? atoi(text) : 0;
    if (threads < 1) {{
        cpu_set_t usable;
        threads = sched_getaffinity(0, sizeof usable, &usable) == 0 ? CPU_COUNT(&usable)
                                                                    : (int)sysconf(_SC_NPROCESSORS_ONLN);
    }}
    pool.threads = 1;
    for (int index = 1; index < threads; ++index) {{
        pthread_t thread;
        if (pthread_create(&thread, NULL, helper, NULL) != 0) break;
        pthread_detach(thread);
        pool.threads++;
    }}
}}

/* [0, extent) of a parallel segment in near-equal chunks, taken by the caller and the pool. */
static void run_parallel(segment_fn segment, int64_t extent, void **buffers) {{
    pthread_once(&pool.once, start_pool);
    int64_t chunks = (int64_t)pool.threads * {chunks};
    if (chunks > extent) chunks = extent;
    if (chunks <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {{
        segment(0, extent, buffers);
        return;
    }}
    pthread_mutex_lock(&pool.lock);
    while (pool.working > 0) pthread_cond_wait(&pool.done, &pool.lock);
    pool.segment = segment;
    pool.extent = extent;
    pool.chunks = chunks;
    pool.buffers = buffers;
    atomic_store(&pool.next, 0);
    pool.generation++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    take_chunks();
    pthread_mutex_lock(&pool.lock);
    while (pool.working > 0) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&pool.busy);
}}
"""


def _object_code(kernel, name):
    """PIC object code of the kernel's optimized module, its symbols renamed name_seg_k and
    name_release_scratch."""
    text = kernel.compiled.llvm_ir
    for symbol in [symbol for symbol, _ in kernel.compiled.segments] + [RELEASE_SCRATCH]:
        text = re.sub(rf"@{symbol}\b", f"@{name}_{symbol}", text)
    module = llvm.parse_assembly(text)
    cpu, features = kernel.compiled.code.host   # the CPU the kernel was compiled for
    machine = create_machine(cpu, features, reloc="pic", codemodel="default")
    return machine.emit_object(module)


def _prototype(kernel, name):
    params = []
    for index, buffer in enumerate(kernel.params):
        const = "const " if index < len(kernel.lowered.inputs) else ""
        params.append(f"{const}{_C_TYPES[buffer.dtype]} *{buffer.name}")
    return f"int {name}({', '.join(params)})"


def _blocking_text(param):
    """How a blocked parameter's elements sit, in C terms."""
    parts = ", ".join(f"dimension {b.dim} split by {b.block}" for b in param.blockings)
    return f"the logical {list(param.logical_shape)} array with {parts}, each block innermost"


def header_text(kernel, name):
    guard = f"{name.upper()}_H"
    blocked = kernel.blocked
    shapes = "\n".join(f" *   {b.name}: {b.dtype}{list(b.shape)}, "
                       f"{'input' if i < len(kernel.lowered.inputs) else 'output'}"
                       + (f", blocked: {_blocking_text(blocked[b.name])}" if b.name in blocked else "")
                       for i, b in enumerate(kernel.params))
    return f"""/* {kernel.task} compiled by flexsched for this CPU.
 * Arrays are row-major and contiguous:
{shapes}
 * Parallel loops run on the calling thread and a pool of threads started on the first call
 * (OMP_NUM_THREADS threads, all usable cores by default; idle ones sleep). Several threads may call
 * it at once. Returns 0, or -1 if scratch memory could not be allocated.
 * Scratch buffers of parallel chunks are kept from one call to the next (up to 16 per buffer, one per
 * chunk that ran at once); {name}_{RELEASE_SCRATCH}() frees them, and a later call allocates again. */
#ifndef {guard}
#define {guard}
#include <stdint.h>
#ifdef __cplusplus
extern "C" {{
#endif
{_prototype(kernel, name)};
void {name}_{RELEASE_SCRATCH}(void);
#ifdef __cplusplus
}}
#endif
#endif
"""


def wrapper_text(kernel, name):
    parallel = any(extent for _, extent in kernel.compiled.segments)
    includes = ["_GNU_SOURCE", "<pthread.h>", "<sched.h>", "<stdatomic.h>", "<unistd.h>"] if parallel else []
    lines = [f"#define {include}" if include.startswith("_") else f"#include {include}" for include in includes]
    lines += ['#include <stdlib.h>', f'#include "{name}.h"', ""]
    lines += [f"void {name}_{symbol}(int64_t begin, int64_t end, void **buffers);"
              for symbol, _ in kernel.compiled.segments]
    if parallel:
        lines += ["", _POOL.format(chunks=CHUNKS_PER_THREAD)]
    lines += ["", _prototype(kernel, name) + " {"]
    workspaces = kernel.lowered.workspaces
    for index, buffer in enumerate(workspaces):
        nbytes = f"{buffer.size} * sizeof({_C_TYPES[buffer.dtype]})"
        lines.append(f"    void *ws{index} = aligned_alloc(64, ({nbytes} + 63) / 64 * 64);   /* whole cache lines */")
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
    # nodelete: the pool's threads run the library's code for the life of the process.
    command = [compiler, "-shared", "-fPIC", "-O2", "-pthread", "-o", str(library), str(wrapper), str(obj), "-lm",
               "-Wl,-z,nodelete"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"linking {library.name} failed: {_last_line(result.stderr)}")
    return library, header


def _last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no message"
