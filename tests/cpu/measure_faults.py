"""Runners that misbehave on purpose, for testing the measurement harness.

Each wraps codegen.measure.run_candidate (or write_reference, or build_candidate) and misbehaves only for a
marked candidate, a GMM task with M == 13, so a sweep can mix good and bad candidates. The
worker imports this module by name ("measure_faults:crash_runner"), which works because the
worker gets the parent's sys.path and pytest puts this directory on it.
"""

import os
import signal
import time

import numpy as np

from codegen import measure
from codegen.kernel import Kernel
from codegen.measure import build_candidate, run_candidate, write_reference

MARKED_M = 13


def is_marked(measure_input):
    """The candidates a fault runner misbehaves on: GMM with M == 13."""
    ref = measure_input.task_ref
    return ref["name"] == "GMM" and ref["args"][0] == MARKED_M


def crash_runner(measure_input, settings):
    """Segfault the worker, as broken generated code would."""
    if is_marked(measure_input):
        os.kill(os.getpid(), signal.SIGSEGV)
    return run_candidate(measure_input, settings)


def exit_runner(measure_input, settings):
    """Exit the worker with status 3, as a library calling exit() would."""
    if is_marked(measure_input):
        os._exit(3)
    return run_candidate(measure_input, settings)


def lazy_runner(measure_input, settings):
    """Write no output on a marked candidate with a schedule, as a kernel that skips its stores would
    (the marked task's naive candidate runs as it should)."""
    if not is_marked(measure_input) or measure_input.schedule_json == "[]":
        return run_candidate(measure_input, settings)
    original_call = Kernel.__call__
    Kernel.__call__ = lambda kernel, *arrays: None
    try:
        return run_candidate(measure_input, settings)
    finally:
        Kernel.__call__ = original_call


def hang_runner(measure_input, settings):
    """Never answer, as a kernel stuck in a loop would."""
    while is_marked(measure_input):
        time.sleep(3600)
    return run_candidate(measure_input, settings)


def wrong_runner(measure_input, settings):
    """Add 1.0 to every output the kernel writes, as a miscompiled kernel would."""
    if not is_marked(measure_input):
        return run_candidate(measure_input, settings)
    original_call = Kernel.__call__

    def perturbed_call(kernel, *arrays):
        original_call(kernel, *arrays)
        for output in arrays[len(kernel.lowered.inputs):]:
            output += 1.0

    Kernel.__call__ = perturbed_call
    try:
        return run_candidate(measure_input, settings)
    finally:
        Kernel.__call__ = original_call


def slowed_runner(measure_input, settings):
    """Make a candidate with a schedule 20 ms slower a run (the yardstick's runs unchanged), as a
    far slower kernel would be, and append a line to the file $RUN_LOG for each of its runs."""
    if measure_input.schedule_json == "[]":
        return run_candidate(measure_input, settings)
    original_call = Kernel.__call__
    yardsticks = {id(yardstick.kernel) for yardstick in measure._yardsticks.values()}

    def slowed_call(kernel, *arrays):
        original_call(kernel, *arrays)
        if id(kernel) not in yardsticks:
            time.sleep(0.02)
            with open(os.environ["RUN_LOG"], "a") as log:
                log.write("run\n")

    Kernel.__call__ = slowed_call
    try:
        return run_candidate(measure_input, settings)
    finally:
        Kernel.__call__ = original_call


def memory_runner(measure_input, settings):
    """Touch 64 GiB, as a schedule with a runaway buffer would; the worker's limit must stop it."""
    if is_marked(measure_input):
        np.ones(64 * 2**30, dtype=np.uint8)
    return run_candidate(measure_input, settings)


def slow_reference(measure_input, seed, path):
    """Take 3 s longer over the marked task's reference, as a large task's numpy reference would."""
    if is_marked(measure_input):
        time.sleep(3)
    write_reference(measure_input, seed, path)


def counted_reference(measure_input, seed, path):
    """Write the reference and append a line naming its task to the file $REFERENCE_LOG."""
    write_reference(measure_input, seed, path)
    ref = measure_input.task_ref
    with open(os.environ["REFERENCE_LOG"], "a") as log:
        log.write(f"{ref['name']}{ref['args']}\n")


def logged_settings_runner(measure_input, settings):
    """run_candidate, after appending the slow_run_seconds it was sent to the file $SETTINGS_LOG."""
    with open(os.environ["SETTINGS_LOG"], "a") as log:
        log.write(f"{settings.slow_run_seconds!r}\n")
    return run_candidate(measure_input, settings)


def spoil_back_ends():
    """Leave this worker's back ends 'unhealthy' (as a kernel that faults the GPU does): the worker
    must exit after answering, and say so, so the parent never sends it another call."""
    import codegen.worker

    codegen.worker._backends_healthy = lambda: False
    return os.getpid()


def crash_builder(measure_input):
    """Segfault a builder, as an LLVM abort on a marked candidate's module would."""
    if is_marked(measure_input):
        os.kill(os.getpid(), signal.SIGSEGV)
    return build_candidate(measure_input)


def hang_builder(measure_input):
    """Never finish building a marked candidate."""
    while is_marked(measure_input):
        time.sleep(3600)
    return build_candidate(measure_input)
