"""End to end with the tuning database: a tuned GMM's best record is stored, flexsched.build replays
it without searching or measuring, a record of another CPU is not applied, and the command line
stores tune results and exports the stored best as a shared library."""

import ctypes
import io
import json
import logging

import numpy as np
import pytest

import flexsched
from codegen import measure
from explore import search
from flexsched.cli import main
from flexsched.database import Database
from flexsched.registry import get_task

pytestmark = pytest.mark.cpu

FAST = dict(warmup=0, repeats=1, min_run_seconds=0.001, memory_limit_bytes=4 * 2**30)
TASK = get_task("GMM", 32, 32, 32)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """(database path, TuneResult) of a 4-trial tuning of GMM 32^3 into a fresh database."""
    path = tmp_path_factory.mktemp("db") / "tuning.jsonl"
    result = flexsched.optimize(TASK, trials=4, method="random", database=str(path), evaluator_options=FAST,
                                build_kernel=False)
    return path, result


@pytest.fixture
def no_search(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("searched or measured")

    monkeypatch.setattr(measure.Measurer, "measure", refuse)
    monkeypatch.setattr(search.Search, "run", refuse)


def check(kernel):
    inputs = TASK.random_inputs(seed=2)
    np.testing.assert_allclose(kernel.run(*inputs)[0], TASK.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)


def test_optimize_stores_its_best_record(tuned):
    path, result = tuned
    (workload,) = Database(path).workloads()
    best = workload.best
    assert best.seconds == result.seconds and best.data["trials"] == 4 and best.judged_by == "measured"
    assert best.data["schedule"] == json.loads(result.schedule.to_json())


def test_build_replays_the_stored_best_without_searching(tuned, no_search, caplog):
    path, result = tuned
    with caplog.at_level(logging.INFO, logger="flexsched"):
        kernel = flexsched.build(TASK, "llvm", database=str(path))
    assert kernel.record is not None and kernel.schedule.to_json() == result.schedule.to_json()
    assert f"from the database: {result.gflops:.2f} GFLOPS, tuned " in kernel.origin and "(4 trials)" in kernel.origin
    assert [r.getMessage() for r in caplog.records] == [kernel.origin]
    check(kernel)


def test_build_of_a_workload_never_tuned_is_naive_and_says_so(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="flexsched"):
        kernel = flexsched.build(("GMM", 16, 8, 8), database=str(tmp_path / "empty.jsonl"))
    assert kernel.record is None and kernel.schedule.to_json() == "[]"
    assert "never tuned on llvm" in kernel.origin and caplog.records[0].levelno == logging.INFO


def test_a_record_tuned_on_another_cpu_is_not_applied(tuned, tmp_path, caplog):
    path, _ = tuned
    data = json.loads(path.read_text().splitlines()[0])
    data["target"] = dict(data["target"], cores=64, device="AMD EPYC (64 cores)")
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps(data) + "\n")
    with caplog.at_level(logging.INFO, logger="flexsched"):
        kernel = flexsched.build(TASK, database=str(other))
    assert kernel.record is None and kernel.schedule.to_json() == "[]"
    assert "tuned on another CPU: AMD EPYC (64 cores)" in kernel.origin and "not applied" in kernel.origin
    assert caplog.records[0].levelno == logging.WARNING
    check(kernel)


def test_tune_command_stores_in_the_database_it_is_given(tuned, monkeypatch, tmp_path, private_tuning_database):
    _, result = tuned
    monkeypatch.setattr("explore.optimize.optimize", lambda *args, **kwargs: result)  # the search is tested elsewhere
    out = io.StringIO()
    assert main(["tune", "GMM", "32", "32", "32", "--trials", "4", "--db", str(tmp_path / "given.jsonl")], out=out) == 0
    assert f"database: added the best record to {tmp_path / 'given.jsonl'}" in out.getvalue()
    assert len(Database(tmp_path / "given.jsonl").workloads()) == 1
    assert main(["tune", "GMM", "32", "32", "32", "--trials", "4", "--no-db"], out=io.StringIO()) == 0
    assert not private_tuning_database.exists()
    assert main(["tune", "GMM", "32", "32", "32", "--trials", "4"], out=io.StringIO()) == 0
    assert len(Database(private_tuning_database).workloads()) == 1  # the default: $FLEXSCHED_DB


def test_export_command_writes_the_stored_best_as_a_library(tuned, tmp_path, capsys):
    path, result = tuned
    out = io.StringIO()
    status = main(["export", "GMM", "32", "32", "32", "-o", str(tmp_path), "--db", str(path), "--name", "gmm"],
                  out=out)
    assert status == 0 and f"{result.gflops:.2f} GFLOPS record" in out.getvalue()
    library = ctypes.CDLL(str(tmp_path / "libgmm.so"))
    a, b = TASK.random_inputs(seed=4)
    o = np.zeros((32, 32), dtype="float32")
    assert library.gmm(*(x.ctypes.data_as(ctypes.c_void_p) for x in (a, b, o))) == 0
    np.testing.assert_allclose(o, TASK.evaluate(a, b)[0], rtol=1e-4, atol=1e-4)
    status = main(["export", "GMM", "32", "32", "8", "-o", str(tmp_path), "--db", str(path)], out=io.StringIO())
    error = capsys.readouterr().err
    llvm = flexsched.target.get_target("llvm").name   # "llvm", or the CPU $FLEXSCHED_LLVM_TARGET names
    assert status == 2 and error.count("\n") == 1 and f"no record of GMM(32, 32, 8) on {llvm} to export" in error
