"""Record files as untrusted input: the line schema, no import chosen by a record, records that no
longer fit the space, the resume report, and claims between runs sharing one file (no compilation)."""

import copy
import io
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from analysis import analyze
from codegen.measure import MeasureResult
from explore.claims import SharedRecords
from explore.evaluator import Evaluation, ExplorationError
from explore.history import Entry
from explore.methods import Proposal
from explore.optimize import build_best, optimize
from explore.record_schema import RecordSchemaError, check_line
from explore.records import CorruptRecordWarning, MAX_LINE_BYTES, load_records, record_line
from explore.resume import MisfitRecordWarning, resume_history
from explore.search import EVALUATE, WAIT
from fake_evaluator import FakeEvaluator
from flexsched.cli import main
from flexsched.registry import get_task
from flexsched.target import get_target
from space import generate

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GMM = get_task("GMM", 16, 16, 16)
LLVM = get_target("llvm")
SPACE = generate(analyze(GMM), LLVM)


def tune(log, trials=6, seed=0, method="random", evaluator=None, **options):
    evaluator = evaluator if evaluator is not None else FakeEvaluator()
    result = optimize(GMM, "llvm", trials=trials, method=method, seed=seed, evaluator=evaluator, log=str(log),
                      build_kernel=False, **options)
    return result, evaluator


def record_lines(log):
    """The record lines of a file (claim lines left out)."""
    return [line for line in Path(log).read_text().splitlines() if line and '"claim"' not in line]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """One real, successful record line of GMM(16, 16, 16) on this CPU, as a dict."""
    log = tmp_path_factory.mktemp("template") / "run.jsonl"
    tune(log, trials=8)
    return next(data for data in map(json.loads, record_lines(log)) if data["result"]["status"] == "ok")


