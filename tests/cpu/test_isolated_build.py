"""Builds in the isolated worker: a usable kernel with the machine code an in-process build makes,
and a build that hangs, crashes or exhausts memory reported as one BuildError line."""

import os
import re

import numpy as np
import pytest

from codegen import cpu_backend
from codegen.isolated_build import BuildError, build_isolated, build_many_isolated
from codegen.kernel import build
from flexsched.registry import get_task
from flexsched.schedule import Parallel, Reorder, Schedule, Split
from flexsched.target import get_target

from cases import child_processes

pytestmark = pytest.mark.cpu

TASK = get_task("GMM", 32, 16, 24)
SCHEDULE = Schedule((Split("O", "i", (4, 8)), Split("O", "j", (3, 8)),
                     Reorder("O", ("i.0", "j.0", "i.1", "rk", "j.1")), Parallel("O", "i.0")))
LIMITS = dict(memory_limit_bytes=4 * 2**30)
LLVM = get_target("llvm").name   # "llvm", or the CPU that $FLEXSCHED_LLVM_TARGET names


@pytest.fixture(autouse=True)
def fault_compilers_importable(monkeypatch):
    """Build workers import build_faults by name from the parent's sys.path, whatever pytest's import mode."""
    monkeypatch.syspath_prepend(os.path.dirname(os.path.abspath(__file__)))


def test_an_isolated_build_runs_the_machine_code_of_an_in_process_build(monkeypatch):
    monkeypatch.setenv("FLEXSCHED_KERNEL_CACHE", "off")   # two compilations, not one read back
    before = set(child_processes())
    isolated = build_isolated(TASK, SCHEDULE, **LIMITS)
    cpu_backend.clear_cache()
    in_process = build(TASK, SCHEDULE)
    assert isolated.compiled.code.object_code == in_process.compiled.code.object_code
    assert isolated.llvm_ir == in_process.llvm_ir and isolated.loop_ir == in_process.loop_ir
    inputs = TASK.random_inputs(seed=2)
    (out,) = isolated.run(*inputs)
    (ref,) = TASK.evaluate(*inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert isolated.schedule == SCHEDULE and isolated.task is TASK
    assert set(child_processes()) <= before  # the build worker is stopped


def test_nothing_is_compiled_in_the_calling_process(monkeypatch):
    def refuse(*args):
        raise AssertionError("LLVM ran in the calling process")

    monkeypatch.setattr(cpu_backend, "generate_machine_code", refuse)
    kernel = build_isolated(TASK, SCHEDULE.to_json(), **LIMITS)
    assert kernel.run(*TASK.random_inputs())[0].shape == (32, 24)


def test_a_build_that_hangs_times_out_as_one_line():
    before = set(child_processes())
    with pytest.raises(BuildError) as caught:
        build_isolated(TASK, timeout_s=2, compiler="build_faults:hang_compiler", **LIMITS)
    assert str(caught.value) == f"build of GMM(32, 16, 24) for {LLVM} timed out after 2 s"
    assert set(child_processes()) <= before


def test_a_build_that_crashes_names_the_signal():
    expected = rf"^build of GMM\(32, 16, 24\) for {re.escape(LLVM)} crashed the build worker: worker died with signal " \
        "SIGSEGV"
    with pytest.raises(BuildError, match=expected):
        build_isolated(TASK, compiler="build_faults:crash_compiler", **LIMITS)


def test_a_build_that_exhausts_memory_names_the_cap():
    with pytest.raises(BuildError) as caught:
        build_isolated(TASK, compiler="build_faults:greedy_compiler", **LIMITS)
    message = str(caught.value)
    assert message.startswith(f"build of GMM(32, 16, 24) for {LLVM} failed: MemoryError")
    assert message.endswith("(the build worker's memory is capped at 4 GiB)") and "\n" not in message


def test_an_illegal_schedule_is_a_build_error_naming_the_step():
    bad = Schedule((Split("O", "i", (3, 4)),))
    with pytest.raises(BuildError, match=r"failed: ScheduleError: .*step 1"):
        build_isolated(TASK, bad, **LIMITS)


def test_many_builds_side_by_side_give_each_schedule_its_kernel_or_its_error():
    before = set(child_processes())
    bad = Schedule((Split("O", "i", (3, 4)),))
    kernels = build_many_isolated(TASK, [SCHEDULE, bad, None, SCHEDULE.to_json()], workers=2, **LIMITS)
    assert isinstance(kernels[1], BuildError) and "step 1" in str(kernels[1])
    inputs = TASK.random_inputs(seed=2)
    (ref,) = TASK.evaluate(*inputs)
    for kernel, schedule in zip([kernels[0], kernels[2], kernels[3]], [SCHEDULE, Schedule(), SCHEDULE]):
        assert kernel.schedule == schedule
        np.testing.assert_allclose(kernel.run(*inputs)[0], ref, rtol=1e-4, atol=1e-4)
    assert set(child_processes()) <= before   # the build workers are stopped


def test_a_worker_a_build_crashed_is_replaced_for_the_next_build():
    kernels = build_many_isolated(TASK, [SCHEDULE, SCHEDULE], workers=1, compiler="build_faults:crash_compiler",
                                  **LIMITS)
    assert all(isinstance(kernel, BuildError) and "SIGSEGV" in str(kernel) for kernel in kernels)
