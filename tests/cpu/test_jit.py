"""@flexsched.jit: tuned on the first call for each shape, reused from memory after, and from the
tuning database in a new process; torch tensors in, torch tensors out, numpy likewise."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import flexsched
from explore import search
from flexsched import compute, placeholder, reduce_axis
from flexsched.database import Database
from flexsched.registry import get_task

pytestmark = pytest.mark.cpu

FAST = dict(warmup=0, repeats=1, min_run_seconds=0.001, memory_limit_bytes=4 * 2**30)


def gmm_task(A, B):
    """A jit function that names a registered task for its shapes."""
    return get_task("GMM", A.shape[0], A.shape[1], B.shape[1])


def matmul(A, B):
    """A jit function that writes the computation itself."""
    k = reduce_axis(A.shape[1], "k")
    return compute((A.shape[0], B.shape[1]), lambda i, j: flexsched.sum(A[i, k] * B[k, j], axis=k), name="C")


@pytest.fixture
def count_searches(monkeypatch):
    runs = []
    original = search.Search.run

    def counted(self, *args, **kwargs):
        runs.append(self.task)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(search.Search, "run", counted)
    return runs


def test_tunes_once_per_shape_and_returns_what_it_was_given(count_searches, private_tuning_database):
    tuned = flexsched.jit(gmm_task, trials=3, method="random", evaluator_options=FAST)
    a, b = torch.rand(16, 8) - 0.5, torch.rand(8, 24) - 0.5
    out = tuned(a, b)
    assert isinstance(out, torch.Tensor) and len(count_searches) == 1
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
    again = tuned(a + 1.0, b)  # the same shapes: the kernel in memory, no search
    torch.testing.assert_close(again, (a + 1.0) @ b, rtol=1e-4, atol=1e-4)
    as_numpy = tuned(a.numpy(), b.numpy())
    assert isinstance(as_numpy, np.ndarray) and len(count_searches) == 1
    np.testing.assert_allclose(as_numpy, (a @ b).numpy(), rtol=1e-4, atol=1e-4)
    (workload,) = Database(private_tuning_database).workloads()
    assert workload.best.task_ref["args"] == [16, 8, 24] and workload.best.data["trials"] == 3
    fresh = flexsched.jit(gmm_task, trials=3)  # another function object: the database already knows the shape
    torch.testing.assert_close(fresh(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert fresh.tunings == 0 and len(count_searches) == 1


NEW_PROCESS = textwrap.dedent("""
    import json, sys
    import numpy as np
    import flexsched
    from explore import search
    from flexsched.registry import get_task

    def refuse(*args, **kwargs):
        raise AssertionError("searched in the new process")

    search.Search.run = refuse

    @flexsched.jit(trials=3)
    def gmm_task(A, B):
        return get_task("GMM", A.shape[0], A.shape[1], B.shape[1])

    a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
    out = gmm_task(a, b)
    print(json.dumps({"tunings": gmm_task.tunings, "error": float(np.abs(out - a @ b).max())}))
""")


def test_a_new_process_reuses_the_database_without_tuning(tmp_path, private_tuning_database):
    a, b = np.random.default_rng(0).uniform(-1, 1, (16, 8)).astype("float32"), \
        np.random.default_rng(1).uniform(-1, 1, (8, 24)).astype("float32")
    flexsched.jit(gmm_task, trials=3, method="random", evaluator_options=FAST)(a, b)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    done = subprocess.run([sys.executable, "-c", NEW_PROCESS, str(tmp_path / "a.npy"), str(tmp_path / "b.npy")],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ),
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["tunings"] == 0 and report["error"] < 1e-4


def test_a_computation_written_in_the_function_uses_its_stored_record(private_tuning_database, count_searches):
    """The jit function's own computation, keyed by its fingerprint: a record stored for it (here by
    hand, with a schedule of its space) is applied on the first call, without a search."""
    from analysis import analyze
    from explore.optimize import space_for

    jitted = flexsched.jit(matmul, trials=3)
    a, b = np.ones((16, 8), "float32"), np.ones((8, 24), "float32")
    task = jitted.task_for(a, b)
    assert task.name == "matmul" and [t.name for t in task.inputs] == ["A", "B"]
    space = space_for(task, "llvm", info=analyze(task))
    point = space.random_point(1)
    schedule = json.loads(space.schedule(point).to_json())
    Database(private_tuning_database).add({
        "task": task.ref(), "target": flexsched.target.get_target("llvm").identity(), "judged_by": "measured",
        "config": space.config(point).to_dict(), "schedule": schedule, "result": {"status": "ok", "seconds": 1e-5},
        "gflops": 1.0, "time": "2025-06-01T00:00:00+00:00", "trials": 3})
    out = jitted(torch.from_numpy(a), torch.from_numpy(b))
    assert jitted.tunings == 0 and not count_searches
    torch.testing.assert_close(out, torch.full((16, 24), 8.0))
    (kernel,) = jitted._kernels.values()
    assert kernel.record is not None and json.loads(kernel.schedule.to_json()) == schedule


def test_a_computation_written_in_the_function_is_tuned(count_searches, private_tuning_database):
    tuned = flexsched.jit(matmul, trials=3, method="random", evaluator_options=FAST)
    a, b = torch.rand(16, 8) - 0.5, torch.rand(8, 24) - 0.5
    torch.testing.assert_close(tuned(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert tuned.tunings == 1
    (workload,) = Database(private_tuning_database).workloads()
    assert workload.best.task_ref["name"] == "matmul" and workload.best.task_ref["module"] == ""


def test_shapes_and_dtypes_are_checked_with_a_clear_error():
    tuned = flexsched.jit(matmul, trials=3)
    with pytest.raises(TypeError, match="argument 'A' of matmul has dtype int8"):
        tuned(np.ones((2, 2), "int8"), np.ones((2, 2), "float32"))
