"""Tuning records: one JSON line per evaluated point, appended, flushed and synced at once.

A line holds everything needed to trust or replay it: the task (name and arguments), the target
with its capabilities, the method and seed, the point and its config, how the point was reached,
the result with its error, the time stamp and the project version. A record file is untrusted
input: loading checks each line against explore.record_schema, reports each line that fails
(file, line number and field) as one warning and skips it, and never imports anything a line
names. A killed run leaves at most one torn line; the next append starts on a fresh line.
Writers append under the file's advisory lock (flock), which explore.claims also holds while it
claims points, so concurrent runs never interleave their lines.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import math
import os
import warnings
from dataclasses import dataclass
from typing import Mapping

from flexsched.schedule import Schedule
from flexsched.target import Target, TargetError, host_cpu
from flexsched.version import version
from space.config import Config
from space.space import GENERATED, SpaceError

from .evaluator import Evaluation, ExplorationError
from .record_schema import RecordSchemaError, check_line

# A record is about a kilobyte; a longer line is damage or an attack, not read into memory whole.
MAX_LINE_BYTES = 1 << 20
# What a record's target says about the CPU besides its capabilities (absent from older records).
CPU_IDENTITY = ("cpu", "features_digest")


class CorruptRecordWarning(UserWarning):
    """A record line that is not UTF-8 or JSON, or breaks the schema; it is skipped."""


@dataclass(frozen=True)
class Record:
    """One line of a record file that passed the schema."""

    data: Mapping
    line: int

    @property
    def task_ref(self):
        return self.data["task"]

    @property
    def target(self):
        return self.data["target"]

    @property
    def config(self):
        return Config.from_dict(self.data["config"])

    @property
    def evaluation(self):
        return Evaluation.from_dict(self.data["result"])

    @property
    def ok(self):
        return self.data["result"].get("status") == "ok"

    @property
    def seconds(self):
        return self.evaluation.seconds

    @property
    def gflops(self):
        return float(self.data.get("gflops") or 0.0)

    @property
    def judged_by(self):
        """"measured" or "modelled" ("" in records written before the field existed)."""
        return self.data.get("judged_by", "")

    def same_task(self, task):
        return same_task(self.task_ref, task)

    def same_target(self, target):
        """The same device, capabilities, CPU and features included (any device if target is None)."""
        # A record written before targets named their CPU matches on the capabilities alone.
        if target is None:
            return True
        recorded = identity_of(self.target)
        wanted = target.identity()
        for key in CPU_IDENTITY:
            if key not in recorded:
                wanted.pop(key, None)
        return recorded == wanted

    def same_judge(self, judged_by):
        """Judged the same way (a measured GPU time and a modelled one never mix); any if None."""
        return judged_by is None or self.judged_by in ("", judged_by)

    def matches(self, task, target, judged_by=None):
        """The same computation on the same device, judged the same way."""
        return self.same_task(task) and self.same_target(target) and self.same_judge(judged_by)

    @property
    def space(self):
        """{"name", "version"} of the space the point belongs to (records written before spaces had
        names are of the generated space, version 1)."""
        return self.data.get("space") or {"name": GENERATED, "version": 1}

    def same_space(self, space):
        """Whether the record is a point of this space (the same generator or template, same version)."""
        return self.space == space.identity()

    @property
    def schedule(self):
        """The Schedule the record measured, or None in records written before schedules were kept."""
        steps = self.data.get("schedule")
        return None if steps is None else Schedule.from_json(json.dumps(steps))

    def point_in(self, space):
        if not self.same_space(space):
            name = self.space["name"]
            raise SpaceError(f"a point of space '{name}' version {self.space['version']}, not of "
                             f"'{space.name}' version {space.version}")
        return point_in(space, self.config)


def point_in(space, config):
    """A config's point in today's space; SpaceError if a knob is unknown or missing or a value is
    not one of its knob's (the space changed since the config was written)."""
    names = {knob.name for knob in space.knobs}
    unknown = [name for name, _ in config.values if name not in names]
    if unknown:
        raise SpaceError(f"unknown knob '{unknown[0]}'")
    return space.point(config)


