"""Claims: runs that append to one record file at once never evaluate the same config twice.

Before a run evaluates points it takes the file's lock (flock, held only for short sections),
reads what was appended since its last look, and for each point either reuses a record of it
(same task, target and judge: another run already evaluated it), or waits while another run's
claim on it is live, or appends a claim line for it and evaluates it once the lock is released.
A claim lapses when its run wrote an "ended" line (it closed), when its process is gone (same
host), or claim_seconds after it was made (other hosts, hung runs, forged lines): no file can
block a run for longer. A run only waits after its own claims are recorded, so two runs never
wait on each other. Loaders skip claim lines silently.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass

from space.config import Config
from space.space import GENERATED

from .records import Record, RecordWriter, parse_line, point_in, read_lines
from .record_schema import RecordSchemaError
from .search import EVALUATE, WAIT

# A claim outlives the slowest honest evaluation: a batch of candidates, each with its build and
# the measurer's timeout (60 s by default).
CLAIM_SECONDS = 900.0
POLL_SECONDS = (0.02, 1.0)  # the first and the longest pause while waiting for another run


@dataclass(frozen=True)
class Claim:
    """Another run's claim on a point: who made it, and when."""

    run: str
    pid: int
    host: str
    time: float


def scope_of(task, target, judged_by, space=None):
    """The digest that claim lines carry for a task on a target judged one way, in one space (a short line)."""
    identity = space.identity() if space is not None and space.name != GENERATED else None
    text = json.dumps([task.name, list(task.args), task.fingerprint, target.to_dict(), judged_by]
                      + ([identity] if identity else []),
                      sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def process_alive(pid):
    """Whether a process of this host has this id (one we may not signal is alive)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # no such process (or an id no process can have)
        return False
    except PermissionError:  # another user's
        pass
    return True


class SharedRecords:
    """A record file shared with concurrent runs of any task: this run's claims and records."""

    def __init__(self, path, task, target, space, judged_by, line_of, claim_seconds=CLAIM_SECONDS):
        self.path = os.fspath(path)
        self.task = task
        self.target = target
        self.space = space
        self.judged_by = judged_by
        self.line_of = line_of          # an Entry -> its record line
        self.claim_seconds = claim_seconds
        self.run = uuid.uuid4().hex
        self.host = socket.gethostname()
        self.scope = scope_of(task, target, judged_by, space)
        self._writer = RecordWriter(self.path)
        self._reader = open(self.path, "rb")
        self._results = {}   # schedule key -> Evaluation recorded by any run
        self._claims = {}    # schedule key -> the latest Claim of another run
        self._ended = set()  # runs that closed: their claims lapsed

    def claim(self, proposals):
        """For each proposal: a recorded Evaluation to reuse, EVALUATE (now claimed by this run), or
        WAIT (another run's live claim)."""
        self._catch_up()  # the bulk outside the lock (whole lines only), so other writers seldom wait
        with self._writer.locked():
            self._catch_up()
            verdicts = [self._verdict(p.schedule_key) for p in proposals]
            self._claim([p for p, verdict in zip(proposals, verdicts) if verdict is EVALUATE])
        return verdicts

    def wait(self, proposals):
        """For each proposal: its Evaluation once another run records it, or EVALUATE once that run's
        claim lapses (then claimed by this run). Blocks until each is one or the other."""
        verdicts = [WAIT] * len(proposals)
        pause, longest = POLL_SECONDS
        while WAIT in verdicts:
            time.sleep(pause)
            pause = min(2 * pause, longest)
            with self._writer.locked():
                self._catch_up()
                fresh = []
                for index, proposal in enumerate(proposals):
                    if verdicts[index] is WAIT:
                        verdicts[index] = self._verdict(proposal.schedule_key)
                        if verdicts[index] is EVALUATE:
                            fresh.append(proposal)
                self._claim(fresh)
        return verdicts

    def record(self, entry):
        """Append the record of a point this run evaluated (synced before this returns)."""
        self._writer.append(self.line_of(entry))

    def close(self):
        """Say this run ended (whatever it claimed and did not record is free again) and close."""
        try:
            self._writer.append({"claim": self._signature() | {"ended": True}}, sync=False)
        finally:
            self._writer.close()
            self._reader.close()

    def _signature(self):
        return {"run": self.run, "pid": os.getpid(), "host": self.host, "time": time.time()}

    def _claim(self, proposals):
        if proposals:
            configs = [self.space.config(p.point).to_dict() for p in proposals]
            self._writer.append({"claim": self._signature() | {"scope": self.scope, "configs": configs}},
                                sync=False)

    def _verdict(self, key):
        if key in self._results:
            return self._results[key]
        claim = self._claims.get(key)
        return WAIT if claim is not None and self._live(claim) else EVALUATE

    def _live(self, claim):
        if claim.run in self._ended or abs(time.time() - claim.time) > self.claim_seconds:
            return False
        return claim.host != self.host or process_alive(claim.pid)

    def _catch_up(self):
        """Read the whole lines appended since the last look; under the lock, that is every line."""
        for _, raw in read_lines(self._reader, whole_only=True):
            self._take(raw)

    def _take(self, raw):
        try:
            kind, data = parse_line(raw)
        except RecordSchemaError:  # loading reports it, with its line number; here it is just not a point
            return
        if kind == "claim":
            self._take_claim(data["claim"])
            return
        record = Record(data, 0)
        if not record.matches(self.task, self.target, self.judged_by):
            return
        # The same schedule is the same candidate, whichever space proposed it.
        key = json.dumps(record.data["schedule"]) if "schedule" in record.data else self._key(record.data["config"])
        if key is not None:
            self._results.setdefault(key, record.evaluation)

    def _take_claim(self, claim):
        if claim.get("ended"):
            self._ended.add(claim["run"])
            return
        if claim["scope"] != self.scope or claim["run"] == self.run:
            return
        made = Claim(claim["run"], claim["pid"], claim["host"], float(claim["time"]))
        for config in claim["configs"]:
            key = self._key(config)
            if key is not None:
                self._claims[key] = made

    def _key(self, config):
        """The schedule key of a config in today's space; None if it does not fit."""
        try:
            point = point_in(self.space, Config.from_dict(config))
        except ValueError:  # SpaceError
            return None
        return self.space.schedule(point).to_json()
