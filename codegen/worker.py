"""An isolated worker process: functions run there under a time limit and a memory cap, so one
that hangs, exhausts memory or kills its process is reported to the caller, never passed on.

A call names a function by 'module:function' and passes picklable arguments; the worker sends
back its picklable result. A call that outlives its time limit gets the worker killed, and one
that kills the worker (a segfault in generated code, an abort in LLVM) is reported with the
signal or exit code; either way the next call starts a fresh worker. The worker runs under an
address-space limit, so a memory blow-up is a MemoryError there rather than the machine swapping.
It dies with its parent, even one killed with SIGKILL while a call hangs.

A worker is a fresh interpreter running codegen.worker_process, never a copy of the caller: a
script without a main guard, a notebook or the REPL can start one, and the caller's __main__ is
not imported there (arguments and results cross as pickles of our own types).
"""

from __future__ import annotations

import ctypes
import importlib
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler

from flexsched.errors import FlexschedError

START_TIMEOUT_S = 120.0
DEFAULT_MEMORY_LIMIT_BYTES = 16 * 2**30   # the worker's address space on the CPU (0 or None: no cap)
ORPHAN_CHECK_S = 0.5                      # how often a busy worker checks that its parent still lives
MAX_ERROR_CHARS = 400
_PR_SET_PDEATHSIG = 1
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # where `codegen` is found


class WorkerStartError(FlexschedError, RuntimeError):
    """The worker could not start: the environment, not a call, is at fault."""


class WorkerFailure(FlexschedError, RuntimeError):
    """A call that returned nothing: status 'timeout', 'crash' or 'error' (it raised), and why."""

    def __init__(self, status, reason):
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason


def one_line(text):
    """Errors travel in tables and logs: one line, bounded length."""
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS - 3] + "..."


def describe_exception(err):
    """'Type: message', naming a public type (numpy's _ArrayMemoryError reads as MemoryError)."""
    name = next(cls.__name__ for cls in type(err).__mro__ if not cls.__name__.startswith("_"))
    return one_line(f"{name}: {err}" if str(err) else name)


def default_memory_limit(kinds):
    """The address-space cap for workers of these target kinds: none where a GPU is used (the CUDA
    driver reserves far more address space than memory), DEFAULT_MEMORY_LIMIT_BYTES otherwise."""
    return 0 if "gpu" in kinds else DEFAULT_MEMORY_LIMIT_BYTES


def load_function(path):
    """The function a 'module:function' path names."""
    module_name, _, function_name = path.partition(":")
    if not module_name or not function_name:
        raise ValueError(f"function path must be 'module:function', got {path!r}")
    function = getattr(importlib.import_module(module_name), function_name, None)
    if not callable(function):
        raise ValueError(f"{path!r}: module '{module_name}' has no function '{function_name}'")
    return function


# ---------------------------------------------------------------- the parent side

