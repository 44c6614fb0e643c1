"""Reference folders: removed by their owner, and by the next owner where a killed process left one."""

import os
import signal
import subprocess
import sys
from pathlib import Path

from codegen.reference_dir import LOCK_NAME, PREFIX, ReferenceDir, remove_orphans

REPO = Path(__file__).resolve().parents[2]

OWNER = """
import sys, time
from codegen.reference_dir import ReferenceDir
folder = ReferenceDir(sys.argv[1])
open(folder.name + "/task.npz", "wb").write(b"x" * 1024)
print(folder.name, flush=True)
time.sleep(600)
"""


def start_owner(parent):
    """A process that owns a reference folder under parent until killed, and that folder."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *sys.path]))
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(parent)], stdout=subprocess.PIPE, text=True, env=env)
    return owner, Path(owner.stdout.readline().strip())


def test_a_killed_owners_folder_is_removed_by_the_next_and_a_live_ones_is_kept(tmp_path):
    killed, orphan = start_owner(tmp_path)
    living, kept = start_owner(tmp_path)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert (orphan / "task.npz").exists()   # SIGKILL runs no clean-up of its own
        mine = ReferenceDir(tmp_path)
        assert not orphan.exists()
        assert (kept / "task.npz").exists() and Path(mine.name).is_dir()
        assert remove_orphans(tmp_path) == []   # this process's own folder is held too
    finally:
        living.kill()
        living.wait()
    assert remove_orphans(tmp_path) == [kept.name]
    mine.cleanup()
    assert list(tmp_path.iterdir()) == []


def test_a_folder_without_its_lock_file_is_left_alone(tmp_path):
    being_made = tmp_path / f"{PREFIX}new"   # mkdtemp done, the lock not in place yet
    being_made.mkdir()
    assert remove_orphans(tmp_path) == [] and being_made.is_dir()


def test_cleanup_and_dropping_the_object_both_remove_the_folder(tmp_path):
    folder = ReferenceDir(tmp_path)
    path = Path(folder.name)
    assert path.name.startswith(PREFIX) and (path / LOCK_NAME).is_file()
    folder.cleanup()
    assert not path.exists()
    folder.cleanup()   # twice is harmless
    dropped = Path(ReferenceDir(tmp_path).name)
    assert not dropped.exists()
