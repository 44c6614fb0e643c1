"""The measurement harness: results for good candidates, and every kind of bad candidate
reported as data while the sweep goes on (crash, hang, wrong answer, memory blow-up, bad schedule)."""

import json
import math
import os
import pickle

import numpy as np
import pytest

from codegen.measure import CLEARLY_SLOWER, COMPARE_CHUNK, RTOL, MeasureInput, MeasureResult, Measurer, ReferenceFailure, compare_array
from flexsched.registry import get_task
from flexsched.schedule import Parallel, Reorder, Schedule, Split

pytestmark = pytest.mark.cpu

SETTINGS = dict(warmup=1, repeats=3, min_run_seconds=0.001, memory_limit_bytes=4 * 2**30)
GOOD_TASK = get_task("GMM", 16, 16, 16)
MARKED_TASK = get_task("GMM", 13, 16, 16)  # the fault runners misbehave on M == 13 only
SPLIT_SCHEDULE = Schedule((Split("O", "i", (4, 4)), Split("O", "j", (2, 8)),
                           Reorder("O", ("i.0", "j.0", "i.1", "rk", "j.1")), Parallel("O", "i.0")))


def naive(task):
    return MeasureInput(task, Schedule().to_json())


def split(task):
    return MeasureInput(task, SPLIT_SCHEDULE.to_json())


def assert_ok(result, repeats=SETTINGS["repeats"]):
    assert result.ok, result.error
    assert result.error == ""
    assert math.isfinite(result.seconds) and result.seconds > 0
    assert result.min_seconds <= result.seconds <= result.max_seconds
    assert result.compile_seconds > 0
    assert result.repeats == repeats
    assert result.number >= 1


def assert_failed(result, status, *phrases):
    assert result.status == status, result
    assert not result.ok
    assert result.seconds == math.inf
    assert "\n" not in result.error
    for phrase in phrases:
        assert phrase in result.error, result.error