@dataclass
class _Process:
    """A running worker process (a subprocess.Popen) and the parent's end of its connection."""

    process: subprocess.Popen
    conn: Connection
    next_request: int = 0

    def is_alive(self):
        return self.process.poll() is None

    def join(self, timeout):
        """Wait at most timeout seconds for the process to end (and reap it)."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass


class Worker:
    """Runs calls one at a time in a persistent, restartable worker process."""

    def __init__(self, memory_limit_bytes=None, kinds=("cpu",), name="flexsched-worker"):
        self.memory_limit_bytes = default_memory_limit(kinds) if memory_limit_bytes is None else memory_limit_bytes
        self.kinds = tuple(kinds)   # target kinds whose back ends the worker loads before it is ready
        self.name = name
        self._current = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    @property
    def pid(self):
        """The live worker's process id (None before the first call or after a failure)."""
        return self._current.process.pid if self._current else None

    def call(self, function_path, args, timeout_s):
        """function(*args) in the worker, waiting at most timeout_s; WorkerFailure if it hangs, kills
        the worker or raises (the worker is replaced after a hang or a death)."""
        arguments = ForkingPickler.dumps(tuple(args))  # unpicklable arguments are the caller's error, here
        current = self._ensure_started()
        current.next_request += 1
        request = current.next_request
        try:
            current.conn.send((request, function_path, bytes(arguments)))
            kind, payload = self._await_answer(current, request, timeout_s)
        except BaseException:
            self._discard()  # interrupted mid-call: its late answer must not be read
            raise
        if kind == "error":
            raise WorkerFailure("error", payload)
        return payload

    def _await_answer(self, current, request, timeout_s):
        """('value', result) or ('error', text) from the worker; WorkerFailure on a timeout or death."""
        state = self._wait(current, timeout_s)
        if state == "timeout":
            self._discard()
            raise WorkerFailure("timeout", f"worker killed after {timeout_s:.1f} s")
        try:
            answer, outcome, retiring = current.conn.recv() if state == "readable" else (None, None, False)
        except (EOFError, OSError):
            answer = None
        if answer is None:
            reason = self._death_reason(current)
            self._discard()
            raise WorkerFailure("crash", reason)
        if answer != request:
            self._discard()
            raise RuntimeError(f"worker answered request {answer}, expected {request}")
        if retiring:  # it exits after this answer: the next call must not reach it
            self._discard()
        return outcome

    @staticmethod
    def _wait(current, timeout_s):
        """'readable' (an answer, or EOF from a dead worker), 'dead' (died, pipe still open) or
        'timeout' after timeout_s."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if current.conn.poll(max(0.0, min(remaining, 1.0))):
                return "readable"
            if not current.is_alive():
                return "readable" if current.conn.poll(0) else "dead"
            if remaining <= 0:
                return "timeout"

    def _ensure_started(self):
        if self._current is None or not self._current.is_alive():
            self._discard()
            self._current = self._start()
        return self._current

    def _start(self):
        """Start a worker and wait until it has imported the code generator and limited its memory."""
        parent_end, child_end = socket.socketpair()
        try:
            process = subprocess.Popen([sys.executable, "-P", "-m", "codegen.worker_process", str(child_end.fileno())],
                                       pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL, env=_worker_env())
        except OSError as err:
            parent_end.close()
            raise WorkerStartError(f"{self.name} worker could not be started: {err}") from None
        finally:
            child_end.close()
        current = _Process(process, Connection(parent_end.detach()))
        # Linux sends the parent-death signal when the *thread* that started the child ends: only a
        # worker started by the main thread may ask for it, or a short-lived thread would kill it.
        from_main_thread = threading.current_thread() is threading.main_thread()
        try:
            current.conn.send((list(sys.path), self.memory_limit_bytes, self.kinds, os.getpid(), from_main_thread))
        except OSError:
            pass   # it died already: the recv below says how
        if not current.conn.poll(START_TIMEOUT_S):
            self._stop(current)
            raise WorkerStartError(f"{self.name} worker did not start within {START_TIMEOUT_S:.0f} s")
        try:
            current.conn.recv()
        except (EOFError, OSError):
            reason = self._death_reason(current)
            self._stop(current)
            raise WorkerStartError(f"{self.name} worker failed to start: {reason}") from None
        return current

    @staticmethod
    def _death_reason(current):
        """'worker died with signal SIGSEGV' or 'worker exited with code 3'."""
        current.join(timeout=5.0)
        code = current.process.returncode
        if code is None:
            return "worker closed its pipe but is still running"
        if code < 0:
            try:
                return f"worker died with signal {signal.Signals(-code).name}"
            except ValueError:
                return f"worker died with signal {-code}"
        return f"worker exited with code {code}"

    def _discard(self):
        """Kill the current worker (if any); the next call starts a fresh one."""
        current, self._current = self._current, None
        if current is not None:
            self._stop(current, graceful=False)

    @staticmethod
    def _stop(current, graceful=False):
        if graceful and current.is_alive():
            try:
                current.conn.send(None)
                current.join(timeout=2.0)
            except (OSError, ValueError):
                pass
        if current.is_alive():
            current.process.kill()
        current.join(timeout=5.0)
        current.conn.close()

    def close(self):
        """Stop the worker; a later call starts a new one."""
        current, self._current = self._current, None
        if current is not None:
            self._stop(current, graceful=True)


def side_by_side(workers, items, work):
    """[work(worker, item) for each item], in the items' order, all workers working at once, each
    taking the next item as it finishes one (items take unequal times: builds of a YOLO search's
    batch 0.1-0.5 s each, so a fixed share idles one worker while the other works). Threads only
    wait on the workers' pipes, so the GIL serialises nothing."""
    from concurrent.futures import ThreadPoolExecutor

    done, upcoming, lock = [None] * len(items), iter(range(len(items))), threading.Lock()

    def serve(worker):
        while True:
            with lock:
                index = next(upcoming, None)
            if index is None:
                return
            done[index] = work(worker, items[index])

    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        for finished in [pool.submit(serve, worker) for worker in workers]:
            finished.result()   # a work() that raised raises here
    return done


