"""Compilers that misbehave on purpose, for testing isolated builds.

Each stands in for codegen.isolated_build.compile_in_worker (build_isolated's `compiler`) and
hangs, crashes or exhausts memory in the build worker, as a compiler would on a pathological
kernel. The worker imports this module by name ("build_faults:hang_compiler"), found on the
parent's sys.path, which the tests give this directory.
"""

import os
import signal
import time

import numpy as np


def hang_compiler(task, schedule_json, target_dict, name):
    """Never finish."""
    while True:
        time.sleep(3600)


def crash_compiler(task, schedule_json, target_dict, name):
    """Segfault the build worker."""
    os.kill(os.getpid(), signal.SIGSEGV)


def greedy_compiler(task, schedule_json, target_dict, name):
    """Touch 64 GiB; the worker's memory cap must stop it."""
    np.ones(64 * 2**30, dtype=np.uint8)