def load_with_warnings(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = load_records(path)
    return records, [str(w.message) for w in caught if issubclass(w.category, CorruptRecordWarning)]


def changed(data, path, value):
    """A deep copy of a record with the field at a path ("result/seconds") set to value (or removed if
    value is DROP); knob names hold dots, so the path does not."""
    data = copy.deepcopy(data)
    *parents, last = path.split("/")
    node = data
    for name in parents:
        node = node[name]
    if value is DROP:
        del node[last]
    else:
        node[last] = value
    return data


class _Drop:
    """A field to remove rather than change; named, so test ids stay the same from run to run."""

    def __repr__(self):
        return "DROP"


DROP = _Drop()
# A measurement's details as records kept them before the per-phase seconds existed.
OLD_RESULT_FIELDS = ("status", "seconds", "min_seconds", "max_seconds", "repeats", "compile_seconds", "error", "number")


# ---------------------------------------------------------------- the schema, line by line

BAD_FIELDS = [
    ("result", "ok", "result: expected an object, got a string"),
    ("task/args", 3, "task.args: expected a list, got an integer"),
    ("task/name", 7, "task.name: expected a string"),
    ("task/name", "GMM\x1b[2J", "task.name: holds control characters"),
    ("task", DROP, "missing task"),
    ("task/args", DROP, "task.args: missing"),
    ("target", [], "target: expected an object, got a list"),
    ("config", "tile=4", "config: expected an object, got a string"),
    ("config/O.order", {"a": 1}, "config.O.order: expected a string, number or boolean, got an object"),
    ("result/status", "fast", "result.status: expected one of ok, build_error"),
    ("result/status", DROP, "result.status: missing"),
    ("result/seconds", -1, "result.seconds: expected a finite number > 0 for an ok result, got -1"),
    ("result/seconds", 0, "result.seconds: expected a finite number > 0"),
    ("result/seconds", float("nan"), "result.seconds: expected a finite number > 0 for an ok result, got nan"),
    ("result/seconds", float("inf"), "result.seconds: expected a finite number > 0 for an ok result, got inf"),
    ("result/seconds", "0.001", "result.seconds: expected a finite number > 0 for an ok result, got '0.001'"),
    ("result/seconds", True, "result.seconds: expected a finite number > 0"),
    ("result/seconds", None, "result.seconds: expected a finite number > 0"),
    ("result/details", [1], "result.details: expected an object, got a list"),
    ("trial", -1, "trial: expected an integer >= 0, got -1"),
    ("trial", "3", "trial: expected an integer, got a string"),
    ("point", [0, -2], "point[1]: expected an integer >= 0, got -2"),
    ("origin", {"start": [0]}, "origin.direction: missing"),
    ("elapsed", float("nan"), "elapsed: expected a finite number, got nan"),
    ("gflops", "fast", "gflops: expected a finite number, got 'fast'"),
    ("judged_by", 1, "judged_by: expected a string, got an integer"),
    ("seed", 1.5, "seed: expected an integer, got a number"),
    ("space", "generated", "space: expected an object, got a string"),
    ("space/version", DROP, "space.version: missing"),
    ("space/version", -1, "space.version: expected an integer >= 0, got -1"),
    ("schedule", {"kind": "split"}, "schedule: expected a list, got an object"),
    ("schedule", [{"kind": "explode"}], "schedule[0]: unknown schedule step kind 'explode'"),
    ("schedule", [{"kind": "unroll", "node": "O"}], "schedule[0]: step 'unroll': missing field(s) loop"),
    ("schedule", [3], "schedule[0]: expected an object, got an integer"),
]


@pytest.mark.parametrize("path, value, message", BAD_FIELDS, ids=[f"{p}={v!r}"[:40] for p, v, _ in BAD_FIELDS])
def test_a_wrong_field_is_one_warning_naming_file_line_and_field(tmp_path, template, path, value, message):
    log = tmp_path / "run.jsonl"
    bad = changed(template, path, value)
    log.write_text("\n".join([json.dumps(template), json.dumps(bad), json.dumps(template)]) + "\n")
    records, reports = load_with_warnings(log)
    assert [r.line for r in records] == [1, 3]
    assert len(reports) == 1
    assert reports[0].startswith(f"{log}:2: skipped a corrupt record (") and message in reports[0]


RAW_ATTACKS = [
    (b'\xff\xfe{"task": 1}', "line: not UTF-8 (byte 0xff at column 1)"),
    (b'{"task": {"name": "G\xc3', "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "line: nested too deeply to read"),
    (b'{"task": ' + b"[" * 40 + b"]" * 40 + b"}", "line: nested deeper than 32 levels"),
    (b"[1, 2, 3]", "line: expected a JSON object, got a list"),
    (b'"a record"', "line: expected a JSON object, got a string"),
    (b"null", "line: expected a JSON object, got null"),
    (b'{"task": {"name": "GMM", "args": [16, 16', "line: not JSON ("),
    (b'{"trial": ' + b"9" * 5000 + b"}", "line: not JSON ("),
    (b'{"task": {"name": "\\ud800", "args": []}}', "line: a string with an unpaired surrogate"),
    (b'{"task": {"name": "GMM", "args": [], "\\uDC01": 1}}', "line: a string with an unpaired surrogate"),
    (b'{"claim": {"run": "r", "pid": "x", "host": "h", "time": 1.0, "ended": true}}',
     "claim.pid: expected an integer, got a string"),
    (b'{"claim": {"run": "r", "pid": 5, "host": "h", "time": 1.0, "scope": "s", "configs": {}}}',
     "claim.configs: expected a list, got an object"),
]


@pytest.mark.parametrize("raw, message", RAW_ATTACKS, ids=[m[:30] for _, m in RAW_ATTACKS])
def test_a_malformed_line_is_one_warning_and_the_rest_loads(tmp_path, template, raw, message):
    log = tmp_path / "run.jsonl"
    good = json.dumps(template).encode()
    log.write_bytes(b"\n".join([good, raw, good]) + b"\n")
    records, reports = load_with_warnings(log)
    assert [r.line for r in records] == [1, 3]
    assert len(reports) == 1 and reports[0].startswith(f"{log}:2: skipped a corrupt record (")
    assert message in reports[0]


def test_a_line_given_as_data_has_its_strings_checked_too(template):
    # A line read from a file skips the string check when its text escapes no surrogate; one
    # handed over already parsed (a tuning database's add) has no text, so every string is checked.
    bad = copy.deepcopy(template)
    bad["method"] = "q\ud800"
    with pytest.raises(RecordSchemaError, match="unpaired surrogate"):
        check_line(bad)
    assert check_line(copy.deepcopy(template)) == "record"


def test_an_overlong_line_costs_one_warning_and_is_not_read_whole(tmp_path, template):
    log = tmp_path / "run.jsonl"
    good = json.dumps(template).encode()
    log.write_bytes(good + b"\n" + b'{"x": "' + b"a" * (3 * MAX_LINE_BYTES) + b'"}\n' + good + b"\n")
    records, reports = load_with_warnings(log)
    assert [r.line for r in records] == [1, 3]
    assert reports == [f"{log}:2: skipped a corrupt record (line: longer than {MAX_LINE_BYTES} bytes)"]


def test_valid_claim_lines_load_silently(tmp_path, template):
    log = tmp_path / "run.jsonl"
    claim = {"claim": {"run": "r1", "pid": 5, "host": "h", "time": 1.0, "scope": "s", "configs": [{"k": [1, 2]}]}}
    ended = {"claim": {"run": "r1", "pid": 5, "host": "h", "time": 2.0, "ended": True}}
    log.write_text("\n".join(json.dumps(d) for d in (claim, template, ended)) + "\n")
    records, reports = load_with_warnings(log)
    assert [r.line for r in records] == [2] and reports == []


@pytest.mark.parametrize("status, seconds", [("build_error", None), ("timeout", None), ("rejected", None),
                                             ("error", None), ("wrong_answer", 0.5)])
def test_every_evaluator_status_is_a_valid_failure(tmp_path, template, status, seconds):
    log = tmp_path / "run.jsonl"
    failed = changed(template, "result", {"status": status, "seconds": seconds, "error": "why", "details": {}})
    log.write_text(json.dumps(failed) + "\n")
    records, reports = load_with_warnings(log)
    assert len(records) == 1 and not records[0].ok and reports == []


def test_a_measurements_phases_round_trip_and_records_without_them_still_load(tmp_path, template):
    measured = MeasureResult("ok", 2e-3, 1.9e-3, 2.1e-3, 3, 0.31, "", 4, lower_seconds=0.01, emit_seconds=0.03,
                             optimize_seconds=0.2, machine_code_seconds=0.07, check_seconds=0.004,
                             timing_seconds=0.03, wall_seconds=0.36, kernel_cache="disk")
    old = {key: value for key, value in measured.to_dict().items() if key in OLD_RESULT_FIELDS}
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(changed(template, "result", {"status": "ok", "seconds": 2e-3, "error": "",
                                                                   "details": details})) + "\n"
                           for details in (measured.to_dict(), old)))
    new_record, old_record = load_records(log)
    assert MeasureResult.from_dict(new_record.evaluation.details) == measured
    before = MeasureResult.from_dict(old_record.evaluation.details)
    assert before.compile_seconds == 0.31 and before.seconds == 2e-3
    assert before.optimize_seconds == before.check_seconds == before.wall_seconds == 0.0 and before.kernel_cache == ""


