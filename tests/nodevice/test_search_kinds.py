"""experiments/search_kinds.py: a search's trials by kind of kernel and register tile shape."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

from explore.optimize import optimize  # noqa: E402
from explore.records import load_records  # noqa: E402
from fake_evaluator import FakeEvaluator  # noqa: E402
from flexsched.registry import get_task  # noqa: E402
from search_kinds import MEMORY, case_kinds  # noqa: E402


def test_every_trial_is_counted_once_under_its_kind_and_tile_shape_with_its_kinds_best(tmp_path):
    task, log = get_task("GMM", 64, 64, 64), tmp_path / "records.jsonl"
    optimize(task, "llvm", trials=30, seed=3, evaluator=FakeEvaluator(), build_kernel=False, log=str(log))
    records = [record for record in load_records(log) if record.ok]
    kinds = case_kinds(task, records)
    assert sum(row["trials"] for row in kinds) == len(records) > 20   # the fake evaluator fails a few
    assert [row["best_gflops"] for row in kinds] == sorted((row["best_gflops"] for row in kinds), reverse=True)
    assert kinds[0]["best_gflops"] == max(record.gflops for record in records)
    by_trial = {record.data["trial"]: record for record in records}
    for row in kinds:
        assert by_trial[row["best_trial"]].gflops == row["best_gflops"]
        # A tile's label names its axis and shape, and its kind the same axis; memory has no tile.
        if row["tiles"] == MEMORY:
            assert "'memory'" in row["kind"]
        else:
            axis, shape = row["tiles"].split()
            rows, vectors = map(int, shape.split("x"))
            assert f"'registers', '{axis}', {vectors}" in row["kind"] and rows >= 1
    assert len({(row["kind"], row["tiles"]) for row in kinds}) == len(kinds) >= 2
