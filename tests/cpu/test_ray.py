"""Sweeps and searches on a local two-slot Ray cluster: the same results as without one, and a Ray
worker killed mid-job or mid-measurement loses only what it held, which is run again once."""

import io
import json
import math
import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from explore.ray_cluster import MEASURE_RESOURCE, Cluster  # noqa: E402
from explore.records import load_records  # noqa: E402
from flexsched import sweep_ray  # noqa: E402
from flexsched.cli import main  # noqa: E402
from flexsched.registry import get_task  # noqa: E402
from flexsched.sweep import run_sweep  # noqa: E402
from flexsched.sweep_spec import parse_spec  # noqa: E402

import ray_faults  # noqa: E402
from test_tune import FAST, check_kernel  # noqa: E402

pytestmark = pytest.mark.cpu

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TWO_AT_ONCE = Cluster(per_node=2)   # the one machine offers one slot; each measurement asks for half


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    """A local cluster of two CPUs for the module (started once: it takes seconds); the folder where
    ray_faults keeps its marks."""
    folder = tmp_path_factory.mktemp("ray-faults")
    ray.init(address="local", num_cpus=2, resources={MEASURE_RESOURCE: 1}, include_dashboard=False,
             log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)]),
                                                            "FLEXSCHED_FAULTS": str(folder)}})
    yield folder
    ray.shutdown()


def tiny_sweep(folder):
    """GMM 16^3, q and random, 4 trials: all four of q's points are its warm-up's, drawn from the seed,
    so both contenders visit the same points whatever the timings."""
    return parse_spec({"name": "tiny", "trials": 4, "seeds": [0], "contenders": ["q", "random"], "finalists": 0,
                       "rounds": 1, "results": str(folder / "results.json"), "records": str(folder / "records"),
                       "cases": [{"name": "GMM16", "op": "GMM", "args": [16, 16, 16]}]})


def points(records_dir):
    """{record file: the configs of its records, in trial order}."""
    return {path.name: [json.dumps(r.data["config"]) for r in sorted(load_records(path), key=lambda r: r.data["trial"])]
            for path in sorted(records_dir.glob("*.jsonl"))}


def shape(results):
    """A results file without its timings."""
    return [(row["case"], {name: (entry["trials"], entry["space_size"], [seed["seed"] for seed in entry["seeds"]])
                           for name, entry in row["contenders"].items()}) for row in results["cases"]]


def test_a_sweep_on_the_cluster_survives_a_killed_worker_with_the_results_of_a_serial_one(faults, tmp_path,
                                                                                           monkeypatch):
    serial = run_sweep(tiny_sweep(tmp_path / "serial"), io.StringIO())
    # Ray pickles search_job by name, so the workers run the fault's copy: the first job dies once, halfway.
    monkeypatch.setattr(sweep_ray, "search_job", ray_faults.die_once_job)
    spec = tiny_sweep(tmp_path / "ray")
    on_ray = run_sweep(spec, io.StringIO(), TWO_AT_ONCE)
    assert (faults / "job-died").exists()
    assert shape(on_ray) == shape(serial) and json.loads(spec.results.read_text()) == on_ray
    assert points(spec.records) == points(tmp_path / "serial" / "records")   # the lost attempt left no line
    assert all(len(configs) == 4 for configs in points(spec.records).values())
    for entry in on_ray["cases"][0]["contenders"].values():
        assert math.isfinite(entry["best_seconds"]) and entry["seeds"][0]["stop"] == "trials"


def test_tune_on_the_cluster_gives_a_checked_best(faults, tmp_path):
    log = tmp_path / "gmm.jsonl"
    out = io.StringIO()
    assert main(["tune", "GMM", "16", "16", "16", "--trials", "4", "--ray", "--ray-per-node", "2", "--log", str(log),
                 "--json"], out=out) == 0
    summary = json.loads(out.getvalue().splitlines()[-1])
    records = load_records(log)
    assert len(records) == 4 and all(r.ok for r in records) and math.isfinite(summary["best_seconds"])
    assert all(r.judged_by == "measured" for r in records)   # the node's measuring evaluator judged them
    from explore.optimize import build_best

    check_kernel(get_task("GMM", 16, 16, 16), build_best(log, get_task("GMM", 16, 16, 16)))


def test_a_worker_killed_mid_measurement_loses_only_its_candidate_once_and_twice_is_worker_lost(faults, tmp_path):
    import flexsched

    log = tmp_path / "gmm.jsonl"
    result = flexsched.optimize(("GMM", 16, 16, 16), trials=6, method="random", log=str(log), ray=TWO_AT_ONCE,
                                database=False, evaluator_options={**FAST, "runner": "ray_faults:kill_worker_runner"})
    statuses = [entry.evaluation.status for entry in result.history]
    assert len(statuses) == 6 and statuses.count("worker_lost") == 1 and statuses.count("ok") == 5
    lost = next(entry for entry in result.history if not entry.ok)
    assert "lost twice" in lost.evaluation.error
    assert sorted((faults / "kills").read_text().split()) == ["always", "always", "once"]
    assert [r.evaluation.status for r in load_records(log)] == statuses   # recorded here, in order


def test_a_cluster_without_measurement_slots_is_refused(faults, monkeypatch):
    from explore.ray_cluster import ClusterError, Connection

    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    with pytest.raises(ClusterError, match="no node of a local Ray cluster offers the 'flexsched_measure' resource"):
        Connection(TWO_AT_ONCE).open()
    assert ray.is_initialized()   # the cluster it did not start stays up