def test_best_and_resume_skip_attacked_lines_with_one_line_warnings(tmp_path, template, capsys):
    log = tmp_path / "run.jsonl"
    tune(log, trials=6)
    with open(log, "ab") as file:
        file.write(b"\xff\xff\n" + b"[" * 50_000 + b"\n" + json.dumps(changed(template, "result", "ok")).encode()
                   + b"\n" + json.dumps(changed(template, "task/args", 3)).encode() + b"\n[1]\n")
    out = io.StringIO()
    assert main(["best", str(log)], out=out) == 0
    assert out.getvalue().startswith(f"GMM(16, 16, 16) on {LLVM.name}: 6 records")
    err = capsys.readouterr().err
    assert err.count("\n") == 5 and "Traceback" not in err
    assert all(line.startswith(f"flexsched: warning: {log}:") for line in err.splitlines())
    with pytest.warns(CorruptRecordWarning):
        result, evaluator = tune(log, trials=9, resume=True)
    assert result.resumed_from.used == 6 and result.resumed_from.count("corrupt") == 5
    assert len(evaluator.calls) == 3


# ---------------------------------------------------------------- nothing in a record chooses an import

EVIL_MODULE = "flexsched_evil_record_module"


@pytest.fixture
def evil_log(tmp_path, template, monkeypatch):
    """A record file whose fastest record names a task defined only in a module that, imported,
    writes a marker file; the module is importable (on sys.path) so only restraint keeps it out."""
    marker = tmp_path / "imported.marker"
    (tmp_path / f"{EVIL_MODULE}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(EVIL_MODULE, None)
    evil = changed(template, "task", {"name": "EVIL_TASK", "args": [1], "module": EVIL_MODULE})
    evil = changed(evil, "result/seconds", 1e-12)
    log = tmp_path / "run.jsonl"
    log.write_text(json.dumps(template) + "\n" + json.dumps(evil) + "\n")
    yield log, marker
    sys.modules.pop(EVIL_MODULE, None)


def test_build_best_does_not_import_the_module_a_record_names(evil_log):
    log, marker = evil_log
    with pytest.raises(ExplorationError) as raised:
        build_best(log)
    message = str(raised.value)
    assert message.startswith(f"{log}:2: task 'EVIL_TASK' (defined in module '{EVIL_MODULE}') is not registered "
                              "in this process; import the module that defines it first (on the command line: "
                              "--module/-m), or pass the task")
    assert "\n" not in message
    assert not marker.exists() and EVIL_MODULE not in sys.modules
    __import__(EVIL_MODULE)  # the control: importing it is exactly what would have left the marker
    assert marker.exists()


def test_resume_and_best_do_not_import_the_module_a_record_names(evil_log):
    log, marker = evil_log
    result, _ = tune(log, trials=3, resume=True)
    assert result.resumed_from.used == 1 and result.resumed_from.count("task") == 1
    out = io.StringIO()
    assert main(["best", str(log)], out=out) == 0
    assert f"EVIL_TASK(1) on {LLVM.name}: 1 records, 1 ok" in out.getvalue()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(log.parent)]))
    done = subprocess.run([sys.executable, "-m", "flexsched", "best", str(log), "--json"], env=env, cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not marker.exists() and EVIL_MODULE not in sys.modules


def test_build_best_with_an_unregistered_task_names_it(tmp_path, template):
    log = tmp_path / "run.jsonl"
    log.write_text(json.dumps(changed(template, "task", {"name": "NOT_HERE", "args": []})) + "\n")
    with pytest.raises(ExplorationError, match=r"run.jsonl:1: task 'NOT_HERE' is not registered in this process"):
        build_best(log)


# ---------------------------------------------------------------- records that no longer fit the space

def misfit_lines(template):
    unknown = changed(template, "config/O.retired_knob", 3)
    out_of_range = changed(template, "config/O.unroll", 12345)
    missing = changed(template, "config/O.order", DROP)
    return [unknown, out_of_range, missing]


def test_resume_reports_and_skips_records_outside_todays_space(tmp_path, template):
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(d) + "\n" for d in [template, *misfit_lines(template)]))
    with pytest.warns(MisfitRecordWarning) as caught:
        history, report = resume_history(log, GMM, LLVM, SPACE, "measured")
    assert len(history) == 1 and report.used == 1 and report.count("space") == 3
    messages = [str(w.message) for w in caught]
    assert len(messages) == 3
    assert messages[0].startswith(f"{log}:2: skipped a record of GMM(16, 16, 16) that does not fit today's space (")
    assert "unknown knob 'O.retired_knob'" in messages[0]
    assert "12345" in messages[1]
    assert f"{log}:4:" in messages[2] and "no value for knob 'O.order'" in messages[2]


