"""The host side of parallel CPU kernels: a persistent thread pool that runs loop chunks.

A compiled parallel segment is a native function `seg(begin, end, buffers)`. The loop that hands
out its chunks is native too (a few functions compiled once with llvmlite): every thread, the
calling one included, takes chunk numbers from a shared counter until none is left, with the GIL
released throughout, so no chunk waits for the interpreter. Several chunks per thread: on these
machines one core can run at half speed for seconds, and a static split would wait for it.

Between calls a helper spins on the call counter for SPIN_CYCLES before it sleeps, as OpenMP's
threads do: a thread woken from sleep starts tens of microseconds late, a tenth of a 0.5 ms
kernel (a YOLO 1 x 1 layer's). It spins only while calls come closer together than that: where
something else runs between them (a PyTorch operator, whose own threads spin too), the spin would
catch no call and only take a core from that work. A call that finds the pool busy with another
thread's call runs its chunks on its own thread, so a call always finishes and never waits for
another.

Where the process has GNU OpenMP loaded (PyTorch brings it), calls run their chunks on an OpenMP
team instead of the helpers, the same threads PyTorch's operators use: two pools spinning on the
same cores slow each other's calls, as they would inside a model that mixes the two. A forked
child keeps the helpers, since an OpenMP runtime inherited through fork may hang.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
import time

import llvmlite.binding as llvm

from flexsched.target import host_cores

CHUNKS_PER_THREAD = 4
# How long (time-stamp counter cycles, about a millisecond) a helper keeps watching for the next
# call before it sleeps: long enough to catch back-to-back calls, short enough not to hold a core
# from the work a process does between them.
SPIN_CYCLES = 2_000_000
# Helpers spin after a call only when it came this soon after the one before (about SPIN_CYCLES).
SPIN_GAP_SECONDS = 0.5e-3

# Whether calls use the process's GNU OpenMP threads when it has them (False: always the helpers).
SHARE_OPENMP = True
# How often a process without OpenMP loaded looks again (PyTorch may be imported later).
OPENMP_RECHECK_SECONDS = 1.0

_pool = None
_pool_lock = threading.Lock()
_openmp = {"parallel": None, "checked": float("-inf"), "inherited": False}

# The shared state of a call: int64 words.
GENERATION, TICKET, COMPLETED, CHUNKS, EXTENT, FUNCTION, BUFFERS = range(7)
# TICKET holds the call's generation in its high half and the next chunk number in its low half,
# so a helper still holding an earlier call's generation can never take a chunk of this call.
_CHUNK_BITS = 32

# Native chunk loop and waits. Fields are written by the caller before publish() (a release), and
# read by the others after an acquire load of TICKET or GENERATION that shows the new generation.
_NATIVE_IR = r"""
declare i64 @llvm.readcyclecounter()
{pause_declaration}

define void @publish(ptr %s, i64 %gen) {{
  %ticket = getelementptr i64, ptr %s, i64 {TICKET}
  %first = shl i64 %gen, {bits}
  store atomic i64 %first, ptr %ticket release, align 8
  store atomic i64 %gen, ptr %s release, align 8
  ret void
}}

define void @run_chunks(ptr %s, i64 %gen) {{
entry:
  %ticket = getelementptr i64, ptr %s, i64 {TICKET}
  %completed = getelementptr i64, ptr %s, i64 {COMPLETED}
  br label %take

take:
  %t = load atomic i64, ptr %ticket acquire, align 8
  %t_gen = lshr i64 %t, {bits}
  %same = icmp eq i64 %t_gen, %gen
  br i1 %same, label %check, label %done

check:
  %index = and i64 %t, {mask}
  %chunks_at = getelementptr i64, ptr %s, i64 {CHUNKS}
  %chunks = load i64, ptr %chunks_at, align 8
  %left = icmp slt i64 %index, %chunks
  br i1 %left, label %claim, label %done

claim:
  %next = add i64 %t, 1
  %swap = cmpxchg ptr %ticket, i64 %t, i64 %next acq_rel acquire
  %won = extractvalue {{ i64, i1 }} %swap, 1
  br i1 %won, label %run, label %take

run:
  %extent_at = getelementptr i64, ptr %s, i64 {EXTENT}
  %extent = load i64, ptr %extent_at, align 8
  %base = sdiv i64 %extent, %chunks
  %extra = srem i64 %extent, %chunks
  %lead = mul i64 %index, %base
  %before = icmp slt i64 %index, %extra
  %longer = select i1 %before, i64 %index, i64 %extra
  %begin = add i64 %lead, %longer
  %one_more = zext i1 %before to i64
  %length = add i64 %base, %one_more
  %end = add i64 %begin, %length
  %function_at = getelementptr i64, ptr %s, i64 {FUNCTION}
  %function = load i64, ptr %function_at, align 8
  %buffers_at = getelementptr i64, ptr %s, i64 {BUFFERS}
  %buffers = load i64, ptr %buffers_at, align 8
  %callee = inttoptr i64 %function to ptr
  %buffers_ptr = inttoptr i64 %buffers to ptr
  call void %callee(i64 %begin, i64 %end, ptr %buffers_ptr)
  %ignored = atomicrmw add ptr %completed, i64 1 release
  br label %take

done:
  ret void
}}

