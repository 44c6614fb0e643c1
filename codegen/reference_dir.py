"""The folder where a Measurer files its tasks' inputs and reference outputs: removed when the
Measurer closes or its process exits, and, where the process was killed first (SIGKILL, the
out-of-memory killer, a cluster stopping its workers), by the next Measurer on the machine.

A killed run's folder is as large as its tasks' arrays (YOLO C10's inputs, weights and float64
reference outputs: 27 MB), and a killed sweep leaves one per worker. Each folder holds a lock file
that its owner keeps locked (flock) while it lives; the kernel drops the lock when the process
dies, however it dies, so a folder whose lock can be taken has no owner. A pid would not do: a
dead run's pid may be reused, and a live run in another pid namespace sharing /tmp looks dead.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import weakref

PREFIX = "flexsched-references-"
LOCK_NAME = ".owner"


class ReferenceDir:
    """A fresh folder under `parent` (the system's temporary folder by default), locked as this
    process's while it lives; making one first removes the folders whose owners are gone."""

    def __init__(self, parent=None):
        parent = parent or tempfile.gettempdir()
        remove_orphans(parent)
        self.name = tempfile.mkdtemp(prefix=PREFIX, dir=parent)
        lock = _locked_file(self.name)
        self._finalizer = weakref.finalize(self, _remove, self.name, lock)

    def cleanup(self):
        """Remove the folder and its files now (also done when this object or the process goes)."""
        self._finalizer()


def remove_orphans(parent):
    """Remove the reference folders under parent whose owner process is gone; the names of those removed."""
    removed = []
    try:
        entries = [entry for entry in os.scandir(parent) if entry.name.startswith(PREFIX) and entry.is_dir()]
    except OSError:
        return removed
    for entry in entries:
        try:
            lock = os.open(os.path.join(entry.path, LOCK_NAME), os.O_RDWR)
        except OSError:   # still being made, made before folders were locked, or another user's
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:   # its owner lives
            os.close(lock)
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        os.close(lock)
        removed.append(entry.name)
    return removed


def _locked_file(folder):
    """An open descriptor of folder's lock file, locked before the file appears under its name, so a
    sweep never finds a new folder's lock free."""
    fresh = os.path.join(folder, f"{LOCK_NAME}.new")
    lock = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.rename(fresh, os.path.join(folder, LOCK_NAME))
    return lock


def _remove(folder, lock):
    shutil.rmtree(folder, ignore_errors=True)
    os.close(lock)
