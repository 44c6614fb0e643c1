"""Record files read back into this process: a resumed history and why records were left out,
the best record that fits today's space, and the task a record names.

Nothing a record says chooses code to run: a task is looked up among those registered in this
process (the operator library, and whatever the user imported), never imported by module name.
A record that does not fit today's space (the space generator changed since it was written) is
reported with its file and line and skipped, like a corrupt one.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

from .evaluator import Evaluation, ExplorationError
from .history import History
from .records import LoadedRecords, best_records, scan_records, target_label

# Why --resume leaves a record out, in the order a record is checked.
REASONS = ("task", "target", "judge", "other_space", "space", "duplicate", "corrupt")
REASON_TEXT = {"task": "of another task", "target": "of another target or its capabilities",
               "judge": "judged another way (measured against modelled)",
               "other_space": "of another space (a template, or another version)", "space": "not in today's space",
               "duplicate": "duplicates", "corrupt": "corrupt"}
# After a space change every record of a task misfits: a few lines say which, the report counts all.
MAX_MISFIT_WARNINGS = 10


class MisfitRecordWarning(UserWarning):
    """A record whose config is not a point of today's space; it is skipped."""


@dataclass(frozen=True)
class ResumeReport:
    """What a resumed run took from its record file: how many records, and why it left the rest."""

    path: str
    used: int
    ignored: tuple = ()  # (reason, count) in REASONS order, counts above zero only

    def count(self, reason):
        return dict(self.ignored).get(reason, 0)

    def line(self):
        """One line for people: 'resumed 12 records from run.jsonl; ignored 3: 2 corrupt, 1 duplicates'."""
        text = f"resumed {self.used} record{'s' if self.used != 1 else ''} from {self.path}"
        if self.ignored:
            total = sum(count for _, count in self.ignored)
            text += f"; ignored {total}: " + ", ".join(f"{count} {REASON_TEXT[reason]}"
                                                       for reason, count in self.ignored)
        return text


def resume_history(path, task, target, space, judged_by=None):
    """(History of the file's records of this task and target judged the same way, ResumeReport).
    A missing file resumes nothing."""
    path = os.fspath(path)
    history = History(space.info.flops, space.info.compulsory_bytes)
    loaded = scan_records(path) if os.path.exists(path) else LoadedRecords((), ())
    counts = dict.fromkeys(REASONS, 0)
    counts["corrupt"] = len(loaded.corrupt)
    misfits = Misfits(path, task)
    for record in loaded.records:
        reason = _mismatch(record, task, target, judged_by, space)
        point = misfits.point(record, space) if reason is None else None
        if reason is None and point is None:
            reason = "space"
        if reason is None:
            key = space.schedule(point).to_json()
            if history.is_visited(point) or history.entry_for_key(key) is not None:
                reason = "duplicate"
        if reason is not None:
            counts[reason] += 1
            continue
        history.add(point, key, Evaluation.from_dict(record.data["result"]), record.data.get("elapsed", 0.0),
                    _origin(record, space))
    misfits.summarise()
    report = ResumeReport(path, len(history), tuple((reason, count) for reason, count in counts.items() if count))
    return history, report


def _origin(record, space):
    """(start point, direction) a record's point was reached by, or None where it names a direction
    this space does not have (written by another revision of the space, whose moves differ)."""
    origin = record.data.get("origin")
    if origin is None:
        return None
    direction = int(origin["direction"])
    if direction >= space.num_directions or len(origin["start"]) != space.num_knobs:
        return None
    if origin.get("direction_name", space.direction_name(direction)) != space.direction_name(direction):
        return None
    return tuple(origin["start"]), direction


def _mismatch(record, task, target, judged_by, space):
    """Why a record is not of this run ("task", "target", "judge" or "other_space"), or None."""
    if not record.same_task(task):
        return "task"
    if not record.same_target(target):
        return "target"
    if not record.same_judge(judged_by):
        return "judge"
    if not record.same_space(space):
        return "other_space"
    return None


class Misfits:
    """Reports records that do not fit today's space: the first few by line, then a count."""

    def __init__(self, path, task, limit=MAX_MISFIT_WARNINGS):
        self.path = path
        self.task = task
        self.limit = limit
        self.count = 0

    def point(self, record, space):
        """The record's point in the space, or None (reported) where it does not fit."""
        try:
            return record.point_in(space)
        except ValueError as err:  # SpaceError
            self.count += 1
            if self.count <= self.limit:
                warnings.warn(f"{self.path}:{record.line}: skipped a record of {self.task} that does not fit "
                              f"today's space ({err})", MisfitRecordWarning, stacklevel=4)
            return None

    def summarise(self):
        if self.count > self.limit:
            warnings.warn(f"{self.path}: skipped {self.count - self.limit} more records of {self.task} that do not "
                          "fit today's space", MisfitRecordWarning, stacklevel=4)


def best_replayable_record(path, records, task, target, space_of):
    """(record, schedule): the fastest successful record of the task on the target with a schedule
    to replay: its own, or (in records written before schedules were kept) its config's in today's
    space, `space_of()`, made only when needed."""
    misfits = Misfits(os.fspath(path), task)
    space = None
    for record in best_records(records, len(records), task, target):
        if record.schedule is not None:
            return record, record.schedule
        space = space or space_of()
        point = misfits.point(record, space)
        if point is not None:
            return record, space.schedule(point)
    misfits.summarise()
    fits = " that fits today's space" if misfits.count else ""
    raise ExplorationError(_none_for(path, records, task, target) + fits)


def _none_for(path, records, task, target):
    """One line: no successful record (of task) for the target, and of which targets the file has them."""
    of_task = f" of {task}" if task is not None else ""
    others = sorted({target_label(record.target) for record in records
                     if record.ok and (task is None or record.same_task(task)) and not record.same_target(target)
                     and record.target.get("kind") == target.kind})
    if target.kind == "cpu" and others:
        return (f"{path}: no successful record{of_task} for this CPU ({target.name} on {target.cpu}); "
                f"the file's are of {', '.join(others)}")
    return f"{path}: no successful record{of_task} on {target.name}"


def task_of_best_record(path, records, target):
    """The task of the fastest successful record on the target, if it is registered in this process."""
    from flexsched.errors import FlexschedError
    from flexsched.registry import registered_task

    best = best_records(records, 1, None, target)
    if not best:
        raise ExplorationError(_none_for(path, records, None, target))
    try:
        return registered_task(best[0].task_ref)
    except FlexschedError as err:
        raise ExplorationError(f"{path}:{best[0].line}: {err}") from None
