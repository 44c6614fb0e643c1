"""A Ray cluster to measure on: which one (a local one or an address), and how many measurements each node takes at once.

Timing on one machine is only trustworthy when nothing else runs there, so every measurement (a
tuning job of a sweep, or one candidate of a search) asks for a share of the custom resource
MEASURE_RESOURCE, and each node offers one unit of it: by default a node measures one thing at a
time. A local cluster started here offers it; the nodes of a cluster of your own offer it when
started with `ray start ... --resources='{"flexsched_measure": 1}'`. per_node > 1 lets each node
take that many at once (each asks for 1/per_node), for when throughput matters more than quiet.

Ray is an optional extra: nothing imports it until a cluster is asked for, and then its absence is
one line saying what to install.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass

from flexsched.errors import FlexschedError

MEASURE_RESOURCE = "flexsched_measure"
INSTALL_HINT = "Ray is not installed: pip install 'flexsched[distributed]'"
REACH_TIMEOUT_S = 5.0
LOCAL = "local"   # Ray's address for a new local cluster, even where one was started with `ray start`


class ClusterError(FlexschedError, RuntimeError):
    """Ray is missing, the cluster cannot be reached, or no node of it offers measurement slots."""


def import_ray():
    """The ray module, or ClusterError with the line saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ClusterError(INSTALL_HINT) from None
    return ray


@dataclass(frozen=True)
class Cluster:
    """Where to measure: address None starts a local cluster ("auto": the one `ray start` started on
    this machine; "HOST:PORT": any); per_node: measurements each node takes at once."""

    address: str | None = None
    per_node: int = 1

    def __post_init__(self):
        if isinstance(self.per_node, bool) or not isinstance(self.per_node, int) or self.per_node < 1:
            raise ClusterError(f"per_node must be a whole number of at least 1, got {self.per_node!r}")

    @classmethod
    def of(cls, value):
        """A Cluster from what a user passes: True (a local cluster), an address, or a Cluster."""
        if isinstance(value, Cluster):
            return value
        if value is True or value in ("", None):
            return cls()
        if isinstance(value, str):
            return cls(value)
        raise ClusterError(f"ray must be True, a cluster address or an explore.ray_cluster.Cluster, got {value!r}")

    def where(self):
        return "a local Ray cluster" if self.address in (None, LOCAL) else f"the Ray cluster at {self.address}"

    def task_options(self):
        """The resources one measurement asks for (its CPUs are the node's business, not Ray's count)."""
        return {"num_cpus": 0, "resources": {MEASURE_RESOURCE: 1.0 / self.per_node}}


class Connection:
    """This process's link to a cluster: made on entering (unless Ray is already initialised here, then
    that one is used and left open), closed on leaving if it was made here."""

    def __init__(self, cluster):
        self.cluster = Cluster.of(cluster)
        self.ray = import_ray()
        self._started = False

    def open(self):
        ray = self.ray
        if not ray.is_initialized():
            options = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
            if self.cluster.address in (None, LOCAL):
                options.update(address=LOCAL, resources={MEASURE_RESOURCE: 1})
            else:
                _check_reachable(self.cluster)   # Ray itself keeps trying for minutes
                options.update(address=self.cluster.address)
            try:
                ray.init(**options)
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise ClusterError(f"cannot reach {self.cluster.where()}: {' '.join(str(err).split())}") from None
            self._started = True
        if self.slots() == 0:
            self.close()
            raise ClusterError(f"no node of {self.cluster.where()} offers the '{MEASURE_RESOURCE}' resource: start "
                               f"each node with ray start ... --resources='{{\"{MEASURE_RESOURCE}\": 1}}'")
        return self

    def slots(self):
        """How many measurements the cluster's live nodes take at once."""
        offered = self.ray.cluster_resources().get(MEASURE_RESOURCE, 0.0)
        return int(offered * self.cluster.per_node + 1e-6)

    def close(self):
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()
        self._started = False

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc_info):
        self.close()


def _check_reachable(cluster):
    """ClusterError at once if nothing listens at a HOST:PORT (or ray://HOST:PORT) address."""
    host, _, port = cluster.address.partition("://")[2 if "://" in cluster.address else 0].rpartition(":")
    if not host or not port.isdigit():
        return   # "auto", or a form Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=REACH_TIMEOUT_S).close()
    except OSError as err:
        raise ClusterError(f"cannot reach {cluster.where()}: {err.strerror or err}") from None


def lost_worker_errors(ray):
    """The exceptions ray.get raises when a task's worker or node is gone (after its retries), not
    when the task itself raised."""
    exceptions = ray.exceptions
    names = ("WorkerCrashedError", "NodeDiedError", "OwnerDiedError", "ObjectLostError", "ActorDiedError",
             "TaskUnschedulableError", "LocalRayletDiedError", "OutOfMemoryError")
    return tuple(getattr(exceptions, name) for name in names if hasattr(exceptions, name))


def cause_of(ray, err, cluster):
    """What a remote task raised, to raise here: a FlexschedError as it was; anything else (a node
    without flexsched's code, a bug) as a one-line ClusterError."""
    cause = getattr(err, "cause", None) if isinstance(err, ray.exceptions.RayTaskError) else err
    if isinstance(cause, FlexschedError):
        return cause
    lines = str(cause).strip().splitlines() or [""]
    return ClusterError(f"a task failed on {cluster.where()}: {type(cause).__name__}: {lines[0][:300]}")
