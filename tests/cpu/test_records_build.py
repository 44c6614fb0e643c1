"""build_best from a record file someone tampered with: the best record that fits today's space is
built and checked; corrupt lines and records outside the space are reported, never fatal."""

import json
import warnings

import numpy as np
import pytest

from analysis import analyze
from codegen.evaluators import CpuEvaluator
from explore.optimize import build_best, optimize
from explore.records import CorruptRecordWarning, load_records
from explore.resume import MisfitRecordWarning
from flexsched.registry import get_task
from space import generate

pytestmark = pytest.mark.cpu

FAST = dict(warmup=0, repeats=1, min_run_seconds=0.001, memory_limit_bytes=4 * 2**30)


def test_build_best_builds_the_fastest_record_that_fits_and_checks_it(tmp_path):
    task = get_task("GMM", 24, 16, 32)
    log = tmp_path / "gmm.jsonl"
    with CpuEvaluator(**FAST) as evaluator:
        optimize(task, trials=3, method="random", evaluator=evaluator, log=str(log), build_kernel=False)
    (best,) = sorted((r for r in load_records(log) if r.ok), key=lambda r: r.seconds)[:1]
    # A record written before records kept their schedule: only its config can be replayed, and it misfits.
    old = {name: value for name, value in best.data.items() if name not in ("schedule", "space")}
    misfit = dict(old, config={**best.data["config"], "O.unroll": 12345}, result={"status": "ok", "seconds": 1e-12})
    with open(log, "a") as file:
        file.write(json.dumps(misfit) + "\n" + '{"result": "ok"}\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = build_best(log)  # the task from the registry, the config from the fastest fitting record
    assert {w.category for w in caught} == {MisfitRecordWarning, CorruptRecordWarning}
    space = generate(analyze(task), "llvm")
    assert kernel.schedule.to_json() == space.schedule(best.config).to_json()
    inputs = task.random_inputs(seed=3)
    (out,) = kernel.run(*inputs)
    (ref,) = task.evaluate(*inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
