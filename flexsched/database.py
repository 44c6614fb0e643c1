"""The tuning database: the best records of each workload on each target, kept in the user's cache
so that flexsched.build applies a tuned schedule without searching again.

A workload is a task (name, arguments and the fingerprint of its computation) on a target with all
its capabilities (Target.identity(): a record from another CPU never matches), judged one way
(measured or modelled). The store is a JSON-lines file of ordinary records (explore.records' format,
checked against its schema on every read; a corrupt line is reported and skipped), appended under
the file's lock and synced like any record file. A line is added only when it beats its workload's
stored best, so the file stays short and shows each improvement; two writers racing on one workload
may both append, which costs a line, never a wrong answer. Where it lives: the path given, else
$FLEXSCHED_DB, else $XDG_CACHE_HOME/flexsched/tuning.jsonl (~/.cache/flexsched/tuning.jsonl).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .errors import FlexschedError
from .user_cache import user_cache_dir

ENVIRONMENT_VARIABLE = "FLEXSCHED_DB"
FILE_NAME = "tuning.jsonl"


class DatabaseError(FlexschedError):
    """A record the database cannot take, or a file it cannot read."""


def default_path():
    """$FLEXSCHED_DB, else tuning.jsonl in the user's cache directory."""
    configured = os.environ.get(ENVIRONMENT_VARIABLE)
    if configured:
        return _file_of(configured)
    return os.path.join(user_cache_dir(), FILE_NAME)


def _file_of(path):
    """A database path as given: a file, or a directory that holds tuning.jsonl."""
    path = os.fspath(path)
    return os.path.join(path, FILE_NAME) if os.path.isdir(path) or path.endswith(os.sep) else path


def open_database(database=None):
    """The Database that `database` names: None (the user's), a path, or a Database itself."""
    if isinstance(database, Database):
        return database
    if database is None or database is True:
        return Database(default_path())
    if database is False:
        raise DatabaseError("no database (database=False)")
    return Database(_file_of(database))


def workload_key(data):
    """The workload a record line is of: (task name, args, fingerprint, target, judge), hashable."""
    task = data["task"]
    return (task["name"], json.dumps(list(task["args"])), task.get("fingerprint") or "",
            json.dumps(data["target"], sort_keys=True), data.get("judged_by") or "measured")


@dataclass(frozen=True)
class Workload:
    """A workload's stored records, fastest first (successful ones only)."""

    key: tuple
    records: tuple

    @property
    def best(self):
        return self.records[0]

    def title(self):
        """'GMM(32, 32, 32) on llvm (host CPU (...))'; a computation given as tensors shows its fingerprint."""
        return f"{task_text(self.best.task_ref)} on {target_text(self.best.target)}"


def task_text(ref):
    args = ", ".join(map(str, ref["args"]))
    if ref.get("module") == "" and ref.get("fingerprint"):  # a computation given as tensors: args say nothing
        return f"{ref['name']}({args}) [{ref['fingerprint'][:8]}]"
    return f"{ref['name']}({args})"


def target_text(target):
    device = target.get("device")
    return f"{target.get('name', '?')} ({device})" if device else str(target.get("name", "?"))


def tuned_date(record):
    """The date a record was written ('2025-06-01'), or 'on an unknown date'."""
    stamp = record.data.get("time") or ""
    return stamp[:10] if stamp else "on an unknown date"


def trials_text(record):
    trials = record.data.get("trials")
    return f"{trials} trials" if trials is not None else "trials unknown"


@dataclass(frozen=True)
class Lookup:
    """What the database holds for one task on one target: the record to apply (None if none), its
    schedule, and a line for people saying which and why."""

    record: object
    schedule: object
    note: str
    warn: bool = False   # records exist but none applies: the user should hear of it

    @property
    def applied(self):
        return self.record is not None


@dataclass(frozen=True)
class ImportReport:
    """What `import` took from a file: records added, and why the others were skipped."""

    added: int
    not_best_in_file: int = 0
    not_faster: int = 0
    failed: int = 0
    corrupt: int = 0

    @property
    def skipped(self):
        return self.not_best_in_file + self.not_faster + self.failed + self.corrupt

    def line(self, source, path):
        reasons = [(self.not_best_in_file, "not the best of their workload in the file"),
                   (self.not_faster, "not faster than the stored best"), (self.failed, "failed"),
                   (self.corrupt, "corrupt")]
        text = f"added {self.added} record{'s' if self.added != 1 else ''} from {source} to {path}; skipped {self.skipped}"
        details = ", ".join(f"{count} {why}" for count, why in reasons if count)
        return text + (f" ({details})" if details else "")


