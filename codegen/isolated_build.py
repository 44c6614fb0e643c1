"""Builds in an isolated worker: the expensive, fallible part of a build (lowering, the back end's
passes, LLVM's optimisation and code generation; nvcc and ptxas for CUDA) runs in a codegen.worker
process under a time limit and a memory cap, and this process only loads the result.

On the CPU the worker sends back object code, which this process links into its own MCJIT engine
(the same machine code an in-process build would run); a CUDA build sends back the PTX and cubin
nvcc made there (nvcc and ptxas have their own time limit, codegen.nvcc.COMPILE_TIMEOUT_S; without
nvcc the source is compiled by NVRTC where the kernel is first launched). A build that hangs,
crashes the compiler or exhausts memory is a BuildError, never a hung or dead caller.
"""

from __future__ import annotations

from flexsched.errors import FlexschedError
from flexsched.schedule import Schedule
from flexsched.target import Target, get_target, host_cores

from .backend import backend_for
from .kernel import Kernel, lower_for
from .worker import Worker, WorkerFailure, side_by_side

DEFAULT_BUILD_TIMEOUT_S = 300.0
DEFAULT_COMPILER = "codegen.isolated_build:compile_in_worker"


class BuildError(FlexschedError, RuntimeError):
    """A build in the isolated worker failed, ran out of time or crashed (one line naming the task)."""


def build_isolated(task, schedule=None, target="llvm", name=None, timeout_s=DEFAULT_BUILD_TIMEOUT_S,
                   memory_limit_bytes=None, compiler=DEFAULT_COMPILER):
    """codegen.kernel.build's Kernel, compiled in a fresh worker that is stopped afterwards
    (memory_limit_bytes None: codegen.worker's default cap, 16 GiB, for CPU and GPU builds alike).
    The worker gets the Task itself, so it builds a computation no registry there knows; compiler
    is the worker's 'module:function' (compile_in_worker; tests pass ones that misbehave)."""
    (kernel,) = _build_in_workers(task, [schedule], target, 1, name, timeout_s, memory_limit_bytes, compiler)
    if isinstance(kernel, BuildError):
        raise kernel
    return kernel


def build_many_isolated(task, schedules, target="llvm", workers=None, timeout_s=DEFAULT_BUILD_TIMEOUT_S,
                        memory_limit_bytes=None, compiler=DEFAULT_COMPILER):
    """Per schedule, build_isolated's Kernel or the BuildError that stopped it, built side by side by
    `workers` isolated workers (default: one per core), each reused from build to build: a fresh
    worker costs a start of Python and its imports, about 0.4 s, most of a build whose machine
    code the kernel cache already holds."""
    count = max(1, min(len(schedules), workers or host_cores()))
    return _build_in_workers(task, schedules, target, count, None, timeout_s, memory_limit_bytes, compiler)


def _build_in_workers(task, schedules, target, workers, name, timeout_s, memory_limit_bytes, compiler):
    """Per schedule (None: the empty one), a Kernel or a BuildError, from `workers` fresh workers."""
    target = get_target(target)
    schedules = [Schedule.from_json(s) if isinstance(s, str) else s or Schedule() for s in schedules]
    backend = backend_for(target)
    # A GPU build runs nvcc and needs no CUDA context, so its worker creates none and keeps the
    # memory cap (which nvcc inherits); the cap only has to go where the CUDA driver is loaded.
    kinds = (target.kind,) if target.kind == "cpu" else ()
    pool = [Worker(memory_limit_bytes, kinds=kinds, name="flexsched-build") for _ in range(workers)]

    def compile_one(worker, schedule):
        try:
            return worker.call(compiler, (task, schedule.to_json(), target.to_dict(), name), timeout_s)
        except WorkerFailure as failure:
            return BuildError(_failure_text(task, target, failure, timeout_s, worker.memory_limit_bytes))

    try:
        compiled = side_by_side(pool, schedules, compile_one)
    finally:
        for worker in pool:
            worker.close()
    # The workers only compiled: the machine code is linked here, where the kernels will run.
    return [answer if isinstance(answer, BuildError) else
            Kernel(task, schedule, answer[0], backend.load_artifact(answer[1], target), target, backend)
            for schedule, answer in zip(schedules, compiled)]


def compile_in_worker(task, schedule_json, target_dict, name):
    """(Lowered, the back end's artifact) of a task under a schedule: the worker's half of a build."""
    target = Target.from_dict(target_dict)
    _, lowered = lower_for(task, schedule_json, target, name)
    return lowered, backend_for(target).compile_artifact(lowered.func, target)


def _failure_text(task, target, failure, timeout_s, memory_limit_bytes):
    """One line: which build failed and how."""
    what = f"build of {task} for {target.name}"
    if failure.status == "timeout":
        return f"{what} timed out after {timeout_s:g} s"
    cap = f" (the build worker's memory is capped at {memory_limit_bytes / 2**30:g} GiB)" if memory_limit_bytes else ""
    if failure.status == "crash":
        return f"{what} crashed the build worker: {failure.reason}{cap}"
    memory = cap if failure.reason.startswith("MemoryError") else ""
    return f"{what} failed: {failure.reason}{memory}"