def batch_size_for(workers):
    """A batch for `workers` working side by side: two each, so a worker's second item starts while
    the others finish their first; 1 for a single worker (it gains nothing from batches)."""
    return 2 * workers if workers > 1 else 1


def _worker_env():
    """The caller's environment, with our package importable by the fresh interpreter before it
    takes the caller's sys.path (-P keeps the working directory from shadowing it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
    return env


# ---------------------------------------------------------------- the worker

def serve(conn):
    """The worker process's life (codegen.worker_process): its settings arrive first, then calls."""
    try:
        settings = conn.recv()
    except (EOFError, OSError):  # the parent died before sending them
        return
    worker_main(conn, *settings)


def worker_main(conn, parent_sys_path, memory_limit_bytes, kinds, parent_pid, death_signal):
    """Worker loop: (request, function path, args) in, (request, ('value' | 'error', payload)) out;
    None stops it.

    A back end left unhealthy by a call (a kernel that faulted the GPU spoils its context) ends
    the loop; its answer says so, so the parent starts a fresh worker for the next call rather
    than sending it to one that is exiting."""
    _die_with_parent(parent_pid, death_signal)
    sys.path[:] = parent_sys_path
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _preload_code_generator(kinds)
    limit_address_space(memory_limit_bytes)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent closed its end or died
            return
        if message is None:
            return
        request, function_path, arguments = message
        outcome = _call_safely(function_path, arguments)
        retiring = not _backends_healthy()
        _answer(conn, request, outcome, retiring)
        if retiring:
            return


def _call_safely(function_path, arguments):
    """('value', result), or ('error', 'Type: message') for anything it raises (MemoryError included),
    unpickling its arguments too (one naming a module this process cannot import fails only this call)."""
    try:
        return "value", load_function(function_path)(*ForkingPickler.loads(arguments))
    except Exception as err:  # noqa: BLE001 - the caller decides what a failure means
        return "error", describe_exception(err)


def _answer(conn, request, outcome, retiring):
    """Send the outcome (and whether this worker exits next); one that cannot be pickled is sent
    as an error instead."""
    try:
        data = ForkingPickler.dumps((request, outcome, retiring))
    except Exception as err:  # noqa: BLE001
        data = ForkingPickler.dumps((request, ("error", f"unsendable result: {describe_exception(err)}"), retiring))
    conn.send_bytes(data)  # what conn.send() would write: the parent's recv() unpickles it


def _die_with_parent(parent_pid, death_signal):
    """Exit when the parent does, even mid-call: the kernel's parent-death signal where allowed,
    and a thread that watches for this process being re-parented (covering a parent that died
    before the signal was asked for, and workers started off the main thread)."""
    if death_signal and sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:
        os._exit(1)

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(ORPHAN_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="flexsched-orphan-watch", daemon=True).start()


def _preload_code_generator(kinds):
    """Import before the memory limit and outside every call's time limit."""
    from codegen.backend import backend_for

    for module in ("codegen.kernel", "flexsched.registry"):
        importlib.import_module(module)

    for kind in kinds:
        try:
            backend_for(kind).preload()
        except Exception:  # noqa: BLE001 - a broken back end shows up as each call's error
            pass


def _backends_healthy():
    """Whether every back end this worker has loaded can take another call."""
    from codegen.backend import loaded_backends

    return all(backend.healthy() for backend in loaded_backends())


def limit_address_space(limit_bytes):
    """Cap virtual memory so a blow-up raises MemoryError here (None or 0: no cap)."""
    if not limit_bytes:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = limit_bytes if hard == resource.RLIM_INFINITY else min(limit_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