def identity_of(recorded):
    """A record's target as Target.identity() gives it, also where it holds the whole Target.to_dict()."""
    if "features" in recorded:
        try:
            return Target.from_dict(recorded).identity()
        except (TargetError, TypeError):
            pass
    return recorded


def target_label(recorded):
    """A record's target as people name it: its name, or "llvm -mcpu=..." for another machine's host target."""
    recorded = identity_of(recorded)
    name = recorded.get("name", "?")
    if name != "llvm" or "cpu" not in recorded:
        return name
    here = host_cpu().identity()
    if recorded["cpu"] != here["cpu"]:
        return f"llvm -mcpu={recorded['cpu']}"
    if recorded.get("features_digest") != here.get("features_digest"):
        return f"llvm -mcpu={recorded['cpu']} (other features, digest {recorded.get('features_digest')})"
    return name


def same_task(task_ref, task):
    """Whether a (checked) task reference names this task: the same name and arguments, and the same
    computation where the record says which (records written before fingerprints match by name)."""
    fingerprint = task_ref.get("fingerprint")
    return (task_ref["name"] == task.name and list(task_ref["args"]) == list(task.args)
            and (fingerprint is None or fingerprint == task.fingerprint))


def record_line(task, target, entry, method, seed, space, judged_by="measured"):
    """The JSON object logged for a history entry."""
    origin = None
    if entry.origin is not None:
        start, direction = entry.origin
        origin = {"start": list(start), "direction": int(direction),
                  "direction_name": space.direction_name(direction)}
    evaluation = entry.evaluation
    return {
        "task": task.ref(),
        "target": target.identity(),   # a CPU's features as a digest: records stay about a kilobyte
        "method": method,
        "judged_by": judged_by,
        "seed": seed,
        "trial": entry.trial,
        "point": list(entry.point),
        "config": space.config(entry.point).to_dict(),
        "space": space.identity(),
        "schedule": _schedule_steps(entry, space),  # replayable whatever the space becomes
        "origin": origin,
        "result": evaluation.to_dict(),
        "error": evaluation.error,
        "seconds": evaluation.seconds if math.isfinite(evaluation.seconds) else None,
        "gflops": entry.gflops,
        "elapsed": entry.elapsed,
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "version": version(),
    }


def _schedule_steps(entry, space):
    """The entry's schedule as step dicts: its key is that schedule's JSON already, so the search
    loop does not emit it again (an entry made without a key gets it from the space)."""
    if entry.schedule_key:
        return json.loads(entry.schedule_key)
    return [step.to_dict() for step in space.schedule(entry.point).steps]


class RecordWriter:
    """Appends records to a JSON-lines file under its advisory lock; each line reaches the disk
    before append returns."""

    def __init__(self, path):
        self.path = os.fspath(path)
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        self._file = open(self.path, "ab+")  # readable: append checks the last byte
        self._lock_depth = 0

    @contextlib.contextmanager
    def locked(self):
        """Hold the file's exclusive lock (flock) for a short critical section; sections nest."""
        if self._lock_depth == 0:
            _flock(self._file, fcntl.LOCK_EX, self.path)
        self._lock_depth += 1
        try:
            yield
        finally:
            self._lock_depth -= 1
            if self._lock_depth == 0:
                _flock(self._file, fcntl.LOCK_UN, self.path)

    def append(self, data, sync=True):
        """Append one line (synced unless sync=False: a claim need not survive a crash)."""
        with self.locked():
            size = os.fstat(self._file.fileno()).st_size
            # A killed writer may have left a torn line: start a fresh one, or ours is lost with it.
            torn = size > 0 and os.pread(self._file.fileno(), 1, size - 1) != b"\n"
            text = ("\n" if torn else "") + json.dumps(data) + "\n"  # insertion order: configs keep knob order
            self._file.write(text.encode("utf-8"))
            self._file.flush()
            if sync:
                os.fsync(self._file.fileno())

    def append_lines(self, lines):
        """Append whole lines written elsewhere (a sweep job's, searched on another machine), as they are, synced."""
        if not lines:
            return
        with self.locked():
            size = os.fstat(self._file.fileno()).st_size
            torn = size > 0 and os.pread(self._file.fileno(), 1, size - 1) != b"\n" and not lines.startswith(b"\n")
            self._file.write((b"\n" if torn else b"") + lines)
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self):
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _flock(file, operation, path):
    """flock, or a warning where the file system has none (a run alone on the file is still right)."""
    try:
        fcntl.flock(file.fileno(), operation)
    except OSError as err:
        if operation != fcntl.LOCK_UN:
            warnings.warn(f"{path}: cannot lock the record file ({err}); runs sharing it may evaluate a "
                          "config twice", RuntimeWarning, stacklevel=4)


