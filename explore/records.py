"""Tuning records: one JSON line per evaluated point, appended, flushed and synced at once.

A line holds everything needed to trust or replay it: the task (name and arguments), the target
with its capabilities, the method and seed, the point and its config, how the point was reached,
the result with its error, the time stamp and the project version. A killed run leaves at most
one torn last line; loading reports each corrupt line (file and line number) as a warning and
skips it, and the next append starts on a fresh line.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import warnings
from dataclasses import dataclass
from typing import Mapping

from space.config import Config

from .evaluator import Evaluation

RECORD_FIELDS = ("task", "target", "config", "result")


class CorruptRecordWarning(UserWarning):
    """A record line that is not valid JSON or misses a field; it is skipped."""


@dataclass(frozen=True)
class Record:
    """One line of a record file."""

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

    def matches(self, task, target, judged_by=None):
        """The same computation on the same device (capabilities included; any device if target is
        None), judged the same way (a measured GPU time and a modelled one never mix)."""
        same_task = self.task_ref.get("name") == task.name and list(self.task_ref.get("args", ())) == list(task.args)
        same_judge = judged_by is None or self.judged_by in ("", judged_by)
        return same_task and same_judge and (target is None or self.target == target.to_dict())


def record_line(task, target, entry, method, seed, space, judged_by="measured"):
    """The JSON object logged for a history entry."""
    from flexsched import __version__

    origin = None
    if entry.origin is not None:
        start, direction = entry.origin
        origin = {"start": list(start), "direction": int(direction),
                  "direction_name": space.direction_name(direction)}
    evaluation = entry.evaluation
    return {
        "task": task.ref(),
        "target": target.to_dict(),
        "method": method,
        "judged_by": judged_by,
        "seed": seed,
        "trial": entry.trial,
        "point": list(entry.point),
        "config": space.config(entry.point).to_dict(),
        "origin": origin,
        "result": evaluation.to_dict(),
        "error": evaluation.error,
        "seconds": evaluation.seconds if math.isfinite(evaluation.seconds) else None,
        "gflops": entry.gflops,
        "elapsed": entry.elapsed,
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "version": __version__,
    }


class RecordWriter:
    """Appends records to a JSON-lines file; each line reaches the disk before append returns."""

    def __init__(self, path):
        self.path = os.fspath(path)
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        self._file = open(self.path, "a+", encoding="utf-8")
        self._file.seek(0, os.SEEK_END)
        if self._file.tell() > 0:  # a killed run may have left a torn line: start a fresh one
            self._file.seek(self._file.tell() - 1)
            last = self._file.read(1)
            self._file.seek(0, os.SEEK_END)
            if last != "\n":
                self._file.write("\n")

    def append(self, data):
        self._file.write(json.dumps(data) + "\n")  # insertion order: configs keep knob order
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self):
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def load_records(path):
    """Every valid record of a file, in order; each corrupt line is reported and skipped."""
    path = os.fspath(path)
    records = []
    with open(path, encoding="utf-8") as lines:
        for number, text in enumerate(lines, 1):
            if not text.strip():
                continue
            try:
                data = json.loads(text)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
                missing = [name for name in RECORD_FIELDS if name not in data]
                if missing:
                    raise ValueError(f"missing {', '.join(missing)}")
                Evaluation.from_dict(data["result"])
            except (ValueError, KeyError, TypeError) as err:
                warnings.warn(f"{path}:{number}: skipped a corrupt record ({err})", CorruptRecordWarning,
                              stacklevel=2)
                continue
            records.append(Record(data, number))
    return records


def best_records(records, count=1, task=None, target=None, judged_by=None):
    """The `count` fastest successful records (of one task and target, judged one way, when given)."""
    chosen = [r for r in records if r.ok and (task is None or r.matches(task, target, judged_by))]
    return sorted(chosen, key=lambda r: (r.seconds, r.line))[:count]
