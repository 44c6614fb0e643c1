"""experiments/candidate_time.py: a search's candidate phases summed by how far from its best each ran."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

from candidate_time import case_report  # noqa: E402


def record(seconds, elapsed, build=0.4, check=0.05, timing=0.1, repeats=3, status="ok"):
    details = {"lower_seconds": build / 4, "emit_seconds": build / 4, "optimize_seconds": build / 4,
               "machine_code_seconds": build / 4, "check_seconds": check, "timing_seconds": timing, "repeats": repeats}
    return SimpleNamespace(data={"result": {"status": status, "seconds": seconds, "details": details},
                                 "elapsed": elapsed})


def test_candidates_are_summed_in_bands_of_their_time_over_the_best_and_the_rest_is_the_remainder():
    records = [record(0.010, 1.0), record(0.0105, 2.0), record(0.013, 3.0, repeats=1),
               record(0.050, 4.0, timing=0.0, repeats=1), record(float("inf"), 5.0, status="build_error")]
    report = case_report(records, cores=2)
    bands = report["bands"]
    assert sorted(bands) == ["0 < 1.1", "1 < 1.5", "4 >= 3"]
    assert bands["0 < 1.1"]["count"] == 2 and bands["0 < 1.1"]["repeats"] == 6
    assert bands["1 < 1.5"]["count"] == 1
    assert bands["4 >= 3"]["count"] == 2   # the 5x candidate and the failed one
    assert report["span"] == 4.0 and report["candidates_per_second"] == 5 / 4.0
    spent = 5 * 0.4 / 2 + 5 * 0.05 + 4 * 0.1   # builds two at a time; every record but one timed 0.1 s
    assert report["remainder"] == pytest.approx(4.0 - spent)


def test_the_timing_procedures_cost_is_counted_in_each_candidates_own_run_times():
    records = [record(0.010, 1.0, check=0.02, timing=0.03), record(0.020, 2.0, check=0.02, timing=0.06),
               record(0.050, 3.0, check=0.10, timing=0.0), record(float("inf"), 4.0, status="build_error")]
    assert case_report(records, cores=2)["runs_median"] == pytest.approx(4.0)   # of 5, 4 and 2; the failure left out
