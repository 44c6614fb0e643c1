"""experiments/build_cost.py: a fixed sample of points, built with the kernel cache off."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu
EXPERIMENTS = Path(__file__).parents[2] / "experiments"


def test_build_cost_reports_each_points_phases(tmp_path):
    out = tmp_path / "cost.json"
    run = subprocess.run([sys.executable, str(EXPERIMENTS / "build_cost.py"), "--cases", "C9", "--points", "2",
                          "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    points = json.loads(out.read_text())["points"]
    assert [point["case"] for point in points] == ["C9", "C9"]
    for point in points:
        assert point["instructions"] > 0
        assert all(point[phase] > 0 for phase in ("emit", "optimize", "machine_code"))
    assert "all 2 points" in run.stdout