def test_many_misfits_are_summarised_not_listed(tmp_path, template):
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(changed(template, "config/O.unroll", 1000 + i)) + "\n" for i in range(25)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, report = resume_history(log, GMM, LLVM, SPACE)
    assert report.count("space") == 25
    assert len(caught) == 11 and "skipped 15 more records" in str(caught[-1].message)


def test_build_best_skips_a_faster_record_that_no_longer_fits(tmp_path, template, monkeypatch):
    built = []
    monkeypatch.setattr("codegen.isolated_build.build_isolated",
                        lambda task, schedule, target, **limits: built.append((task, schedule)))
    log = tmp_path / "run.jsonl"
    # Records written before schedules were kept: only their configs can be replayed.
    faster = [changed(changed(changed(d, "result/seconds", 1e-9), "schedule", DROP), "space", DROP)
              for d in misfit_lines(template)]
    log.write_text("".join(json.dumps(d) + "\n" for d in [template, *faster]))
    with pytest.warns(MisfitRecordWarning) as caught:
        build_best(log, GMM)
    assert [str(w.message).split(": skipped a record of GMM")[0] for w in caught] == [f"{log}:{n}" for n in (2, 3, 4)]
    with pytest.warns(MisfitRecordWarning):
        build_best(log)  # the task comes from the registry
    from space.config import Config

    expected = SPACE.schedule(Config.from_dict(template["config"])).to_json()
    assert [schedule.to_json() for _, schedule in built] == [expected, expected]
    assert built[1][0].key == GMM.key


