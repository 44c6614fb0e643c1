"""Ray workers that die on purpose, for testing that a sweep or a search loses only what they held.

The Ray workers of tests/cpu/test_ray.py import this module by name (its cluster puts this folder on
their PYTHONPATH) and find the folder where the faults keep their marks in $FLEXSCHED_FAULTS. A mark
is made with os.link, which fails if it exists, so two workers racing for it never both win.
"""

import os
import signal
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from codegen.measure import run_candidate
from flexsched.sweep_ray import search_job


def marks():
    return Path(os.environ["FLEXSCHED_FAULTS"])


def take_mark(name, text=""):
    """Make the mark `name` holding text; False if it exists already."""
    marks().mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=marks(), delete=False) as draft:
        draft.write(text)
    try:
        os.link(draft.name, marks() / name)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(draft.name)


def die_once_job(request):
    """The first sweep job to start searches two of its points, then its Ray worker exits; every other
    job, and that one's second attempt, is an ordinary search_job."""
    if take_mark("job-died"):
        search_job(replace(request, trials=2))
        os._exit(1)
    return search_job(request)


def kill_worker_runner(measure_input, settings):
    """A measurement runner that kills the Ray worker measuring through it (its parent): the first
    candidate to come through every time ("always"), the second one only the first time ("once")."""
    key = measure_input.schedule_json
    for name in ("always", "once"):
        if take_mark(name, key):
            kill_parent(name)
        if (marks() / name).read_text() == key:
            if name == "always":
                kill_parent(name)
            return run_candidate(measure_input, settings)
    return run_candidate(measure_input, settings)


def kill_parent(name):
    with open(marks() / "kills", "a") as kills:
        kills.write(name + "\n")
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(60)   # the parent's death ends this worker too (codegen.worker)
