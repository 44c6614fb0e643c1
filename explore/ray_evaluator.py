"""An evaluator that measures a search's candidates on the nodes of a Ray cluster.

Each candidate is one Ray task. On the node that runs it, the target kind's own evaluator (for a CPU
or a GPU, the measuring one: an isolated worker that builds the candidate, checks it against the
reference and times it) judges it, so a candidate is still built, checked and timed in isolation on
the machine that times it; that evaluator stays alive in the Ray worker between candidates, so its
worker and its reference outputs are reused. The search hands over as many candidates at once as the
cluster has measurement slots (batch_size), and the Evaluations come back in order, to be recorded
by the search on this machine as any other.

A candidate whose Ray worker or node dies while judging it is sent again once (Ray's task retry);
if that one is lost too, it becomes an Evaluation with status "worker_lost" and the search goes on.
The other candidates of the batch are not touched. A task whose reference outputs cannot be computed
stops the search (ExplorationError), as it does without Ray.
"""

from __future__ import annotations

import atexit
import math
import pickle

from flexsched.target import get_target

from .evaluator import Evaluation, Evaluator, evaluator_for
from .ray_cluster import Cluster, Connection, cause_of, lost_worker_errors

WORKER_LOST = "worker_lost"


class RayEvaluator(Evaluator):
    """Measures points on a Ray cluster (explore.ray_cluster.Cluster, an address, or True: a local
    one) with the target kind's evaluator `evaluator` (its default if None) and its options."""

    def __init__(self, target="llvm", cluster=True, evaluator=None, **options):
        self.target = get_target(target)
        self.cluster = Cluster.of(cluster)
        # Made here too, so that a wrong name or option fails now and the records say how points were judged.
        probe = evaluator_for(self.target, evaluator, **options)
        probe.close()
        self.name = f"ray:{probe.name}"
        self.judged_by = probe.judged_by
        self._judge = (self.target, evaluator, options)
        self._connection = Connection(self.cluster).open()
        self.batch_size = self._connection.slots()
        ray = self._connection.ray
        options = self.cluster.task_options()
        self._evaluate = ray.remote(_evaluate_on_node).options(max_retries=1, **options)
        self._check = ray.remote(_check_on_node).options(max_retries=1, **options)

    def check(self, task):
        """The node evaluator's own refusals (a CPU the node cannot run, a task too large for it), asked on a node."""
        self._get(self._check.remote(self._judge, task))

    def evaluate(self, task, space, points):
        ray = self._connection.ray
        task_ref, info_ref = ray.put(task), ray.put(space.info)
        pending = [self._evaluate.remote(self._judge, task_ref, info_ref, space.schedule(point), space.config(point))
                   for point in points]
        results = []
        for ref in pending:
            try:
                results.append(self._get(ref))
            except lost_worker_errors(ray) as err:
                results.append(Evaluation(WORKER_LOST, math.inf, "its Ray worker was lost twice: "
                                          + " ".join(f"{type(err).__name__}: {err}".split())[:300]))
        return results

    def _get(self, ref):
        """ray.get, raising what the remote call raised (an ExplorationError stays one)."""
        ray = self._connection.ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as err:
            raise cause_of(ray, err, self.cluster) from None

    def close(self):
        self._connection.close()


class OnePoint:
    """The part of a Space a node's evaluator reads, for the one point 0 (a Space itself holds functions
    and does not travel)."""

    def __init__(self, info, schedule, config):
        self.info = info
        self._schedule = schedule
        self._config = config

    def schedule(self, point):
        return self._schedule

    def config(self, point):
        return self._config


_node = {"judge": None, "evaluator": None}   # this Ray worker's evaluator, kept between candidates


def _node_evaluator(judge):
    """The evaluator judge (target, name, options) names, made once per Ray worker and kept."""
    key = pickle.dumps(judge)
    if _node["judge"] != key:
        if _node["evaluator"] is not None:
            _node["evaluator"].close()
        target, name, options = judge
        _node["evaluator"], _node["judge"] = evaluator_for(target, name, **options), key
    return _node["evaluator"]


def _close_node_evaluator():
    if _node["evaluator"] is not None:
        _node["evaluator"].close()


atexit.register(_close_node_evaluator)


def _evaluate_on_node(judge, task, info, schedule, config):
    """One candidate judged on the node running this Ray task."""
    return _node_evaluator(judge).evaluate(task, OnePoint(info, schedule, config), [0])[0]


def _check_on_node(judge, task):
    _node_evaluator(judge).check(task)
