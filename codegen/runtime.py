"""The host side of parallel CPU kernels: a persistent thread pool that runs loop chunks.

A compiled parallel segment is a native function `seg(begin, end, buffers)`; ctypes drops
the GIL for the length of each call, so chunks on different threads really run at once.
Threads take chunks from a shared counter, several per thread: on these machines one core
can run at half speed for seconds, and a static split would wait for it.

Several Python threads may call kernels at once: each call has its own chunks and counter, and
the calling thread works through them itself, so a call finishes even while every pool thread
is busy with another's; helpers still queued when its chunks are done are cancelled, not awaited.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

from flexsched.target import host_cores

CHUNKS_PER_THREAD = 4

_pool = None
_pool_lock = threading.Lock()


def core_count():
    """The cores this process may run on (affinity, not the machine's total)."""
    return max(1, host_cores())


def split_range(extent, parts):
    """[0, extent) as at most `parts` contiguous, non-empty (begin, end) chunks of near-equal size."""
    parts = max(1, min(parts, extent))
    base, extra = divmod(extent, parts)
    chunks, begin = [], 0
    for index in range(parts):
        end = begin + base + (1 if index < extra else 0)
        chunks.append((begin, end))
        begin = end
    return chunks


class ThreadPool:
    """Worker threads kept for the whole process, so a kernel call pays no thread start-up."""

    def __init__(self, threads):
        self.threads = threads
        # The calling thread runs one chunk itself, so it needs one worker fewer.
        self._executor = ThreadPoolExecutor(max_workers=max(1, threads - 1),
                                            thread_name_prefix="flexsched-cpu")

    def run(self, kernel, extent, buffers_address):
        """Run kernel over [0, extent), threads taking chunks until none is left; return when all
        are done."""
        chunks = split_range(extent, self.threads * CHUNKS_PER_THREAD)
        taken = itertools.count()  # next() on a count is atomic under the GIL

        def work():
            for index in iter(lambda: next(taken), None):
                if index >= len(chunks):
                    return
                begin, end = chunks[index]
                kernel(begin, end, buffers_address)

        helpers = min(self.threads, len(chunks)) - 1
        futures = [self._executor.submit(work) for _ in range(helpers)]
        work()
        for future in futures:
            if not future.cancel():  # started: it may hold a chunk, wait for it
                future.result()


def default_pool():
    """The process-wide pool, one thread per usable core, made on first use."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPool(core_count())
        return _pool
