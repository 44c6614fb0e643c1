"""Heap scratch kept from call to call: a parallel chunk's large scratch buffer is taken from the
buffers its allocation site kept, so later calls touch no fresh pages whatever the allocator's
state; threads never share one buffer at once; and the kept buffers go with the kernel."""

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from codegen import cpu_backend
from codegen.ir import Allocate, Buffer, For, PrimFunc, Store, loop_var, seq
from flexsched.expr import Load
from flexsched.target import get_target

pytestmark = pytest.mark.cpu


def reversing_kernel(rows, width):
    """O[i, :] = reversed(2 A[i, :]) + 1 through a per-row scratch row T (on the heap past 16 KiB)."""
    A, O = Buffer("A", (rows, width), "float32", "global"), Buffer("O", (rows, width), "float32", "global")
    T = Buffer("T", (width,), "float32", "local")
    i, j, j2 = loop_var("i", rows), loop_var("j", width), loop_var("j2", width)
    fill = For(j, width, "serial", Store(T, (j,), Load(A, (i, j), "float32") * 2.0))
    use = For(j2, width, "serial", Store(O, (i, j2), Load(T, (width - 1 - j2,), "float32") + 1.0))
    body = For(i, rows, "parallel", Allocate(T, seq(fill, use)))
    return cpu_backend.compile_func(PrimFunc(f"reverse_{width}", (A, O), body), 3, target=get_target("llvm"))


# Run in a fresh process with glibc's mmap threshold held at its default, so that every free of a
# large block unmaps it and every allocation maps (and faults in) fresh pages: the state in which
# per-call scratch cost the most. Reports page faults per call and the bytes mapped for the kernel.
HELD_THRESHOLD = textwrap.dedent("""
    import ctypes, gc, json, resource, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from codegen import cpu_backend, runtime
    from test_kept_scratch import reversing_kernel

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                     "fordblks", "keepcost")]
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = MallInfo2
    rows, width = 4, 1 << 20
    kernel = reversing_kernel(rows, width)
    a = np.random.default_rng(0).standard_normal((rows, width)).astype("float32")
    o = np.zeros_like(a)
    runtime.default_pool()   # the process's thread pool (its native code, made once) is not the kernel's
    mapped_before = mallinfo2().hblkhd
    kernel(a, o)
    right = bool(np.array_equal(o, a[:, ::-1] * 2 + 1))
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        kernel(a, o)
    faults_per_call = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / 10
    kept = mallinfo2().hblkhd - mapped_before
    del kernel
    cpu_backend.clear_cache()   # compile_func keeps what it compiled until told to forget
    gc.collect()
    left = mallinfo2().hblkhd - mapped_before
    print(json.dumps({"right": right, "faults_per_call": faults_per_call, "kept": kept, "left": left}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator and its tunables")
def test_later_calls_touch_no_fresh_scratch_pages_and_the_kept_buffers_go_with_the_kernel():
    env = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.mmap_threshold=131072")
    done = subprocess.run([sys.executable, "-c", HELD_THRESHOLD, os.path.dirname(__file__)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    buffer_bytes, page = 4 << 20, 4096
    assert report["right"]
    # Freed and allocated afresh, four 4 MiB buffers fault in 4096 pages a call.
    assert report["faults_per_call"] < buffer_bytes / page / 8
    assert buffer_bytes <= report["kept"] <= 4 * (buffer_bytes + page)   # at most one per chunk
    assert report["left"] < page


def test_threads_calling_one_kernel_at_once_never_share_a_scratch_buffer():
    """More chunks run at once than there are kept buffers (16): some allocate their own, and
    every output is still right."""
    rows, width = 24, 40_000
    kernel = reversing_kernel(rows, width)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((rows, width)).astype("float32") for _ in range(20)]
    wrong = []

    def calls(a):
        out = np.empty_like(a)
        for call in range(8):
            out.fill(np.nan)
            kernel(a, out)
            if not np.array_equal(out, a[:, ::-1] * 2 + 1):
                wrong.append(call)

    threads = [threading.Thread(target=calls, args=(a,)) for a in inputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong


def test_fresh_heap_scratch_is_zeroed_though_the_allocator_hands_back_dirty_memory():
    """A vector's lanes past a row's end are computed, never stored: garbage there (freed memory
    holds pointers, whose high halves read as denormal floats) made searched YOLO C11 kernels run up
    to 20 times slower in some processes. take_scratch zeroes each buffer it allocates."""
    import ctypes

    import llvmlite.binding as llvm

    from codegen import llvm_text as ir
    from codegen.llvm_backend import ModuleBuilder

    nbytes = 64 * 1024   # under glibc's mmap threshold: a freed block is handed out again
    triple, layout = cpu_backend._host_layout()
    A = Buffer("A", (1,), "float32", "global")
    builder = ModuleBuilder(PrimFunc("nothing", (A,), seq()), triple, layout, 8)
    probe = ir.Function(builder.module, ir.FunctionType(ir.PointerType(), []), name="probe")
    entry = builder.ir_builder(probe.append_basic_block("entry"))
    _, buffer = builder.scratch.take(entry, nbytes, "buffer")
    entry.ret(buffer)
    module = builder.build()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), cpu_backend._target_machine())
    engine.finalize_object()
    take = ctypes.CFUNCTYPE(ctypes.c_void_p)(engine.get_function_address("probe"))
    libc = ctypes.CDLL(None)
    libc.aligned_alloc.restype = ctypes.c_void_p
    libc.aligned_alloc.argtypes = (ctypes.c_size_t, ctypes.c_size_t)
    libc.free.argtypes = (ctypes.c_void_p,)
    dirty = libc.aligned_alloc(64, nbytes)
    ctypes.memset(dirty, 0xFF, nbytes)
    libc.free(dirty)
    fresh = take()
    assert not any(ctypes.string_at(fresh, nbytes))
    libc.free(fresh)
