"""The library contender: every mapped operator's PyTorch call matches the task's reference."""

import pytest

from flexsched.library import checked_library, library_call
from flexsched.registry import get_task

CASES = [("GMM", 8, 9, 10), ("GMV", 8, 9), ("BIL", 4, 5, 6, 7), ("C1D", 1, 3, 10, 4, 3, 2, 1, 2),
         ("C2D", 1, 3, 9, 9, 4, 3, 2, 1, 1), ("C3D", 1, 2, 5, 5, 5, 3, 3, 1, 1), ("T1D", 1, 3, 6, 4, 3, 2, 1),
         ("T2D", 1, 3, 5, 5, 4, 3, 2, 1), ("T3D", 1, 2, 3, 3, 3, 2, 2, 2, 0), ("GRP", 1, 4, 6, 6, 8, 3, 1, 1, 2),
         ("DEP", 1, 4, 6, 6, 2, 3, 2, 1), ("DIL", 1, 3, 9, 9, 4, 3, 1, 1, 2)]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_library_call_matches_reference(case):
    pytest.importorskip("torch")
    task = get_task(*case)
    inputs = task.random_inputs(seed=1)
    timed = checked_library(task, "llvm", inputs, task.evaluate(*inputs))
    assert timed.name.startswith("torch.")
    assert timed.time_runs(timed.call, 2) > 0


def test_operators_without_a_library_call():
    assert library_call(get_task("BCM", 16, 8, 4)) is None
    assert library_call(get_task("SHO", 1, 4, 4, 9, 3)) is None
