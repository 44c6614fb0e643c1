"""A sweep's tuning jobs as tasks on a Ray cluster (`flexsched sweep SPEC --ray [ADDRESS]`).

Each job (case x target x contender x seed) is one Ray task that searches on whichever node has a
measurement slot free (explore.ray_cluster: one at a time per node by default). The record files
stay on this machine and only this process writes them: a job gets its file's lines as they are,
resumes from them in a file of its own on the node, and hands back the lines it added; they are
appended here, under the file's lock, when the job ends. So the files end as a run here would leave
them, but a job's points reach its file when the job ends, not one by one: a killed sweep keeps the
jobs it finished and searches the others again from their records. A job whose worker or node dies
is run again once, from the same lines (Ray's task retry); a job lost twice, or one that raised, is
reported after the other jobs have finished and their records are appended.
"""

from __future__ import annotations

import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import FlexschedError
from .sweep import Progress, job_records, tune_job


@dataclass(frozen=True)
class JobRequest:
    """What a node needs to search one job: the search's settings and its record file's bytes."""

    task: object
    target: object
    trials: int
    method: str
    space: str
    seed: int
    budget_s: float | None
    records: bytes | None     # the job's record file as it is here (None: it has none yet)
    cost_model: str | None = None    # the sweep's cost model (a name, or a saved model's file on every node)
    screen_ratio: int | None = None


@dataclass(frozen=True)
class JobReply:
    stop: str       # why the search stopped
    lines: bytes    # the record lines the job appended to its copy of the file
    host: str       # the node that searched it


def search_job(request):
    """Search one job on this node, in a copy of its record file; the lines it added (a Ray task)."""
    with tempfile.TemporaryDirectory(prefix="flexsched-job-") as folder:
        path = Path(folder) / "records.jsonl"
        if request.records is not None:
            path.write_bytes(request.records)
        stop = tune_job(request.task, request.target, request.trials, request.method, request.space, request.seed,
                        path, request.budget_s, lambda history: None, request.cost_model, request.screen_ratio)
        lines = path.read_bytes()[len(request.records or b""):] if path.exists() else b""
    return JobReply(stop, lines, socket.gethostname())


def search_on_cluster(spec, jobs, cluster, stream=None):
    """Search every job (sweep.Job) on the cluster; {record file: why its search stopped}."""
    from explore.ray_cluster import Connection, cause_of, lost_worker_errors
    from explore.records import RecordWriter

    budget = None
    if spec.time_budget_s is not None:
        budget = spec.time_budget_s / max(1, len(spec.tuners) * len(spec.seeds))
    stops, pending, failures = {}, {}, []
    progress = Progress(len(jobs), stream)
    with Connection(cluster) as connection:
        ray = connection.ray
        remote = ray.remote(search_job).options(max_retries=1, **connection.cluster.task_options())
        for job in jobs:
            if len(job_records(job.path, job.task, job.target)) >= spec.trials:
                stops[job.path] = "resumed"
                progress.finished += 1
                continue
            records = job.path.read_bytes() if job.path.exists() else None
            request = JobRequest(job.task, job.target, spec.trials, job.method, job.space, job.seed, budget, records,
                                 spec.cost_model, spec.screen_ratio)
            pending[remote.remote(request)] = job
        progress.where = connection.cluster.where()
        progress.line(f"{len(pending)} jobs sent, {connection.slots()} at a time")
        while pending:
            [ready], _ = ray.wait(list(pending), num_returns=1)
            job = pending.pop(ready)
            progress.where = job.where
            progress.finished += 1
            try:
                reply = ray.get(ready)
            except lost_worker_errors(ray) as err:
                failures.append(f"{job.where}: its Ray worker was lost twice ({type(err).__name__})")
                progress.line("lost")
                continue
            except ray.exceptions.RayTaskError as err:
                cause = cause_of(ray, err, connection.cluster)
                failures.append(f"{job.where}: {cause}")
                progress.line(f"failed: {cause}")
                continue
            with RecordWriter(job.path) as writer:
                writer.append_lines(reply.lines)
            stops[job.path] = reply.stop
            progress.line(f"searched on {reply.host} ({reply.stop})")
    if failures:
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        raise FlexschedError(failures[0] + more)
    return stops
