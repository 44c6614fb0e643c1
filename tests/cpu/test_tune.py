"""Tuning with real measurement on a tiny GMM: the command line's --json line, the built kernel,
the best config rebuilt from a record file, and a crashing candidate reported as a failure."""

import io
import json
import math
import os

import numpy as np
import pytest

import flexsched
from analysis import analyze
from codegen import cpu_backend
from codegen.evaluators import CpuEvaluator
from explore.evaluator import ExplorationError
from explore.optimize import TRANSFERRED_PER_START, build_best
from explore.records import load_records
from explore.transfer import transferred_points
from flexsched.cli import main
from flexsched.registry import get_task
from flexsched.target import get_target
from space import generate

pytestmark = pytest.mark.cpu

FAST = dict(warmup=0, repeats=1, min_run_seconds=0.001, memory_limit_bytes=4 * 2**30)


def check_kernel(task, kernel):
    inputs = task.random_inputs(seed=3)
    (out,) = kernel.run(*inputs)
    (ref,) = task.evaluate(*inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_tune_json_last_line_and_best_rebuilt_from_the_log(tmp_path):
    log = tmp_path / "gmm.jsonl"
    out = io.StringIO()
    status = main(["tune", "GMM", "32", "32", "32", "--trials", "4", "--json", "--log", str(log)], out=out)
    assert status == 0
    summary = json.loads(out.getvalue().splitlines()[-1])
    assert {"best_gflops", "best_seconds", "trials", "method", "config"} <= set(summary)
    assert summary["trials"] == 4 and summary["method"] == "q"
    assert summary["best_gflops"] > 0 and math.isfinite(summary["best_seconds"])
    records = load_records(log)
    assert len(records) == 4
    best = min((r for r in records if r.ok), key=lambda r: r.seconds)
    assert best.data["config"] == summary["config"]
    task = get_task("GMM", 32, 32, 32)
    kernel = build_best(log, task)  # no search: the logged config, applied and built
    assert kernel.schedule.to_json() != "[]"
    check_kernel(task, kernel)


def test_tune_starts_from_another_layers_best_in_the_shared_log(tmp_path):
    log = str(tmp_path / "network.jsonl")
    assert main(["-q", "tune", "GMM", "16", "32", "32", "--trials", "4", "--log", log], out=io.StringIO()) == 0
    out = io.StringIO()
    assert main(["-q", "tune", "GMM", "32", "32", "32", "--trials", "6", "--log", log, "--transfer-from", log],
                out=out) == 0
    task = get_task("GMM", 32, 32, 32)
    carried = transferred_points(generate(analyze(task), "llvm"), load_records(log), task, get_target("llvm"), 4,
                                 more=(TRANSFERRED_PER_START - 1) * 4)
    assert carried   # the other layer's best of each kind of kernel it measured
    assert f"first starts: {len(carried)} carried over from other tasks' best configs in {log}" in out.getvalue()


def test_optimize_returns_a_checked_kernel_and_its_history(monkeypatch):
    def refuse(*args):
        raise AssertionError("LLVM ran in the calling process")

    monkeypatch.setattr(cpu_backend, "generate_machine_code", refuse)  # candidates and the final build: in workers
    task = get_task("GMM", 24, 16, 32)
    with CpuEvaluator(**FAST) as evaluator:
        result = flexsched.optimize(task, trials=3, method="random", evaluator=evaluator, seed=1)
    assert result.trials == 3 == len(result.history)
    assert result.gflops == pytest.approx(task_flops(task) / result.seconds / 1e9)
    check_kernel(task, result.kernel)


def test_a_search_builds_its_batches_side_by_side_on_every_core(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    task = get_task("GMM", 24, 16, 32)
    with CpuEvaluator(**FAST) as evaluator:
        assert evaluator.batch_size == 6   # two candidates per builder, one builder per usable core
        result = flexsched.optimize(task, trials=8, method="q", evaluator=evaluator, seed=2)
    with CpuEvaluator(builders=1, **FAST) as one_by_one:
        assert one_by_one.batch_size == 1
    assert result.trials == 8 and result.history.num_ok == 8
    assert all(entry.evaluation.details["emit_seconds"] > 0 for entry in result.history)
    check_kernel(task, result.kernel)


def test_a_task_too_large_to_check_stops_before_the_search_writes_anything(tmp_path):
    log = tmp_path / "big.jsonl"
    with pytest.raises(ExplorationError) as caught:
        flexsched.optimize(("GMM", 30000, 30000, 30000), trials=5, log=str(log), evaluator_options=FAST)
    message = str(caught.value)
    assert message.startswith("GMM(30000, 30000, 30000) needs about 16.8 GiB to measure") and "\n" not in message
    assert "GiB are available" in message and "capped at 4 GiB" in message
    assert not log.exists()


def test_a_reference_that_cannot_be_computed_stops_the_search_before_any_candidate(tmp_path):
    log = tmp_path / "slow.jsonl"
    with pytest.raises(ExplorationError) as caught:
        flexsched.optimize(("GMM", 512, 512, 512), trials=5, log=str(log),
                           evaluator_options={**FAST, "reference_timeout_s": 1e-3})
    message = str(caught.value)
    assert message.startswith("the reference outputs of GMM(512, 512, 512) (seed 0) did not finish within 0.001 s")
    assert message.endswith("so no candidate can be checked") and "\n" not in message
    assert load_records(log) == []


def task_flops(task):
    from analysis import analyze

    return analyze(task).flops


def test_a_crashing_candidate_is_a_failed_evaluation(monkeypatch):
    monkeypatch.syspath_prepend(os.path.dirname(os.path.abspath(__file__)))  # workers import measure_faults
    from analysis import analyze
    from space import generate

    task = get_task("GMM", 13, 16, 16)  # the fault runner crashes on M == 13
    space = generate(analyze(task), "llvm")
    with CpuEvaluator(runner="measure_faults:crash_runner", timeout_s=60, **FAST) as evaluator:
        (evaluation,) = evaluator.evaluate(task, space, [space.random_point(0)])
    assert evaluation.status == "crash" and not evaluation.ok
    assert evaluation.seconds == math.inf and evaluation.error
    assert evaluation.details["status"] == "crash"