def parse_line(raw):
    """A line's bytes as ("record" or "claim", its object); RecordSchemaError says what is wrong."""
    if len(raw) > MAX_LINE_BYTES:
        raise RecordSchemaError("line", f"line: longer than {MAX_LINE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RecordSchemaError("line", f"line: not UTF-8 (byte 0x{raw[err.start]:02x} at column "
                                        f"{err.start + 1})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise RecordSchemaError("line", f"line: not JSON ({err.msg} at column {err.colno})") from None
    except RecursionError:
        raise RecordSchemaError("line", "line: nested too deeply to read") from None
    except ValueError as err:  # an integer of more digits than Python converts
        raise RecordSchemaError("line", f"line: not JSON ({err})") from None
    return check_line(data, text), data


def read_lines(file, whole_only=False):
    """(line number, bytes without the newline) for each line of a binary file from where it stands.
    An overlong line is cut at MAX_LINE_BYTES + 1 bytes (parse_line rejects it) and the rest of it
    skipped unread. whole_only: stop before a last line that has no newline yet (a writer may be
    half way through it while the reader does not hold the lock), leaving the file there."""
    number = 0
    while True:
        start = file.tell()
        raw = file.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if not raw.endswith(b"\n"):
            if whole_only and len(raw) <= MAX_LINE_BYTES:
                file.seek(start)
                return
            rest = raw
            while rest and not rest.endswith(b"\n"):
                rest = file.readline(1 << 16)
        number += 1
        yield number, raw.rstrip(b"\r\n")


@dataclass(frozen=True)
class LoadedRecords:
    """A record file read back: its valid records, and (line, why) for each corrupt line."""

    records: tuple
    corrupt: tuple


def scan_records(path):
    """Every valid record of a file, in order, and its corrupt lines, each reported once as a
    warning naming the file, line and field; claim lines are skipped silently."""
    path = os.fspath(path)
    records, corrupt = [], []
    with open(path, "rb") as file:
        _flock(file, fcntl.LOCK_SH, path)  # no half-written line from a writer holding the lock
        for number, raw in read_lines(file):
            if not raw.strip():
                continue
            try:
                kind, data = parse_line(raw)
            except RecordSchemaError as err:
                warnings.warn(f"{path}:{number}: skipped a corrupt record ({err})", CorruptRecordWarning,
                              stacklevel=3)
                corrupt.append((number, str(err)))
                continue
            if kind == "record":
                records.append(Record(data, number))
    return LoadedRecords(tuple(records), tuple(corrupt))


def check_record_file(path):
    """ExplorationError when an existing file has lines but none is a record or a claim (appending would harm it)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        return
    first_bad = None
    with open(path, "rb") as file:
        for number, raw in read_lines(file):
            if not raw.strip():
                continue
            try:
                parse_line(raw)
            except RecordSchemaError as err:
                first_bad = first_bad or (number, err)
                continue
            return
    if first_bad:
        number, err = first_bad
        raise ExplorationError(f"{path}: not a record file (line {number}: {str(err).removeprefix('line: ')})")


def load_records(path):
    """Every valid record of a file, in order; each corrupt line is reported and skipped."""
    return list(scan_records(path).records)


def best_records(records, count=1, task=None, target=None, judged_by=None):
    """The `count` fastest successful records (of one task, target and judge, where given)."""
    chosen = [r for r in records if r.ok and (task is None or r.same_task(task)) and r.same_target(target)
              and r.same_judge(judged_by)]
    return sorted(chosen, key=lambda r: (r.seconds, r.line))[:count]
