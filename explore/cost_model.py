"""Learned cost models: fit on measured candidates, predict a score to rank new ones by.

A model sees a candidate only through its features (codegen.features, reached through
flexsched.plugins: the loop IR's statements, accesses and loops, or the loop nest as a graph) and
learns to rank within a group, one group per task: its target is the group's best time over the
candidate's time (1 for the fastest, 0 for a failure), so what it learns transfers between tasks of
different sizes. Every model has the same interface: fit(samples) (again, to refit or to go on from
a saved model), scores(features) (higher is faster), and save/load to one JSON file.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from flexsched import plugins
from flexsched.errors import FlexschedError

FORMAT = "flexsched-cost-model"
FORMAT_VERSION = 1


class CostModelError(FlexschedError, ValueError):
    """An unknown model, a missing optional library, or a model file that cannot be read."""


@dataclass(frozen=True)
class Sample:
    """One judged candidate: its features, seconds per run (inf when it failed) and its group (the task)."""

    features: object   # codegen.features.CandidateFeatures
    seconds: float
    group: str


def relative_speed(samples):
    """Each sample's group-best seconds over its own (1 for the fastest of its group, 0 for a failure)."""
    best = {}
    for sample in samples:
        if math.isfinite(sample.seconds) and sample.seconds > 0:
            best[sample.group] = min(best.get(sample.group, math.inf), sample.seconds)
    return np.asarray([best[s.group] / s.seconds if math.isfinite(s.seconds) and s.seconds > 0 else 0.0
                       for s in samples], dtype=np.float32)


class CostModel(ABC):
    """Ranks candidates: fit on judged samples, score unjudged features (higher means faster)."""

    name = "model"

    @property
    @abstractmethod
    def trained(self):
        """Whether the model has learned anything yet (from fit or a saved file)."""

    @abstractmethod
    def fit(self, samples):
        """Learn from samples (a list of Sample); a model that was trained goes on from what it knew."""

    @abstractmethod
    def scores(self, features):
        """A float array, one score per CandidateFeatures: higher is predicted faster."""

    @abstractmethod
    def state(self):
        """The model's learned state as JSON-ready data."""

    @abstractmethod
    def restore(self, state):
        """Take back what state() gave."""

    def save(self, path):
        """Write the model to a JSON file (load_model reads it back)."""
        save_model(self, path)


def save_model(model, path):
    """Write model to path as JSON: the format, the model's name, its feature version and state."""
    document = {"format": FORMAT, "version": FORMAT_VERSION, "model": model.name, "state": model.state()}
    with open(path, "w") as file:
        json.dump(document, file)


def load_model(path):
    """The cost model saved in path (save_model), ready to rank and to be refitted."""
    try:
        with open(path) as file:
            document = json.load(file)
    except OSError as err:
        raise CostModelError(f"{path}: cannot read the cost model ({err.strerror or err})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CostModelError(f"{path}: not a saved cost model ({err})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise CostModelError(f"{path}: not a saved cost model (no '{FORMAT}' format field)")
    if document.get("version") != FORMAT_VERSION or document.get("model") not in MODELS:
        raise CostModelError(f"{path}: a cost model of format version {document.get('version')} and kind "
                             f"{document.get('model')!r}, which this flexsched cannot read")
    model = make_model(document.get("model"))
    model.restore(document["state"])
    return model


MODELS = {"xgb": "explore.xgb_model", "gnn": "explore.gnn_model"}


def make_model(name, **options):
    """A new, untrained cost model called name (xgb or gnn)."""
    import importlib

    if name not in MODELS:
        raise CostModelError(f"unknown cost model '{name}'; choose one of {', '.join(MODELS)}")
    module = importlib.import_module(MODELS[name])
    return module.MODEL(**options)


def model_from(spec):
    """A CostModel from a name (a new model), a path to a saved one, or a CostModel itself."""
    if isinstance(spec, CostModel):
        return spec
    if isinstance(spec, str) and spec in MODELS:
        return make_model(spec)
    if isinstance(spec, str) and (spec.endswith(".json") or "/" in spec):
        return load_model(spec)
    raise CostModelError(f"cost model '{spec}': neither a model name ({', '.join(MODELS)}) nor a saved "
                         "model file (.json)")


def features_for(task, target, schedules, info=None):
    """The CandidateFeatures of task under each schedule on target (None where lowering fails)."""
    features = plugins.featurizer(target)
    found = []
    for schedule in schedules:
        try:
            found.append(features(task, schedule, target, info))
        except FlexschedError:
            found.append(None)
    return found


def _seconds(record):
    return record.seconds if record.ok else math.inf


def samples_from_records(paths, judged_by="measured"):
    """Samples of every record in the files that can be replayed here, one group per task and
    target, a candidate measured more than once taken once at its fastest time (the measurement least
    disturbed); (samples, number of records skipped: their task unknown here or their schedule not lowerable)."""
    from flexsched.registry import task_from_ref
    from flexsched.target import get_target

    from analysis import analyze

    from .records import load_records

    grouped = {}
    skipped = 0
    for path in paths:
        if not os.path.isfile(path):
            raise CostModelError(f"no record file '{path}'")
        for record in load_records(path):
            if record.schedule is None or not record.same_judge(judged_by):
                skipped += 1
                continue
            key = (json.dumps(record.task_ref, sort_keys=True), record.target.get("name", ""))
            candidates = grouped.setdefault(key, {})
            schedule = record.schedule.to_json()
            known = candidates.get(schedule)
            if known is None or _seconds(record) < _seconds(known):
                candidates[schedule] = record
    samples = []
    for (task_key, target_name), by_schedule in grouped.items():
        records = list(by_schedule.values())
        try:
            task = task_from_ref(json.loads(task_key))
            target = get_target(target_name or "llvm")
        except (FlexschedError, LookupError, TypeError, ValueError) as err:
            warnings.warn(f"{len(records)} records of {task_key} skipped: {err}", stacklevel=2)
            skipped += len(records)
            continue
        info = analyze(task)
        group = f"{task} on {target.name}"
        for record, features in zip(records, features_for(task, target, [r.schedule for r in records], info)):
            if features is None:
                skipped += 1
                continue
            samples.append(Sample(features, record.seconds if record.ok else math.inf, group))
    return samples, skipped
