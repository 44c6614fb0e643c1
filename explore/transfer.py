"""Starts carried over from other tasks' records: of each task tuned before on the same target
(another layer of the same network, the same operator at another shape), the best config of each
kind of kernel it makes here (Space.family), moved to the nearest point of this task's space and
measured among the search's first starts. Not only the other task's best: a climb seldom crosses
from one kind to another, and the kind a 200-trial search ends in is partly chance (YOLO C1 on an
AVX-512 host ended in a channel-vectorised tile at 194 GFLOPS in one run and accumulating in memory
at 158 in another), so a layer started from its neighbour's best alone inherits that chance.

A config carries over where it splits every loop this task's space splits: each knob keeps its
value where this space offers it, else takes the nearest (split factors by ratio, the innermost
first; ordered choices by ratio). Knobs that only some shapes have may differ. A knob this space
lacks is dropped (a 1x1 convolution has no kernel loops to split; the CPU offers blocking an input
only where an extent is a multiple of the vector width); a choice knob the config lacks takes its
first value (for the knobs that come and go with the shape, blocking an input and the vectorised
axis, that is what a space without the knob does), and so does a choice that this space neither
offers nor has a value near (an axis vectorised in the other shape, whose extent here is no
multiple of the vector width). On an AVX2 host, YOLO C4's best (56x56, which has a knob for
blocking the weights) moved to C8 (28x28, which has none) ran at 0.93 of oneDNN, against 0.48 for
C8's own search, to which no earlier layer had carried over. On an AVX-512 host, C2's best,
vectorised along its 112 rows, moved to C4 (56 rows: vectorised along the columns instead) ran at
0.81, against 0.49 for C4's own search, to which it had not carried over.

A config without one of this space's splits (a 3x3 convolution's for a 1x1 one, whose rows and
columns merge into one axis, and the other way round; another operator's) is carried over by role
where the two computations correspond (analysis.roles): GMM's best is a start for a 1x1
convolution, its i, j, rk, A and B taking the names k, hw, rc, W and pad, and the knobs of nodes
without a counterpart (the padding copy) their first values. Else it is skipped.
"""

from __future__ import annotations

import functools
import json

from analysis import analyze
from analysis.roles import corresponding_names
from flexsched.errors import FlexschedError
from flexsched.registry import registered_task
from space.config import Config
from space.knobs import ChoiceKnob
from space.space import SpaceError

from .history import each_kind_first


def transferred_points(space, records, task, target, count, judged_by="measured", more=0):
    """Up to `count` distinct points of `space`: of each other task tuned on the same target, judged
    the same way, from a space of the same kind, the best successful record of each kind of kernel
    it moves to here (Space.family); the best of each kind first, fastest first. Then up to `more`
    further points, fastest first, of the broad kinds (Space.broad_family) the first ones cover: a
    broad kind they lack would join the search's rotation of kinds (explore.methods.FAMILY_TRIALS)
    only through a point not fast enough to come first. (YOLO C2, AVX-512: a row-vectorised point
    taken in sixth place brought its kind into the rotation, which then spent 53 of the 200 trials
    on it, 1.0 s a build, its best 107 GFLOPS against 304.)"""
    by_task = {}
    for record in records:
        if (not record.ok or record.same_task(task) or not record.same_target(target)
                or not record.same_judge(judged_by) or record.space["name"] != space.name):
            continue
        by_task.setdefault(json.dumps(record.task_ref, sort_keys=True), []).append(record)
    best_of_kind = {}   # (task, kind here) -> (record, point)
    for key, task_records in by_task.items():
        roles = _Roles(space, task_records[0].task_ref)
        for record in sorted(task_records, key=lambda r: (-r.gflops, r.line)):
            point = _moved(space, record, roles)
            if point is not None:
                best_of_kind.setdefault((key, space.family(point)), (record, point))
    points = []   # fastest first, each point once (two tasks' configs may move to one point)
    for _, point in sorted(best_of_kind.values(), key=lambda found: (-found[0].gflops, found[0].line)):
        if point not in points:
            points.append(point)
    first = each_kind_first(points, space.family)[:count]
    covered = {space.broad_family(point) for point in first}
    return first + [point for point in points if point not in first and space.broad_family(point) in covered][:more]


def _moved(space, record, roles):
    """The point of `space` nearest the record's config, moved by knob name or else by role; None
    where it does not carry over."""
    config = _in_knobs_of(space, record.config)
    if config is None:
        config = _by_role(space, record, roles)
    if config is None:
        return None
    try:
        return space.nearest_point(config)
    except SpaceError:
        return None


def _in_knobs_of(space, config, unmatched_nodes=()):
    """config with exactly the space's knobs (see the module's docstring); None where it lacks a split
    of a node other than unmatched_nodes, whose splits take their first values."""
    values = dict(config.values)
    moved = []
    for knob in space.knobs:
        if knob.name in values and not _lacks_choice(knob, values[knob.name]):
            moved.append((knob.name, values[knob.name]))
        elif isinstance(knob, ChoiceKnob) or _node_of(knob.name) in unmatched_nodes:
            moved.append((knob.name, knob.values[0]))
        else:
            return None
    return Config(tuple(moved))


def _lacks_choice(knob, value):
    """A choice this space neither offers nor has a value near: a vectorised axis another shape has
    (YOLO C2's best vectorises its 112 rows; C4's 56 rows are no multiple of the vector width)."""
    if not isinstance(knob, ChoiceKnob):
        return False
    try:
        knob.nearest_index(value)
    except ValueError:
        return True
    return False


class _Roles:
    """This space's names for one other task's nodes, loops and inputs of the same role (analysis.roles),
    worked out once for all that task's records: None where the computations do not correspond or
    the task is not registered in this process (a record never chooses code to import)."""

    def __init__(self, space, task_ref):
        self.space, self.task_ref = space, task_ref

    @functools.cached_property
    def names(self):
        try:
            return corresponding_names(analyze(registered_task(self.task_ref)), self.space.info)
        except FlexschedError:
            return None


def _by_role(space, record, roles):
    """The record's config with its knobs renamed to this space's nodes, loops and inputs of the same
    role, in this space's knobs; None where the computations do not correspond."""
    names = roles.names
    if names is None:
        return None
    renamed = []
    for knob_name, value in record.config.values:
        if _node_of(knob_name) not in names:
            continue   # a node that does not reduce has no counterpart
        node, node_names = names[_node_of(knob_name)]
        parts = [node] + [node_names.get(part, part) for part in knob_name.split(".")[1:]]
        renamed.append((".".join(parts), node_names.get(value, value) if isinstance(value, str) else value))
    matched = {node for node, _ in names.values()}
    unmatched = [node.name for node in space.info.nodes if node.name not in matched]
    return _in_knobs_of(space, Config(tuple(renamed)), unmatched)


def _node_of(knob_name):
    """The node a knob belongs to: knob names start with it ("O.split.k", "pad.attach")."""
    return knob_name.split(".", 1)[0]
