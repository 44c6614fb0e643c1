"""Ray is optional: without it everything else works, and --ray says in one line what to install."""

import builtins

import pytest

from explore.ray_cluster import Cluster, ClusterError
from flexsched.cli import main

HINT = "flexsched: error: Ray is not installed: pip install 'flexsched[distributed]'\n"


@pytest.fixture
def no_ray(monkeypatch):
    """Imports of ray fail, as where the distributed extra is not installed."""
    real_import = builtins.__import__

    def without_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_ray)


def test_tune_and_sweep_with_ray_missing_say_what_to_install(no_ray, tmp_path, capsys):
    assert main(["tune", "GMM", "16", "16", "16", "--trials", "2", "--ray", "--log", str(tmp_path / "t.jsonl")]) == 2
    assert capsys.readouterr().err == HINT
    spec = tmp_path / "s.toml"
    spec.write_text('trials = 2\ncontenders = ["random"]\n[[cases]]\nop = "GMM"\nargs = [16, 16, 16]\n')
    assert main(["sweep", str(spec), "--ray", "10.0.0.1:6379", "--results", str(tmp_path / "r.json"),
                 "--records", str(tmp_path / "records")]) == 2
    assert capsys.readouterr().err == HINT
    assert not (tmp_path / "t.jsonl").exists() and not list((tmp_path / "records").glob("*"))


def test_cluster_values():
    assert Cluster.of(True) == Cluster() and Cluster.of("auto") == Cluster("auto")
    assert Cluster(per_node=4).task_options() == {"num_cpus": 0, "resources": {"flexsched_measure": 0.25}}
    with pytest.raises(ClusterError, match="per_node must be a whole number of at least 1, got 0"):
        Cluster(per_node=0)
    with pytest.raises(ClusterError, match="ray must be True, a cluster address"):
        Cluster.of(3)


def test_an_address_nothing_listens_at_is_one_line_at_once(capsys):
    pytest.importorskip("ray")
    assert main(["tune", "GMM", "16", "16", "16", "--trials", "2", "--ray", "127.0.0.1:1"]) == 2
    assert capsys.readouterr().err.startswith("flexsched: error: cannot reach the Ray cluster at 127.0.0.1:1: ")