def test_build_best_replays_a_records_own_schedule_whatever_the_space_became(tmp_path, template, monkeypatch):
    built = []
    monkeypatch.setattr("codegen.isolated_build.build_isolated",
                        lambda task, schedule, target, **limits: built.append(schedule))
    log = tmp_path / "run.jsonl"
    retired = changed(changed(template, "config/O.retired_knob", 3), "space/version", 999)
    log.write_text(json.dumps(retired) + "\n")
    build_best(log, GMM)
    assert [schedule.to_json() for schedule in built] == [json.dumps(template["schedule"])]


def test_build_best_ignores_records_of_another_target(tmp_path, template, monkeypatch):
    built = []
    monkeypatch.setattr("codegen.isolated_build.build_isolated",
                        lambda task, schedule, target, **limits: built.append(task))
    log = tmp_path / "run.jsonl"
    elsewhere = changed(changed(template, "target/cores", 4096), "task/args", [8, 8, 8])
    log.write_text(json.dumps(changed(elsewhere, "result/seconds", 1e-9)) + "\n" + json.dumps(template) + "\n")
    build_best(log)
    assert [task.key for task in built] == [GMM.key]


# ---------------------------------------------------------------- the resume report

def test_resume_counts_why_each_record_was_left_out(tmp_path, template):
    log = tmp_path / "run.jsonl"
    tune(log, trials=5)
    own = json.loads(record_lines(log)[0])
    lines = [changed(own, "task/args", [8, 8, 8]), changed(own, "target/cores", 4096),
             changed(own, "judged_by", "modelled"), changed(own, "config/O.unroll", 12345), own]
    with open(log, "a") as file:
        file.write("".join(json.dumps(d) + "\n" for d in lines) + "{torn\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history, report = resume_history(log, GMM, LLVM, SPACE, "measured")
    assert len(history) == report.used == 5
    assert report.ignored == (("task", 1), ("target", 1), ("judge", 1), ("space", 1), ("duplicate", 1),
                              ("corrupt", 1))
    assert report.line() == (f"resumed 5 records from {log}; ignored 6: 1 of another task, 1 of another target "
                             "or its capabilities, 1 judged another way (measured against modelled), 1 not in "
                             "today's space, 1 duplicates, 1 corrupt")


def test_tune_resume_prints_the_report_on_one_line(tmp_path, monkeypatch, capsys):
    log = tmp_path / "run.jsonl"
    tune(log, trials=4)
    with open(log, "a") as file:
        file.write("[]\n")
    monkeypatch.setattr("explore.optimize.evaluator_for", lambda target, name=None, **options: FakeEvaluator())
    monkeypatch.setattr("explore.optimize._has_back_end", lambda target: False)
    out = io.StringIO()
    status = main(["tune", "GMM", "16", "16", "16", "--trials", "6", "--method", "random", "--log", str(log),
                   "--resume"], out=out)
    assert status == 0
    assert f"resumed 4 records from {log}; ignored 1: 1 corrupt\n" in out.getvalue()
    assert "6 trials (2 evaluated now, " in out.getvalue()
    assert capsys.readouterr().err.count("flexsched: warning: ") == 1


def test_resume_of_a_missing_file_resumes_nothing(tmp_path):
    result, evaluator = tune(tmp_path / "new.jsonl", trials=3, resume=True)
    assert result.resumed_from.used == 0 and result.resumed_from.ignored == ()
    assert len(evaluator.calls) == 3


# ---------------------------------------------------------------- claims between runs

def proposal(point):
    return Proposal(tuple(point), SPACE.schedule(point).to_json())


def shared(log, **options):
    return SharedRecords(log, GMM, LLVM, SPACE, "measured", lambda entry: {}, **options)


def claim_line(point, pid, when=None, host=None, run="other-run"):
    import socket

    return json.dumps({"claim": {"run": run, "pid": pid, "host": host or socket.gethostname(),
                                 "time": time.time() if when is None else when,
                                 "scope": shared_scope(), "configs": [SPACE.config(point).to_dict()]}}) + "\n"


def shared_scope():
    from explore.claims import scope_of

    return scope_of(GMM, LLVM, "measured")


def dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("line, verdict", [
    (lambda p: claim_line(p, os.getpid()), WAIT),                                 # a live run evaluates it
    (lambda p: claim_line(p, dead_pid()), EVALUATE),                              # its run was killed
    (lambda p: claim_line(p, os.getpid(), when=time.time() - 10_000), EVALUATE),  # too old to trust
    (lambda p: claim_line(p, os.getpid(), when=time.time() + 10_000), EVALUATE),  # forged, from the future
    (lambda p: claim_line(p, 1, host="elsewhere"), WAIT),                          # another host: until it lapses
    (lambda p: claim_line(p, os.getpid()) + json.dumps(
        {"claim": {"run": "other-run", "pid": os.getpid(), "host": "h", "time": 1.0, "ended": True}}) + "\n",
     EVALUATE),                                                                   # its run ended without a result
])
def test_a_claim_holds_only_while_its_run_can_still_record(tmp_path, line, verdict):
    log = tmp_path / "run.jsonl"
    point = SPACE.random_point(0)
    log.write_text(line(point))
    records = shared(log)
    try:
        assert records.claim([proposal(point)]) == [verdict]
    finally:
        records.close()


def test_a_recorded_point_is_reused_and_a_claim_is_waited_for(tmp_path):
    log = tmp_path / "run.jsonl"
    taken, waited = SPACE.random_point(1), SPACE.random_point(2)
    result, _ = tune(log, trials=1)
    entry = next(e for e in result.history.entries if e.ok)   # the warm-up goes on past a failed first point
    with open(log, "a") as file:
        file.write(claim_line(waited, os.getpid()))
    records = shared(log)
    try:
        assert records.claim([proposal(entry.point)]) == [entry.evaluation]

        def finish():  # the other run records its point a little later
            time.sleep(0.2)
            with open(log, "a") as file:
                line = record_line(GMM, LLVM, Entry(0, waited, "", Evaluation("ok", 2e-3), 0.5, 0.0), "random", 0,
                                   SPACE)
                file.write(json.dumps(line) + "\n")

        thread = threading.Thread(target=finish)
        thread.start()
        assert records.claim([proposal(taken), proposal(waited)])[1] is WAIT
        assert records.wait([proposal(waited)]) == [Evaluation("ok", 2e-3)]
        thread.join()
    finally:
        records.close()


def test_a_claim_that_lapses_while_waited_for_is_taken_over(tmp_path):
    log = tmp_path / "run.jsonl"
    point = SPACE.random_point(3)
    log.write_text(claim_line(point, os.getpid()))
    records = shared(log, claim_seconds=0.3)
    try:
        assert records.claim([proposal(point)]) == [WAIT]
        assert records.wait([proposal(point)]) == [EVALUATE]
    finally:
        records.close()
    claims = [json.loads(line)["claim"] for line in log.read_text().splitlines()]
    assert claims[1]["run"] == records.run and claims[-1].get("ended") is True


CHILD = """
import json, sys, time
from pathlib import Path
from fake_evaluator import FakeEvaluator
from explore.optimize import optimize
from flexsched.registry import get_task

log, name, method = sys.argv[1:4]
seed, trials, delay = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
Path(log + "." + name + ".ready").touch()
while not Path(log + ".go").exists():
    time.sleep(0.005)
evaluator = FakeEvaluator(delay=delay)
result = optimize(get_task("GMM", 16, 16, 16), "llvm", trials=trials, method=method, seed=seed, evaluator=evaluator,
                  log=log, build_kernel=False, resume="--resume" in sys.argv)
resumed = result.resumed_from.used if result.resumed_from else None
print(json.dumps({"calls": [list(p) for p in evaluator.calls], "trials": result.trials, "reused": result.reused,
                  "resumed": resumed}))
"""


def start_children(log, runs):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]))
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(log), f"run{index}", *map(str, run)], env=env,
                                 cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for index, run in enumerate(runs)]
    deadline = time.monotonic() + 60
    while not all(Path(f"{log}.run{i}.ready").exists() for i in range(len(runs))):
        assert time.monotonic() < deadline and all(child.poll() is None for child in children)
        time.sleep(0.01)
    Path(f"{log}.go").touch()
    return children


