"""experiments/build_cost.py: a fixed sample of points, built with the kernel cache off."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import analyze
from explore.optimize import optimize
from explore.records import load_records
from flexsched.registry import get_task
from space import generate

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
        assert len(point["object_sha1"]) == 40
    assert "all 2 points" in run.stdout
    # The same points make the same object code: a second run's digest is the first's.
    again = subprocess.run([sys.executable, str(EXPERIMENTS / "build_cost.py"), "--cases", "C9", "--points", "2"],
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    digest = re.search(r"objects ([0-9a-f]{12})", run.stdout)[1]
    assert f"objects {digest}" in again.stdout


def test_build_cost_takes_a_searchs_own_candidates_from_its_records(tmp_path):
    """With --records, the points are the case's recorded ones, evenly spread: the 1st and 3rd of 4."""
    records, out = tmp_path / "records.jsonl", tmp_path / "cost.json"
    task = get_task("C2D", 1, 512, 28, 28, 512, 1, 1, 0, 1)   # the benchmark's C9
    optimize(task, "llvm", trials=4, method="random", log=str(records), evaluator="model")
    space = generate(analyze(task), "llvm")
    recorded = [list(record.point_in(space)) for record in load_records(records)]
    run = subprocess.run([sys.executable, str(EXPERIMENTS / "build_cost.py"), "--cases", "C9", "--points", "2",
                          "--records", str(records), "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert len(recorded) == 4
    assert [point["point"] for point in json.loads(out.read_text())["points"]] == [recorded[0], recorded[2]]


def test_build_cost_names_llvms_costliest_passes(tmp_path):
    out = tmp_path / "cost.json"
    run = subprocess.run([sys.executable, str(EXPERIMENTS / "build_cost.py"), "--cases", "C9", "--points", "1",
                          "--passes", "3", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    passes = json.loads(out.read_text())["pass_seconds"]
    assert passes["InstCombinePass"] > 0 and "Total" not in passes
    assert not any(name.endswith(("#2", "#3")) for name in passes)   # each pass's runs summed under its name
    printed = [line for line in run.stdout.splitlines() if line.endswith(tuple(passes)) and "%" in line]
    assert len(printed) == 3
