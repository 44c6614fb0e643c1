"""The tuning database's store, with hand-made records: where it lives, one best per workload
(task computation, target capabilities, judge), lookups that never apply another CPU's record,
corrupt lines skipped, import and export, concurrent writers, and the `db` commands."""

import io
import json
import threading
import warnings

import pytest

from explore.records import CorruptRecordWarning
from flexsched.cli import main
from flexsched.database import Database, DatabaseError, default_path, open_database, workload_key
from flexsched.registry import get_task
from flexsched.target import host_cpu

TASK = get_task("GMM", 8, 8, 8)
TARGET = host_cpu()
OTHER_CPU = TARGET.with_(cores=TARGET.cores + 14, device="host CPU (another one)")


def record(seconds=1e-3, task=TASK, target=TARGET, status="ok", judged_by="measured", time="2025-06-01T12:00:00+00:00",
           **extra):
    data = {"task": task.ref(), "target": target.to_dict(), "method": "q", "judged_by": judged_by, "seed": 0,
            "config": {"O.unroll": 8}, "space": {"name": "generated", "version": 1}, "schedule": [],
            "result": {"status": status, "seconds": seconds if status == "ok" else None},
            "gflops": 2 * 8 ** 3 / seconds / 1e9, "time": time}
    return {**data, **extra}


def write_lines(path, lines):
    with open(path, "w") as file:
        for line in lines:
            file.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


def test_where_the_database_lives(monkeypatch, tmp_path):
    monkeypatch.setenv("FLEXSCHED_DB", str(tmp_path / "mine.jsonl"))
    assert default_path() == str(tmp_path / "mine.jsonl")
    monkeypatch.setenv("FLEXSCHED_DB", str(tmp_path))  # a directory holds tuning.jsonl
    assert default_path() == str(tmp_path / "tuning.jsonl")
    monkeypatch.delenv("FLEXSCHED_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_path() == str(tmp_path / "cache" / "flexsched" / "tuning.jsonl")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_path() == str(tmp_path / "home" / ".cache" / "flexsched" / "tuning.jsonl")
    assert open_database(tmp_path / "given.jsonl").path == str(tmp_path / "given.jsonl")


def test_a_record_is_added_only_when_it_beats_its_workloads_best(tmp_path):
    database = Database(tmp_path / "db.jsonl")
    assert database.add(record(2e-3))
    assert not database.add(record(3e-3))
    assert not database.add(record(2e-3))
    assert database.add(record(1e-3, trials=12))
    (workload,) = database.workloads()
    assert [r.seconds for r in workload.records] == [1e-3, 2e-3]
    assert workload.best.data["trials"] == 12
    assert len((tmp_path / "db.jsonl").read_text().splitlines()) == 2


def test_workloads_are_told_apart_by_computation_target_capabilities_and_judge(tmp_path):
    database = Database(tmp_path / "db.jsonl")
    other_shape = get_task("GMM", 8, 8, 16)
    forged = record()
    forged["task"] = dict(forged["task"], fingerprint="0123456789abcdef")  # same name and args, another computation
    for data in [record(), record(target=OTHER_CPU), record(task=other_shape), record(judged_by="modelled"), forged]:
        assert database.add(data)
    assert len({workload_key(w.best.data) for w in database.workloads()}) == 5


def test_lookup_applies_a_record_of_this_very_target(tmp_path):
    database = Database(tmp_path / "db.jsonl")
    database.add(record(4e-6, trials=7))
    found = database.lookup(TASK, TARGET)
    assert found.applied and not found.warn
    assert found.record.seconds == 4e-6 and found.schedule.to_json() == "[]"
    assert "from the database: 0.26 GFLOPS, tuned 2025-06-01 (7 trials)" in found.note


def test_another_cpus_record_is_not_applied_and_the_note_says_so(tmp_path):
    database = Database(tmp_path / "db.jsonl")
    database.add(record(1e-4, target=OTHER_CPU))
    found = database.lookup(TASK, TARGET)
    assert not found.applied and found.warn
    assert "tuned on another CPU: host CPU (another one)" in found.note
    assert f"cores={OTHER_CPU.cores} (here {TARGET.cores})" in found.note and "not applied" in found.note
    never = Database(tmp_path / "empty.jsonl").lookup(TASK, TARGET)
    assert not never.applied and not never.warn and "never tuned on llvm" in never.note


def test_a_corrupt_line_is_reported_once_and_skipped(tmp_path):
    path = tmp_path / "db.jsonl"
    write_lines(path, [record(), "{not json", record(5e-4, task=get_task("GMM", 8, 8, 16))])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        workloads = Database(path).workloads()
    assert len(workloads) == 2
    assert [w.category for w in caught] == [CorruptRecordWarning]
    assert ":2: skipped a corrupt record" in str(caught[0].message)


def test_only_valid_successful_records_are_stored(tmp_path):
    database = Database(tmp_path / "db.jsonl")
    with pytest.raises(DatabaseError, match="only successful records"):
        database.add(record(status="wrong_answer"))
    with pytest.raises(DatabaseError, match="not a record: .*result.seconds"):
        database.add(dict(record(), result={"status": "ok", "seconds": -1}))
    assert database.workloads() == []


def test_import_keeps_each_workloads_best_and_export_round_trips(tmp_path):
    log = tmp_path / "run.jsonl"
    wide = get_task("GMM", 8, 8, 16)
    write_lines(log, [record(3e-3), record(1e-3), record(status="runtime_error"), record(2e-3, task=wide),
                      record(4e-3, task=wide), "garbage", {"claim": {"run": "r", "pid": 1, "host": "h", "time": 0.0,
                                                                      "ended": True}}])
    database = Database(tmp_path / "db.jsonl")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptRecordWarning)
        report = database.import_file(log)
    assert (report.added, report.not_best_in_file, report.not_faster, report.failed, report.corrupt) == (2, 2, 0, 1, 1)
    assert "added 2 records" in report.line(log, database.path) and "skipped 4" in report.line(log, database.path)
    best = {w.best.task_ref["args"][2]: w.best for w in database.workloads()}
    assert best[8].seconds == 1e-3 and best[8].data["trials"] == 3  # the log's lines of the workload, failures too
    exported = tmp_path / "export.jsonl"
    assert database.export_file(exported) == 2
    other = Database(tmp_path / "other.jsonl")
    assert other.import_file(exported).added == 2
    again = other.import_file(exported)
    assert (again.added, again.not_faster) == (0, 2)
    assert sorted(r.seconds for r in other.records()) == [1e-3, 2e-3]