@pytest.fixture(autouse=True)
def fault_runners_importable(monkeypatch):
    """Workers import measure_faults by name from the parent's sys.path, whatever pytest's import mode."""
    monkeypatch.syspath_prepend(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def measurer():
    with Measurer(timeout_s=60, **SETTINGS) as shared:
        yield shared


def test_good_candidates_are_timed(measurer):
    for result in measurer.measure([naive(GOOD_TASK), split(GOOD_TASK)]):
        assert_ok(result)


def test_one_worker_serves_many_candidates(measurer):
    measurer.measure([naive(GOOD_TASK)])
    pid = measurer.worker_pid
    measurer.measure([split(GOOD_TASK)])
    assert measurer.worker_pid == pid


def test_illegal_schedule_is_a_build_error_naming_the_step(measurer):
    bad = Schedule((Split("O", "i", (3, 4)),)).to_json()
    bad_result, good_result = measurer.measure([MeasureInput(GOOD_TASK, bad), naive(GOOD_TASK)])
    assert_failed(bad_result, "build_error", "ScheduleError", "step 1", "split", "'i'", "do not fit")
    assert_ok(good_result)


def test_results_round_trip_through_strict_json(measurer):
    bad = Schedule((Split("O", "x", (4, 4)),)).to_json()
    results = measurer.measure([naive(GOOD_TASK), MeasureInput(GOOD_TASK, bad)])
    assert [r.status for r in results] == ["ok", "build_error"]
    for result in results:
        text = json.dumps(result.to_dict(), allow_nan=False)
        assert MeasureResult.from_dict(json.loads(text)) == result


def test_a_result_says_where_its_time_went(measurer):
    fresh = MeasureInput(get_task("GMM", 16, 24, 16), SPLIT_SCHEDULE.to_json())   # built by no other test here
    built, again = measurer.measure([fresh, fresh])
    assert_ok(built)
    assert built.kernel_cache in ("", "disk")   # a kernel cache on disk may hold it from an earlier session
    assert built.lower_seconds > 0 and built.emit_seconds > 0 and built.machine_code_seconds > 0
    assert built.check_seconds > 0 and built.timing_seconds > 0
    build = built.lower_seconds + built.emit_seconds + built.optimize_seconds + built.machine_code_seconds
    assert build <= built.compile_seconds
    assert built.compile_seconds + built.check_seconds + built.timing_seconds <= built.wall_seconds
    assert_ok(again)   # the worker built it already: no LLVM this time
    assert again.kernel_cache == "memory" and again.optimize_seconds == again.machine_code_seconds == 0.0


def test_candidates_built_side_by_side_measure_as_one_by_one(measurer):
    bad = MeasureInput(GOOD_TASK, Schedule((Split("O", "i", (3, 4)),)).to_json())
    batch = [naive(GOOD_TASK), bad, split(GOOD_TASK), naive(get_task("GMM", 16, 32, 8)), naive(GOOD_TASK)]
    with Measurer(timeout_s=60, builders=2, **SETTINGS) as side_by_side:
        assert side_by_side.builders == 2
        built = side_by_side.measure(batch)
    alone = measurer.measure(batch)
    assert [r.status for r in built] == [r.status for r in alone] == ["ok", "build_error", "ok", "ok", "ok"]
    assert_failed(built[1], "build_error", "ScheduleError", "step 1", "split")
    for result in built[:1] + built[2:]:
        assert_ok(result)
        assert result.lower_seconds > 0 and result.emit_seconds > 0 and result.check_seconds > 0
        assert result.compile_seconds + result.check_seconds + result.timing_seconds <= result.wall_seconds


@pytest.mark.parametrize("builder, status, phrase", [("measure_faults:crash_builder", "crash", "SIGSEGV"),
                                                     ("measure_faults:hang_builder", "timeout", "killed after 3.0 s")])
def test_a_builder_that_crashes_or_hangs_fails_only_its_candidate(builder, status, phrase):
    with Measurer(timeout_s=3, builders=2, builder=builder, **SETTINGS) as side_by_side:
        good, marked, after = side_by_side.measure([naive(GOOD_TASK), split(MARKED_TASK), split(GOOD_TASK)])
        again = side_by_side.measure([naive(MARKED_TASK), naive(GOOD_TASK)])
    assert_ok(good)
    assert_ok(after)
    assert_failed(marked, status, phrase)
    assert_failed(again[0], status, phrase)
    assert_ok(again[1])


def test_a_custom_runner_builds_its_own_candidates():
    with Measurer(timeout_s=60, builders=2, runner="measure_faults:wrong_runner", **SETTINGS) as custom:
        assert custom.builders == 1


def test_a_failure_keeps_the_phases_it_went_through():
    with Measurer(timeout_s=60, runner="measure_faults:wrong_runner", **SETTINGS) as wrong:
        (result,) = wrong.measure([split(MARKED_TASK)])
    assert_failed(result, "wrong_answer")
    assert result.lower_seconds > 0 and result.check_seconds > 0 and result.timing_seconds == 0.0
    assert result.wall_seconds >= result.compile_seconds > 0


def test_a_crash_does_not_stop_the_sweep():
    with Measurer(timeout_s=60, runner="measure_faults:crash_runner", **SETTINGS) as crashing:
        first = crashing.measure([naive(GOOD_TASK)])
        first_pid = crashing.worker_pid
        rest = crashing.measure([naive(MARKED_TASK), split(GOOD_TASK)])
        assert crashing.worker_pid not in (None, first_pid)
    good, crashed, after = first + rest
    assert_ok(good)
    assert_failed(crashed, "crash", "SIGSEGV")
    assert_ok(after)


def test_a_worker_that_exits_is_a_crash_naming_the_exit_code():
    with Measurer(timeout_s=60, runner="measure_faults:exit_runner", **SETTINGS) as exiting:
        exited, after = exiting.measure([naive(MARKED_TASK), naive(GOOD_TASK)])
    assert_failed(exited, "crash", "exited with code 3")
    assert_ok(after)


def test_a_hang_times_out_and_the_next_candidate_runs():
    with Measurer(timeout_s=3, runner="measure_faults:hang_runner", **SETTINGS) as hanging:
        hung, after = hanging.measure([naive(MARKED_TASK), naive(GOOD_TASK)])
    assert_failed(hung, "timeout", "killed after 3.0 s")
    assert_ok(after)


def test_a_wrong_answer_is_never_timed():
    with Measurer(timeout_s=60, runner="measure_faults:wrong_runner", **SETTINGS) as wrong:
        result, after = wrong.measure([split(MARKED_TASK), split(GOOD_TASK)])
    assert_failed(result, "wrong_answer", "output 'O'", "max |error| 1.0e+00 at (", "tolerance")
    assert result.repeats == 0
    assert_ok(after)


def test_a_kernel_that_writes_no_output_is_wrong_though_freed_memory_holds_the_right_one():
    with Measurer(timeout_s=60, runner="measure_faults:lazy_runner", **SETTINGS) as lazy:
        right, unwritten = lazy.measure([naive(MARKED_TASK), split(MARKED_TASK)])
    assert_ok(right)
    assert_failed(unwritten, "wrong_answer", "output 'O'")


def test_a_memory_blow_up_is_a_runtime_error_in_a_surviving_worker():
    with Measurer(timeout_s=60, runner="measure_faults:memory_runner", **SETTINGS) as greedy:
        result = greedy.measure([naive(MARKED_TASK)])[0]
        pid = greedy.worker_pid
        after = greedy.measure([naive(GOOD_TASK)])[0]
        assert greedy.worker_pid == pid
    assert_failed(result, "runtime_error", "MemoryError")
    assert_ok(after)


def test_close_stops_the_worker():
    with Measurer(timeout_s=60, **SETTINGS) as short_lived:
        short_lived.measure([naive(GOOD_TASK)])
        pid = short_lived.worker_pid
    assert short_lived.worker_pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_misspelt_runner_is_refused_at_once():
    with pytest.raises(ValueError, match="no function"):
        Measurer(runner="codegen.measure:no_such_runner")
    with pytest.raises(ValueError, match="module:function"):
        Measurer(runner="codegen.measure.run_candidate")


def test_measure_input_is_a_hashable_value():
    first, second = naive(GOOD_TASK), MeasureInput(get_task("GMM", 16, 16, 16), "[]")  # the same task again
    assert first == second and hash(first) == hash(second)
    assert pickle.loads(pickle.dumps(first)) == first
    assert first.task_ref == GOOD_TASK.ref()
    assert first.task.fingerprint == GOOD_TASK.fingerprint and first.task is not GOOD_TASK
    first.task_ref["args"].append(99)  # a copy: the value itself cannot change
    assert first.task_ref == GOOD_TASK.ref()
    assert MeasureInput.of(GOOD_TASK, SPLIT_SCHEDULE) == split(GOOD_TASK)
    with pytest.raises(AttributeError):
        first.schedule_json = "[]"
    with pytest.raises(TypeError, match="the Task itself"):
        MeasureInput(GOOD_TASK.ref(), "[]")


def test_comparison_tolerates_rounding_but_not_errors_or_nan():
    reference = np.array([[1.0, -2.0], [3.0, 40.0]], dtype=np.float32)
    assert compare_array(reference + np.float32(1e-3), reference) == ""  # atol scales with max|ref|
    worse = reference.copy()
    worse[1, 0] += 0.5
    assert compare_array(worse, reference).startswith("max |error| 5.0e-01 at (1, 0) (tolerance 4.3e-03")
    poisoned = reference.copy()
    poisoned[0, 1] = np.nan
    assert compare_array(poisoned, reference).startswith("NaN at (0, 1)")
    assert compare_array(poisoned, poisoned) == ""  # NaN where the reference has NaN too
    assert "shape" in compare_array(reference[:1], reference)


def test_comparison_finds_the_one_wrong_element_of_a_large_output():
    rows, columns = 7, 3 * COMPARE_CHUNK // 7 + 2   # compared a chunk at a time: the last chunk is a partial one
    size = rows * columns
    reference = np.linspace(-1.0, 1.0, size, dtype=np.float32).reshape(rows, columns)
    output = reference.copy()
    output.reshape(-1)[size - 2] += 0.5
    assert compare_array(output, reference).startswith(f"max |error| 5.0e-01 at ({rows - 1}, {columns - 2}) ")
    both_nan = reference.copy()
    both_nan.reshape(-1)[COMPARE_CHUNK + 7] = np.nan
    assert compare_array(both_nan.copy(), both_nan) == ""
    assert compare_array(both_nan, reference).startswith("NaN at (")
    assert compare_array(reference, both_nan).startswith("max |error|")


def test_the_quick_test_never_passes_what_the_exact_one_fails():
    # compare_array first asks whether every error is under half the tolerance, in the arrays'
    # type; the exact test, in float64, decides the rest. Errors around the boundary, both types.
    for dtype in (np.float32, np.float64):
        reference = np.linspace(-3.0, 40.0, 2 * COMPARE_CHUNK + 5, dtype=dtype)
        where = COMPARE_CHUNK + 3
        rtol = RTOL[np.dtype(dtype).name]
        allowed = rtol * 40.0 + rtol * abs(float(reference[where]))   # atol (max |ref| is 40) and rtol's share
        for share in (0.2, 0.49, 0.51, 0.9, 0.99, 1.01, 2.0):
            output = reference.copy()
            output[where] += dtype(share * allowed)
            assert (compare_array(output, reference) == "") == (share < 1.0), (dtype, share)


def test_integers_must_match_exactly():
    reference = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert compare_array(reference.copy(), reference) == ""
    off = reference.copy()
    off[1, 2] += 1
    assert "exact match required" in compare_array(off, reference)
    assert "at (1, 2)" in compare_array(off, reference)


def test_slow_candidates_are_timed_once():
    with Measurer(timeout_s=60, repeats=5, slow_run_seconds=0.0) as measurer:
        (result,) = measurer.measure([MeasureInput(get_task("GMM", 16, 16, 16), Schedule().to_json())])
    assert result.ok and result.repeats == 1 and result.number == 1


def test_a_candidate_far_slower_than_its_tasks_best_is_timed_once(tmp_path, monkeypatch):
    log = tmp_path / "settings.log"
    monkeypatch.setenv("SETTINGS_LOG", str(log))
    with Measurer(timeout_s=60, runner="measure_faults:logged_settings_runner", slow_factor=3, **SETTINGS) as measurer:
        first, second, other = measurer.measure([naive(GOOD_TASK), split(GOOD_TASK), naive(MARKED_TASK)])
    for result in (first, second, other):
        assert result.ok
    sent = [float(line) for line in log.read_text().splitlines()]
    assert sent[0] == math.inf and sent[1] == 3 * first.seconds   # the task's best so far, times the factor
    assert sent[2] == math.inf                                    # another task has no best yet
    with pytest.raises(ValueError, match="slow_factor >= 1"):
        Measurer(slow_factor=0.5)


# ---------------------------------------------------------------- the reference, once per task and seed

def test_a_slow_reference_is_not_charged_to_the_candidate():
    with Measurer(timeout_s=2, reference_writer="measure_faults:slow_reference", **SETTINGS) as measurer:
        (result,) = measurer.measure([naive(MARKED_TASK)])  # its reference takes 3 s, the candidate far less
    assert_ok(result)


def test_the_reference_is_computed_once_even_across_worker_restarts(tmp_path, monkeypatch):
    log = tmp_path / "references.log"
    monkeypatch.setenv("REFERENCE_LOG", str(log))
    with Measurer(timeout_s=60, runner="measure_faults:crash_runner",
                  reference_writer="measure_faults:counted_reference", **SETTINGS) as measurer:
        good, crashed, after = measurer.measure([naive(GOOD_TASK), naive(MARKED_TASK), split(GOOD_TASK)])
        (again,) = measurer.measure([naive(MARKED_TASK)])
        directory = measurer.reference_dir
        assert len([name for name in os.listdir(directory) if name.endswith(".npz")]) == 2   # one per task and seed
    assert_ok(good)
    assert_ok(after)
    assert_failed(crashed, "crash", "SIGSEGV")
    assert_failed(again, "crash", "SIGSEGV")
    assert log.read_text().splitlines() == ["GMM[16, 16, 16]", "GMM[13, 16, 16]"]
    assert not os.path.exists(directory)   # close() deletes the files


def test_a_reference_out_of_time_is_one_error_naming_the_task():
    with Measurer(timeout_s=60, reference_timeout_s=1, reference_writer="measure_faults:slow_reference",
                  **SETTINGS) as measurer:
        with pytest.raises(ReferenceFailure) as caught:
            measurer.measure([naive(MARKED_TASK), naive(MARKED_TASK)])
        assert_ok(measurer.measure_one(naive(GOOD_TASK)))   # other tasks are still measured
    assert str(caught.value) == "the reference outputs of GMM(13, 16, 16) (seed 0) did not finish within 1 s"


def test_a_reference_out_of_memory_is_one_error_naming_the_task_and_the_cap():
    with Measurer(timeout_s=60, **SETTINGS) as measurer:
        with pytest.raises(ReferenceFailure) as caught:
            measurer.measure([naive(get_task("GMM", 30000, 30000, 30000))])
    message = str(caught.value)
    assert message.startswith("the reference outputs of GMM(30000, 30000, 30000) (seed 0) could not be computed: "
                              "MemoryError")
    assert message.endswith("(the worker's memory is capped at 4 GiB)") and "\n" not in message


def test_a_paired_measurer_times_each_candidate_against_the_fastest_so_far():
    with Measurer(timeout_s=60, paired=True, **SETTINGS) as paired:
        first, second, third = (paired.measure([split(GOOD_TASK)])[0] for _ in range(3))
    for result in (first, second, third):
        assert result.ok, result.error
    assert first.yardstick_seconds == 0.0           # the task's first candidate is timed alone
    assert second.yardstick_seconds > 0 and third.yardstick_seconds > 0


@pytest.mark.parametrize("warmup, runs", [(0, 1), (1, 2)])
def test_without_warm_up_a_clearly_slower_candidate_is_timed_by_its_checked_pair_alone(warmup, runs, tmp_path,
                                                                                        monkeypatch):
    log = tmp_path / "runs.txt"
    monkeypatch.setenv("RUN_LOG", str(log))
    with Measurer(timeout_s=60, paired=True, warmup=warmup, repeats=3, min_run_seconds=0.0,
                  memory_limit_bytes=4 * 2**30, runner="measure_faults:slowed_runner") as paired:
        fast, slow = paired.measure([naive(GOOD_TASK)])[0], paired.measure([split(GOOD_TASK)])[0]
    assert fast.ok and slow.ok, (fast.error, slow.error)
    assert slow.seconds > CLEARLY_SLOWER * fast.seconds and slow.yardstick_seconds > 0 and slow.repeats == 1
    # Without warm-up the checked run, beside the yardstick's repeat, settled it; with one, a paired repeat did.
    assert log.read_text().count("run") == runs


def test_an_unpaired_measurer_times_each_candidate_alone(measurer):
    results = measurer.measure([split(GOOD_TASK), split(GOOD_TASK)])
    assert [result.yardstick_seconds for result in results] == [0.0, 0.0]
