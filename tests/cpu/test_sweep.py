"""flexsched sweep end to end on experiments/sweep_ci.toml: results, resuming, and the report."""

import importlib.util
import json
import math
from pathlib import Path

from flexsched.cli import main
from flexsched.target import get_target

SPEC = Path(__file__).resolve().parents[2] / "experiments" / "sweep_ci.toml"


def result_lines(path):
    """Record lines (claim and end lines of concurrent-run bookkeeping are not results)."""
    return [line for line in path.read_text().splitlines() if '"result"' in line]


def sweep(tmp_path):
    return main(["sweep", str(SPEC), "--results", str(tmp_path / "results.json"), "--records",
                 str(tmp_path / "records"), "--finalists", "1", "--rounds", "2"])


def test_sweep_resumes_and_reports(tmp_path, capsys):
    assert sweep(tmp_path) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert [row["case"] for row in results["cases"]] == ["GMM64", "C2D-8x14"]
    for row in results["cases"]:
        assert set(row["contenders"]) == {"q", "random", "template", "library"}
        for name, entry in row["contenders"].items():
            if "skipped" in entry:  # an operator without a template is a skipped contender, not a crash
                assert name == "template" and entry["skipped"].startswith("no template for")
                continue
            assert math.isfinite(entry["best_seconds"]) and entry["gflops"] > 0
            assert all(math.isfinite(entry["ratio_to_library"][key]) for key in ("median", "min", "max"))
            if name != "library":
                assert entry["trials"] == 4 and entry["tuning_seconds"] > 0 and entry["space_size"] > 0
                assert len(entry["seeds"][0]["curve"]) == 4
    assert "skipped" not in results["cases"][0]["contenders"]["template"]  # GMM has a template

    files = sorted((tmp_path / "records").glob("*.jsonl"))
    counts = {path.name: len(result_lines(path)) for path in files}
    assert set(counts.values()) == {4}
    assert sweep(tmp_path) == 0  # a finished sweep measures nothing again
    assert {path.name: len(result_lines(path)) for path in files} == counts

    half = files[0]  # a job killed halfway: its file holds half of its records
    lines = half.read_text().splitlines(keepends=True)
    kept = [line for line in lines if '"result"' in line][:2]
    half.write_text("".join(kept))
    assert sweep(tmp_path) == 0
    after = result_lines(half)
    assert len(after) == 4 and after[:2] == [line.rstrip("\n") for line in kept]  # only the missing ones added

    capsys.readouterr()
    assert main(["report", str(tmp_path / "results.json")]) == 0
    table = capsys.readouterr().out
    llvm = get_target("llvm").name   # "llvm", or the CPU that $FLEXSCHED_LLVM_TARGET names
    assert f"| GMM64 | {llvm} | q |" in table and f"| C2D-8x14 | {llvm} | library |" in table
    assert "Template-free (q) against templates" in table and f"| GMM64 | {llvm} | template | " in table
    assert main(["report", str(tmp_path / "results.json"), "-o", str(tmp_path / "report")]) == 0
    assert (tmp_path / "report" / "report.md").read_text() == table
    pngs = list((tmp_path / "report").glob("*.png"))
    if importlib.util.find_spec("matplotlib"):
        curve = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in f"curve-GMM64-{llvm}") + ".png"
        assert {"speedup.png", "template_vs_generated.png", curve} <= {p.name for p in pngs}
    else:
        assert "pip install flexsched[plots]" in capsys.readouterr().out
