"""Starts carried over from other tasks' records: the best config of each task tuned before on the
same target (another layer of the same network, the same operator at another shape), moved to the
nearest point of this task's space and measured among the search's first starts.

A config carries over where this task's space has the same knobs: each knob keeps its value where
this space offers it, else takes the nearest (split factors by ratio, ordered choices by ratio);
a record of a space with other knobs (another operator, another loop structure such as a 3x3
against a 1x1 convolution) does not carry over and is skipped.
"""

from __future__ import annotations

import json

from space.space import SpaceError


def transferred_points(space, records, task, target, count, judged_by="measured"):
    """Up to `count` distinct points of `space`: the best successful record of each other task on
    the same target, judged the same way, from a space of the same kind, fastest task first."""
    best_of_task = {}
    for record in records:
        if (not record.ok or record.same_task(task) or not record.same_target(target)
                or not record.same_judge(judged_by) or record.space["name"] != space.name):
            continue
        key = json.dumps(record.task_ref, sort_keys=True)
        if key not in best_of_task or record.gflops > best_of_task[key].gflops:
            best_of_task[key] = record
    points, knob_names = [], {knob.name for knob in space.knobs}
    for record in sorted(best_of_task.values(), key=lambda r: (-r.gflops, r.line)):
        config = record.config
        if {name for name, _ in config.values} != knob_names:
            continue
        try:
            point = space.nearest_point(config)
        except SpaceError:
            continue
        if point not in points:
            points.append(point)
        if len(points) == count:
            break
    return points
