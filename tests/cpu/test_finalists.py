"""The post-search re-timing phase: the re-timed best is one of the search's fastest K and is correct."""

import math

import numpy as np

from explore.finalists import fastest_entries
from explore.optimize import optimize
from flexsched.registry import get_task


def test_retimed_best_is_one_of_the_fastest_and_matches_the_reference():
    task = get_task("GMM", 32, 32, 32)
    result = optimize(task, "llvm", trials=6, method="random", seed=3, finalists=3)
    fastest = {entry.schedule_key for entry in fastest_entries(result.history, 3)}
    assert 1 <= len(result.finalists) <= 3
    assert result.finalists[0].schedule_json in fastest
    assert result.schedule.to_json() in fastest
    assert math.isfinite(result.seconds) and result.seconds == result.finalists[0].seconds
    assert [f.seconds for f in result.finalists] == sorted(f.seconds for f in result.finalists)
    inputs = task.random_inputs(seed=5)
    (out,) = result.kernel.run(*inputs)
    np.testing.assert_allclose(out, inputs[0] @ inputs[1], rtol=1e-4, atol=1e-4)


def test_no_finalists_keeps_the_search_best():
    result = optimize(("GMM", 16, 16, 16), "llvm", trials=3, method="random", seed=1, build_kernel=False)
    assert result.finalists == () and result.seconds == result.history.best.seconds


def test_a_finalist_whose_build_fails_drops_out_and_the_others_are_timed():
    from types import SimpleNamespace

    from explore.finalists import retime
    from flexsched.schedule import Schedule, Split

    task = get_task("GMM", 32, 16, 24)
    good = Schedule((Split("O", "i", (4, 8)),)).to_json()
    illegal = Schedule((Split("O", "i", (3, 4)),)).to_json()   # 3 x 4 does not cover 32 rows
    entries = [SimpleNamespace(schedule_key=key, seconds=1e-3) for key in (illegal, good, "[]")]
    result = retime(task, "llvm", entries, rounds=2)
    assert sorted(f.schedule_json for f in result.finalists[:2]) == sorted([good, "[]"])
    assert all(math.isfinite(f.seconds) for f in result.finalists[:2])
    dropped = result.finalists[2]
    assert dropped.schedule_json == illegal and dropped.seconds == math.inf
    assert dropped.error.startswith("BuildError: build of GMM(32, 16, 24)") and "step 1" in dropped.error