def test_concurrent_writers_never_interleave_lines(tmp_path):
    path = tmp_path / "db.jsonl"
    tasks = [get_task("GMM", 8, 8, n) for n in range(1, 41)]

    def add(chunk):
        database = Database(path)
        for task in chunk:
            database.add(record(task=task))

    threads = [threading.Thread(target=add, args=(tasks[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptRecordWarning)
        assert len(Database(path).workloads()) == 40


def cli(*argv):
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_db_commands_list_show_export_and_import(tmp_path, capsys):
    path = tmp_path / "db.jsonl"
    database = Database(path)
    database.add(record(2e-6, trials=9))
    database.add(record(1e-6, trials=20))
    database.add(record(5e-7, task=get_task("GMM", 8, 8, 16)))
    status, text = cli("db", "list", "--db", str(path))
    assert status == 0 and len(text.splitlines()) == 2
    assert text.startswith("GMM(8, 8, 8)  llvm (host CPU") and "1.02 GFLOPS  tuned 2025-06-01  20 trials" in text
    status, text = cli("db", "show", "GMM", "8", "8", "8", "--db", str(path))
    assert status == 0 and "2 record(s), fastest first" in text
    assert text.index("20 trials") < text.index("9 trials") and 'config: {"O.unroll": 8}' in text
    status, text = cli("db", "export", str(tmp_path / "best.jsonl"), "--db", str(path))
    assert status == 0 and "wrote 2 records" in text
    status, text = cli("db", "import", str(tmp_path / "best.jsonl"), "--db", str(tmp_path / "new.jsonl"))
    assert status == 0 and text.startswith("added 2 records")
    status, text = cli("db", "import", str(tmp_path / "best.jsonl"), "--db", str(tmp_path / "new.jsonl"))
    assert "added 0 records" in text and "2 not faster than the stored best" in text
    assert cli("db", "list", "--db", str(tmp_path / "new.jsonl"))[1] == cli("db", "list", "--db", str(path))[1]
    assert cli("db", "list", "--db", str(tmp_path / "none.jsonl"))[1].endswith("no records\n")
    status, _ = cli("db", "show", "GMM", "1", "2", "3", "--db", str(path))
    assert status == 2 and "no records of GMM(1, 2, 3)" in capsys.readouterr().err
