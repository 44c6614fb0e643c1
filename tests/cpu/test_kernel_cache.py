"""The compiled-kernel cache on disk: a hit skips LLVM and runs the same machine code, a damaged
entry is rebuilt, an empty or `off` setting writes nothing, and the folder is trimmed."""

import os

import numpy as np
import pytest

from codegen import cpu_backend, kernel_cache
from codegen.isolated_build import build_isolated
from codegen.kernel import build
from codegen.measure import MeasureInput, Measurer
from flexsched.registry import get_task
from flexsched.schedule import Parallel, Reorder, Schedule, Split

pytestmark = pytest.mark.cpu

TASK = get_task("GMM", 32, 16, 24)
SCHEDULE = Schedule((Split("O", "i", (4, 8)), Reorder("O", ("i.0", "j", "rk", "i.1")), Parallel("O", "i.0")))


@pytest.fixture
def cache_folder(tmp_path, monkeypatch):
    """A kernel cache of this test's own, and no kernel left in this process's memory."""
    folder = tmp_path / "kernels"
    monkeypatch.setenv(kernel_cache.ENVIRONMENT_VARIABLE, str(folder))
    cpu_backend.clear_cache()
    yield folder
    cpu_backend.clear_cache()


def entries(folder):
    return sorted(path for path in folder.rglob("*.kernel")) if folder.exists() else []


def built_afresh():
    """A build of TASK under SCHEDULE with nothing in this process's memory."""
    cpu_backend.clear_cache()
    return build(TASK, SCHEDULE)


def check_runs(kernel):
    inputs = TASK.random_inputs(seed=3)
    np.testing.assert_allclose(kernel.run(*inputs)[0], TASK.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)


def refuse(*args):
    raise AssertionError("LLVM ran for a kernel the cache holds")


def test_a_kernel_built_once_is_loaded_from_disk_without_llvm(cache_folder, monkeypatch):
    first = built_afresh()
    assert first.compile_report.cached == "" and len(entries(cache_folder)) == 1
    monkeypatch.setattr(cpu_backend, "generate_machine_code", refuse)
    again = built_afresh()
    assert again.compile_report.cached == "disk" and again.compile_report.optimize_seconds == 0.0
    assert again.compiled.code.object_code == first.compiled.code.object_code
    assert again.llvm_ir == first.llvm_ir and again.compiled.segments == first.compiled.segments
    check_runs(again)
    assert build(TASK, SCHEDULE).compile_report.cached == "memory"


def test_an_isolated_build_shares_the_cache(cache_folder):
    built_afresh()
    (path,) = entries(cache_folder)
    os.utime(path, (1000, 1000))
    before = path.stat()
    kernel = build_isolated(TASK, SCHEDULE, memory_limit_bytes=4 * 2**30)
    check_runs(kernel)
    after = path.stat()
    assert after.st_ino == before.st_ino and after.st_mtime > 1000   # read (and marked used), not written again


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage"])
def test_a_damaged_entry_is_ignored_and_rebuilt(cache_folder, damage):
    first = built_afresh()
    (path,) = entries(cache_folder)
    data = path.read_bytes()
    damaged = {"truncate": data[:len(data) // 2], "flip": data[:-10] + bytes([data[-10] ^ 1]) + data[-9:],
               "empty": b"", "garbage": os.urandom(len(data))}[damage]
    path.write_bytes(damaged)
    rebuilt = built_afresh()
    assert rebuilt.compile_report.cached == "" and rebuilt.compiled.code.object_code == first.compiled.code.object_code
    check_runs(rebuilt)
    assert path.read_bytes() == data   # written afresh
    assert built_afresh().compile_report.cached == "disk"


@pytest.mark.parametrize("setting", ["", "off", "OFF"])
def test_an_empty_or_off_setting_turns_the_cache_off(tmp_path, monkeypatch, setting):
    monkeypatch.setenv(kernel_cache.ENVIRONMENT_VARIABLE, setting)
    monkeypatch.chdir(tmp_path)
    assert kernel_cache.directory() is None
    assert built_afresh().compile_report.cached == ""
    assert built_afresh().compile_report.cached == ""
    assert list(tmp_path.iterdir()) == []
    cpu_backend.clear_cache()


def test_the_default_folder_is_in_the_users_cache_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(kernel_cache.ENVIRONMENT_VARIABLE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert kernel_cache.directory() == os.path.join(tmp_path, "flexsched", "kernels")


def test_a_folder_that_cannot_be_written_means_no_cache(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(kernel_cache.ENVIRONMENT_VARIABLE, str(blocked))
    assert kernel_cache.store(kernel_cache.key("x"), (b"a",)) is False
    assert kernel_cache.load(kernel_cache.key("x")) is None
    check_runs(built_afresh())
    cpu_backend.clear_cache()


def test_entries_round_trip_and_trimming_drops_the_least_recently_used(cache_folder):
    keys = [kernel_cache.key("entry", str(index)) for index in range(8)]
    for index, key in enumerate(keys):
        assert kernel_cache.store(key, (bytes([index]) * 1000, b"", b"tail"))
        os.utime(kernel_cache.path_of(key), (1000 + index, 1000 + index))
    assert kernel_cache.load(keys[0]) == (b"\x00" * 1000, b"", b"tail")   # used: now the most recent
    size = os.path.getsize(kernel_cache.path_of(keys[0]))
    left = kernel_cache.prune(max_bytes=6 * size)
    assert left <= 6 * size * 3 // 4
    kept = [key for key in keys if os.path.exists(kernel_cache.path_of(key))]
    assert kept == [keys[0], *keys[5:]]   # four entries fit in 3/4 of six
    assert kernel_cache.prune(max_bytes=100 * size) == len(kept) * size   # under the limit: nothing goes


def test_a_second_measurer_finds_the_first_ones_kernels(cache_folder):
    candidate = MeasureInput(TASK, SCHEDULE.to_json())
    settings = dict(timeout_s=60, repeats=1, min_run_seconds=0.001, memory_limit_bytes=4 * 2**30)
    with Measurer(**settings) as first:
        (built,) = first.measure([candidate])
    with Measurer(**settings) as second:   # a fresh worker: nothing in its memory
        (loaded,) = second.measure([candidate])
    assert built.ok and loaded.ok
    assert built.kernel_cache == "" and loaded.kernel_cache == "disk" and loaded.optimize_seconds == 0.0