def finish(child, timeout=120):
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise
    assert child.returncode == 0, stderr
    return json.loads(stdout)


@pytest.mark.parametrize("runs", [
    [("random", 0, 24, 0.02), ("random", 0, 24, 0.02)],  # the same seed: the same proposals, in lockstep
    [("random", 0, 24, 0.02), ("p", 0, 30, 0.01)],       # one warm-up, then different walks
], ids=["same-proposals", "different-walks"])
def test_two_runs_sharing_a_file_never_evaluate_a_config_twice(tmp_path, runs):
    log = tmp_path / "run.jsonl"
    outputs = [finish(child) for child in start_children(log, runs)]
    calls = [tuple(point) for output in outputs for point in output["calls"]]
    keys = [SPACE.schedule(point).to_json() for point in calls]
    assert len(keys) == len(set(keys))  # no schedule evaluated by both runs
    assert [output["trials"] for output in outputs] == [run[2] for run in runs]
    assert sum(output["reused"] for output in outputs) > 0  # they did meet on some points
    records, reports = load_with_warnings(log)
    assert reports == []  # no line of one run torn by the other
    assert len(records) == len(calls)
    configs = [json.dumps(r.data["config"]) for r in records]
    assert len(configs) == len(set(configs))


def test_a_killed_runs_claim_does_not_block_resume(tmp_path):
    log = tmp_path / "run.jsonl"
    (child,) = start_children(log, [("random", 7, 10, 60.0)])  # stuck on its first point
    deadline = time.monotonic() + 60
    while '"configs"' not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    child.kill()
    child.communicate()
    Path(f"{log}.go").unlink()
    Path(f"{log}.run0.ready").unlink()
    (again,) = start_children(log, [("random", 7, 10, 0.0, "--resume")])
    output = finish(again, timeout=60)  # a claim that held would keep it waiting for 15 minutes
    claimed = json.loads(log.read_text().splitlines()[0])["claim"]["configs"][0]
    assert any(SPACE.config(point).to_dict() == claimed for point in output["calls"])
    assert output["resumed"] == 0 and len(output["calls"]) == 10