define void @team_chunks(ptr %call) {{
  %s = load ptr, ptr %call, align 8
  %gen_at = getelementptr i64, ptr %call, i64 1
  %gen = load i64, ptr %gen_at, align 8
  call void @run_chunks(ptr %s, i64 %gen)
  ret void
}}

define i64 @wait_generation(ptr %s, i64 %seen, i64 %cycles) {{
entry:
  %start = call i64 @llvm.readcyclecounter()
  br label %look

look:
  %gen = load atomic i64, ptr %s acquire, align 8
  %new = icmp ne i64 %gen, %seen
  br i1 %new, label %found, label %spin

spin:
  {pause_call}
  %now = call i64 @llvm.readcyclecounter()
  %spent = sub i64 %now, %start
  %over = icmp ugt i64 %spent, %cycles
  br i1 %over, label %found, label %look

found:
  %result = phi i64 [ %gen, %look ], [ %seen, %spin ]
  ret i64 %result
}}

define void @wait_completed(ptr %s, i64 %chunks) {{
entry:
  %completed = getelementptr i64, ptr %s, i64 {COMPLETED}
  br label %look

look:
  %count = load atomic i64, ptr %completed acquire, align 8
  %all = icmp sge i64 %count, %chunks
  br i1 %all, label %done, label %spin

spin:
  {pause_call}
  br label %look

done:
  ret void
}}
"""


class _Native:
    """The compiled chunk loop and waits, callable from ctypes (which drops the GIL for each call)."""

    def __init__(self):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        triple = llvm.get_process_triple()
        x86 = triple.startswith(("x86_64", "i686", "i386"))
        text = _NATIVE_IR.format(
            pause_declaration="declare void @llvm.x86.sse2.pause()" if x86 else "",
            pause_call="call void @llvm.x86.sse2.pause()" if x86 else "",
            bits=_CHUNK_BITS, mask=(1 << _CHUNK_BITS) - 1,
            TICKET=TICKET, COMPLETED=COMPLETED, CHUNKS=CHUNKS, EXTENT=EXTENT, FUNCTION=FUNCTION, BUFFERS=BUFFERS)
        module = llvm.parse_assembly(f'target triple = "{triple}"\n' + text)
        module.verify()
        machine = llvm.Target.from_triple(triple).create_target_machine(opt=2)
        self._engine = llvm.create_mcjit_compiler(module, machine)
        self._engine.finalize_object()
        address = self._engine.get_function_address
        state, word = ctypes.c_void_p, ctypes.c_int64
        self.publish = ctypes.CFUNCTYPE(None, state, word)(address("publish"))
        self.run_chunks = ctypes.CFUNCTYPE(None, state, word)(address("run_chunks"))
        self.wait_generation = ctypes.CFUNCTYPE(word, state, word, word)(address("wait_generation"))
        self.wait_completed = ctypes.CFUNCTYPE(None, state, word)(address("wait_completed"))
        # run_chunks for an OpenMP team, which passes one pointer: to (state, generation).
        self.team_chunks = address("team_chunks")


@functools.cache
def _native():
    return _Native()


def core_count():
    """The cores this process may run on (affinity, not the machine's total)."""
    return max(1, host_cores())


def split_range(extent, parts):
    """[0, extent) as at most `parts` contiguous, non-empty (begin, end) chunks of near-equal size
    (the chunks the native loop runs)."""
    parts = max(1, min(parts, extent))
    base, extra = divmod(extent, parts)
    chunks, begin = [], 0
    for index in range(parts):
        end = begin + base + (1 if index < extra else 0)
        chunks.append((begin, end))
        begin = end
    return chunks


class ThreadPool:
    """Helper threads kept for the whole process, so a kernel call pays no thread start-up."""

    def __init__(self, threads):
        self.threads = threads
        self._native = _native()
        self._state = (ctypes.c_int64 * 8)()
        self._address = ctypes.addressof(self._state)
        self._generation = 0
        self._spin_cycles = 0            # how long helpers watch for the next call after this one
        self._last_end = float("-inf")
        self._busy = threading.Lock()
        # The calling thread runs chunks itself, so it needs one helper fewer.
        self._wakes = [threading.Event() for _ in range(threads - 1)]
        for number, wake in enumerate(self._wakes):
            threading.Thread(target=self._help, args=(wake,), name=f"flexsched-cpu-{number}", daemon=True).start()

    def run(self, kernel, extent, buffers_address):
        """Run kernel over [0, extent), threads taking chunks until none is left; return when all
        are done."""
        parts = max(1, min(extent, self.threads * CHUNKS_PER_THREAD))
        if not self._wakes or parts == 1 or not self._busy.acquire(blocking=False):
            for begin, end in split_range(extent, parts):
                kernel(begin, end, buffers_address)
            return
        try:
            self._spin_cycles = SPIN_CYCLES if time.perf_counter() - self._last_end < SPIN_GAP_SECONDS else 0
            state = self._state
            state[COMPLETED], state[CHUNKS], state[EXTENT] = 0, parts, extent
            state[FUNCTION], state[BUFFERS] = ctypes.cast(kernel, ctypes.c_void_p).value, buffers_address
            self._generation += 1
            self._native.publish(self._address, self._generation)
            team = _openmp_parallel()
            if team is not None:
                call = (ctypes.c_int64 * 2)(self._address, self._generation)
                team(self._native.team_chunks, ctypes.addressof(call), self.threads, 0)
            else:
                for wake in self._wakes:
                    wake.set()
                self._native.run_chunks(self._address, self._generation)
            # A helper still spinning from an earlier call may hold a chunk past the team's return.
            self._native.wait_completed(self._address, parts)
        finally:
            self._last_end = time.perf_counter()
            self._busy.release()

    def _help(self, wake):
        """A helper's life: watch for a call, run its chunks, spin for the next (where calls come back
        to back); sleep when none comes."""
        seen = 0
        while True:
            generation = self._native.wait_generation(self._address, seen, self._spin_cycles)
            if generation == seen:
                wake.wait()
                wake.clear()
                continue
            seen = generation
            self._native.run_chunks(self._address, generation)


def _openmp_parallel():
    """GNU OpenMP's GOMP_parallel(function, data, threads, flags) where this process loaded libgomp
    itself, else None."""
    if not SHARE_OPENMP:
        return None
    if _openmp["parallel"] is not None or _openmp["inherited"]:
        return _openmp["parallel"]
    now = time.monotonic()
    if now - _openmp["checked"] < OPENMP_RECHECK_SECONDS:
        return None
    _openmp["checked"] = now
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libgomp" in line.rsplit("/", 1)[-1]}
    except OSError:   # not Linux
        return None
    for path in sorted(paths):
        try:   # RTLD_NOLOAD: only the copy already in the process, whose threads PyTorch uses
            library = ctypes.CDLL(path, mode=os.RTLD_NOLOAD)
        except OSError:
            continue
        parallel = getattr(library, "GOMP_parallel", None)
        if parallel is not None:
            parallel.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint)
            parallel.restype = None
            _openmp["parallel"] = parallel
            break
    return _openmp["parallel"]


def default_pool():
    """The process-wide pool, one thread per usable core, made on first use."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPool(core_count())
        return _pool


def _forget_pool_in_child():
    """A forked child has none of its parent's helper threads: it makes its own pool when it needs one."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()
    _openmp.update(parallel=None, inherited=True)


os.register_at_fork(after_in_child=_forget_pool_in_child)
