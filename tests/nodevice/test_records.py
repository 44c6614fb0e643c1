"""Record files as untrusted input: each line checked against the schema, a bad one reported once
and skipped, never a traceback (no compilation)."""

import copy
import io
import json
import warnings
from pathlib import Path

import pytest

from explore.optimize import optimize
from explore.records import CorruptRecordWarning, MAX_LINE_BYTES, load_records
from fake_evaluator import FakeEvaluator
from flexsched.cli import main
from flexsched.registry import get_task

GMM = get_task("GMM", 16, 16, 16)


def tune(log, trials=6, seed=0, method="random", evaluator=None, **options):
    evaluator = evaluator if evaluator is not None else FakeEvaluator()
    result = optimize(GMM, "llvm", trials=trials, method=method, seed=seed, evaluator=evaluator, log=str(log),
                      build_kernel=False, **options)
    return result, evaluator


def record_lines(log):
    return [line for line in Path(log).read_text().splitlines() if line]


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


DROP = object()


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


def test_best_and_resume_skip_attacked_lines_with_one_line_warnings(tmp_path, template, capsys):
    log = tmp_path / "run.jsonl"
    tune(log, trials=6)
    with open(log, "ab") as file:
        file.write(b"\xff\xff\n" + b"[" * 50_000 + b"\n" + json.dumps(changed(template, "result", "ok")).encode()
                   + b"\n" + json.dumps(changed(template, "task/args", 3)).encode() + b"\n[1]\n")
    out = io.StringIO()
    assert main(["best", str(log)], out=out) == 0
    assert out.getvalue().startswith("GMM(16, 16, 16) on llvm: 6 records")
    err = capsys.readouterr().err
    assert err.count("\n") == 5 and "Traceback" not in err
    assert all(line.startswith(f"flexsched: warning: {log}:") for line in err.splitlines())
    with pytest.warns(CorruptRecordWarning):
        result, evaluator = tune(log, trials=9, resume=True)
    assert len(evaluator.calls) == 3