class Database:
    """One JSON-lines file of the best records per workload; reading it never imports or runs
    anything a line names."""

    def __init__(self, path=None):
        self.path = _file_of(path) if path is not None else default_path()
        self._cache = None  # ((size, mtime), records) of the last read

    def records(self):
        """Every valid record, in file order (each corrupt line reported once per read, and skipped)."""
        from explore.records import scan_records

        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return []
        stamp = (status.st_size, status.st_mtime_ns)
        if self._cache is None or self._cache[0] != stamp:
            self._cache = (stamp, list(scan_records(self.path).records))
        return self._cache[1]

    def workloads(self):
        """Every workload with a successful record, in the order first stored."""
        groups = {}
        for record in self.records():
            if record.ok:
                groups.setdefault(workload_key(record.data), []).append(record)
        return [Workload(key, tuple(sorted(group, key=lambda r: (r.seconds, r.line)))) for key, group in groups.items()]

    def best_of(self, data):
        """The stored best record of the workload a record line is of, or None."""
        key = workload_key(data)
        return next((w.best for w in self.workloads() if w.key == key), None)

    def add(self, data):
        """Store a successful record line if it beats its workload's best (or is its first); True
        if it was added. The line is checked against the record schema first."""
        from explore.records import RecordWriter
        from explore.record_schema import RecordSchemaError, check_line

        try:
            kind = check_line(data)
        except RecordSchemaError as err:
            raise DatabaseError(f"not a record: {err}") from None
        if kind != "record" or data["result"].get("status") != "ok":
            raise DatabaseError("only successful records are stored")
        best = self.best_of(data)
        if best is not None and best.seconds <= float(data["result"]["seconds"]):
            return False
        with RecordWriter(self.path) as writer:
            writer.append(dict(data))
        return True

    def lookup(self, task, target, judged_by="measured"):
        """The Lookup of a task on a target: its fastest replayable record, or a note saying it was
        never tuned here, or tuned only on another device of the kind (then nothing is applied)."""
        from analysis import analyze
        from explore.evaluator import ExplorationError
        from explore.resume import best_replayable_record
        from space import generate

        records = [r for r in self.records() if r.ok and r.same_task(task)]
        mine = [r for r in records if r.same_target(target) and r.same_judge(judged_by)]
        if mine:
            try:
                record, schedule = best_replayable_record(self.path, mine, task, target,
                                                          lambda: generate(analyze(task), target))
            except ExplorationError as err:
                return Lookup(None, None, f"{task}: no stored record fits today's schedule space ({err}); "
                                          "naive schedule", warn=True)
            return Lookup(record, schedule, f"{task} on {target.name}: from the database: {record.gflops:.2f} GFLOPS, "
                                            f"tuned {tuned_date(record)} ({trials_text(record)})")
        judged_otherwise = [r for r in records if r.same_target(target)]
        if judged_otherwise:
            return Lookup(None, None, f"{task}: only {judged_otherwise[0].judged_by} records on {target.name}, not "
                                      f"{judged_by}; not applied (naive schedule)", warn=True)
        elsewhere = [r for r in records if r.target.get("kind") == target.kind]
        if elsewhere:
            other = min(elsewhere, key=lambda r: r.seconds).target
            return Lookup(None, None, f"{task}: tuned on another {_device_word(target.kind)}: "
                                      f"{_difference(other, target.identity())}; not applied (naive schedule)", warn=True)
        return Lookup(None, None, f"{task} was never tuned on {target.name} (naive schedule; tune it with "
                                  "flexsched.optimize or `flexsched tune`)")

    def import_file(self, source):
        """Merge a record file: each workload's best successful record in it is added where it beats
        the stored best. An ImportReport says how many were added and why the rest were skipped."""
        from explore.records import scan_records

        if not os.path.exists(source):
            raise DatabaseError(f"no record file '{source}'")
        loaded = scan_records(source)
        groups, lines, failed = {}, {}, 0
        for record in loaded.records:
            key = workload_key(record.data)
            lines[key] = lines.get(key, 0) + 1
            if record.ok:
                groups.setdefault(key, []).append(record)
            else:
                failed += 1
        added = not_faster = 0
        for key, group in groups.items():
            best = min(group, key=lambda r: (r.seconds, r.line))
            data = dict(best.data)
            if lines[key] > 1:  # a tuning log: each line of the workload was a trial
                data.setdefault("trials", lines[key])
            if self.add(data):
                added += 1
            else:
                not_faster += 1
        not_best = sum(len(group) - 1 for group in groups.values())
        return ImportReport(added, not_best, not_faster, failed, len(loaded.corrupt))

    def export_file(self, destination):
        """Write each workload's best record as one JSON line; returns how many."""
        workloads = self.workloads()
        with open(destination, "w", encoding="utf-8") as file:
            for workload in workloads:
                file.write(json.dumps(dict(workload.best.data)) + "\n")
        return len(workloads)


def _device_word(kind):
    return {"cpu": "CPU", "gpu": "GPU", "fpga": "FPGA"}.get(kind, "device")


def _difference(recorded, here):
    """The recorded device, and which capabilities differ from this one's."""
    fields = [name for name in sorted(set(recorded) | set(here)) if recorded.get(name) != here.get(name)
              and name != "device"]
    changes = ", ".join(f"{name}={recorded.get(name)} (here {here.get(name)})" for name in fields)
    text = recorded.get("device") or recorded.get("name", "?")
    return f"{text} ({changes})" if changes else text


def remember(result, database=None):
    """Add a TuneResult's best record to the database (None: the user's; False: none); True if it
    was added (it beat the stored best of its workload)."""
    if database is False or result.history.best is None:
        return False
    return open_database(database).add(result.best_record())
