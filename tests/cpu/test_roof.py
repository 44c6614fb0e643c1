"""The CPU roofs are measured on this host, and the best measured is kept across processes."""

import json

from codegen.roof import Roof, measured_cpu_roof, roof_for
from flexsched.cli import main
from flexsched.target import get_target


def test_the_measured_cpu_roofs_are_positive_and_finite():
    target = get_target("llvm")
    roof = measured_cpu_roof(target.cores, target.vector_lanes)
    assert 0 < roof.peak_gflops < 1e6 and 0 < roof.peak_gbps < 1e5


def test_the_kept_roof_is_the_best_ever_measured(tmp_path):
    kept = tmp_path / "roofs.json"
    first = roof_for("llvm", kept)
    data = json.loads(kept.read_text())
    (key,) = data
    data[key] = {"peak_gflops": first.peak_gflops * 10, "peak_gbps": 0.5, "source": "x"}
    kept.write_text(json.dumps(data))
    again = roof_for("llvm", kept)
    assert again.peak_gflops == first.peak_gflops * 10          # a higher kept figure wins
    assert again.peak_gbps == first.peak_gbps                     # a lower one is raised
    assert json.loads(kept.read_text())[key]["peak_gbps"] == first.peak_gbps


def test_a_corrupt_roof_file_is_measured_over(tmp_path):
    kept = tmp_path / "roofs.json"
    kept.write_text("{not json")
    assert isinstance(roof_for("llvm", kept), Roof)
    assert json.loads(kept.read_text())


def test_tune_reports_gb_per_second_and_the_binding_roof(capsys):
    assert main(["tune", "GMM", "256", "1", "256", "--trials", "3", "--json"]) == 0
    out = capsys.readouterr().out
    assert "roofline (measured):" in out and "GB/s: memory-bound" in out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["bound"] == "memory" and summary["best_gbps"] > 0
    assert summary["bytes"] == 4 * (256 + 256 + 256 * 256)
