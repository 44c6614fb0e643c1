"""How the measurement worker times a checked kernel: the runs it makes and which it counts, alone
and paired with a yardstick (a scripted clock stands in for the kernels, so nothing here depends on
this machine's speed)."""

import math

import pytest

from codegen.measure import (CLEARLY_SLOWER, MeasureSettings, Yardstick, checked_run_may_count, settle_yardstick,
                             time_kernel)


class ScriptedBackend:
    """time_runs answers seconds per run from a script and logs the runs asked for."""

    def __init__(self, per_run):
        self.per_run = list(per_run)
        self.calls = []

    def time_runs(self, run, number):
        self.calls.append(number)
        return self.per_run.pop(0) if len(self.per_run) > 1 else self.per_run[0]


class ScriptedKernel:
    def __init__(self, per_run):
        self.backend = ScriptedBackend(per_run)

    def __call__(self, *arrays):
        pass


def settings(**changes):
    values = dict(warmup=1, repeats=3, min_run_seconds=0.02, slow_run_seconds=math.inf)
    return MeasureSettings(**{**values, **changes})


def test_the_checked_run_is_the_warm_up_and_sets_the_runs_per_repeat():
    kernel = ScriptedKernel([0.004])
    per_run, number = time_kernel(kernel, [], settings(), first_run_seconds=0.004)
    assert number == 5 and per_run == [0.004] * 3
    assert kernel.backend.calls == [5, 5, 5]   # no run besides the timed repeats


def test_further_warm_up_runs_follow_the_checked_one():
    kernel = ScriptedKernel([0.05])
    per_run, number = time_kernel(kernel, [], settings(warmup=3), first_run_seconds=0.05)
    assert kernel.backend.calls == [1, 1, 1, 1, 1] and number == 1 and per_run == [0.05] * 3


def test_a_first_repeat_shorter_than_the_minimum_is_timed_again_with_more_runs():
    kernel = ScriptedKernel([0.005, 0.005])   # the checked run (0.05 s) was slower than the kernel is
    per_run, number = time_kernel(kernel, [], settings(), first_run_seconds=0.05)
    assert kernel.backend.calls == [1, 4, 4, 4] and number == 4 and per_run == [0.005] * 3


def test_a_slow_candidate_is_timed_by_its_checked_run_alone():
    kernel = ScriptedKernel([0.4])
    per_run, number = time_kernel(kernel, [], settings(slow_run_seconds=0.5), first_run_seconds=0.6)
    assert kernel.backend.calls == [] and per_run == [0.6] and number == 1


class ScriptedYardstick:
    """A yardstick whose repeats take scripted seconds (seconds: its time on the task's scale)."""

    def __init__(self, per_repeat, seconds, number=1):
        self.per_repeat = list(per_repeat)
        self.seconds = seconds
        self.number = number
        self.repeats = 0

    def time_repeat(self):
        self.repeats += 1
        return self.per_repeat.pop(0) if len(self.per_repeat) > 1 else self.per_repeat[0]


def test_a_paired_repeat_is_the_candidates_time_over_the_yardsticks():
    kernel = ScriptedKernel([0.004])
    yardstick = ScriptedYardstick([0.005], seconds=0.003)   # the candidate takes 0.8 of the yardstick's time
    per_run, number = time_kernel(kernel, [], settings(), first_run_seconds=0.004, yardstick=yardstick)
    assert per_run == [pytest.approx(0.0024)] * 3 and yardstick.repeats == 3 and number == 5


def test_a_slow_phase_that_slows_both_leaves_the_paired_time_as_it_was():
    kernel = ScriptedKernel([0.004, 0.008, 0.004])         # the core runs at half speed in the second repeat
    yardstick = ScriptedYardstick([0.005, 0.010, 0.005], seconds=0.005)
    per_run, _ = time_kernel(kernel, [], settings(), first_run_seconds=0.004, yardstick=yardstick)
    assert per_run == [pytest.approx(0.004)] * 3


def test_a_candidate_clearly_slower_than_the_yardstick_is_timed_by_one_paired_repeat():
    kernel = ScriptedKernel([0.004])
    yardstick = ScriptedYardstick([0.0032], seconds=0.002)   # the candidate takes 1.25 times as long
    per_run, _ = time_kernel(kernel, [], settings(), first_run_seconds=0.004, yardstick=yardstick)
    assert per_run == [pytest.approx(0.0025)] and yardstick.repeats == 1 and 1.25 > CLEARLY_SLOWER


def test_paired_repeats_stop_once_most_are_at_or_above_the_yardstick():
    kernel = ScriptedKernel([0.0042, 0.0041, 0.001])   # 1.05 and 1.025 times the yardstick: its median cannot be lower
    yardstick = ScriptedYardstick([0.004], seconds=0.004)
    per_run, _ = time_kernel(kernel, [], settings(), first_run_seconds=0.004, yardstick=yardstick)
    assert per_run == [pytest.approx(0.0042), pytest.approx(0.0041)] and yardstick.repeats == 2


def test_paired_repeats_go_on_while_the_candidate_may_be_the_fastest():
    kernel = ScriptedKernel([0.0042, 0.0038, 0.0039])   # one repeat slower, then two faster than the yardstick
    yardstick = ScriptedYardstick([0.004], seconds=0.004)
    per_run, _ = time_kernel(kernel, [], settings(), first_run_seconds=0.004, yardstick=yardstick)
    assert len(per_run) == 3 and yardstick.repeats == 3


def test_the_first_candidate_becomes_the_yardstick_with_its_own_times():
    per_run, crowned = settle_yardstick("kernel", [], 5, [0.004, 0.003, 0.005], None)
    assert per_run == [0.004, 0.003, 0.005] and crowned.samples == [0.004, 0.003, 0.005] and crowned.number == 5


def test_a_yardsticks_time_is_the_lower_quartile_of_its_repeats():
    yardstick = Yardstick(ScriptedKernel([0.009]), [], 1, [0.004, 0.003, 0.005, 0.010])
    assert yardstick.seconds == 0.003                         # three of four: the slowest phase does not count
    assert yardstick.time_repeat() == 0.009 and yardstick.samples[-1] == 0.009
    assert Yardstick("kernel", [], 1, [0.002] * 5 + [0.009] * 4).seconds == 0.002


def test_a_faster_candidate_is_timed_by_fresh_pairs_and_becomes_the_yardstick_with_their_times():
    kernel = ScriptedKernel([0.0016])           # fresh pairs: 0.8 of the yardstick's repeat
    yardstick = ScriptedYardstick([0.002], seconds=0.003)
    per_run, crowned = settle_yardstick(kernel, [], 5, [0.002] * 3, yardstick)
    assert per_run == [pytest.approx(0.0024)] * 3 and crowned.samples == [0.0016] * 3


def test_a_candidate_faster_by_luck_gets_the_time_of_its_fresh_pairs_and_is_not_crowned():
    kernel = ScriptedKernel([0.002])            # fresh pairs: as fast as the yardstick
    yardstick = ScriptedYardstick([0.002], seconds=0.003)
    per_run, crowned = settle_yardstick(kernel, [], 5, [0.0025] * 3, yardstick)
    assert per_run == [pytest.approx(0.003)] * 2 and crowned is None and yardstick.repeats == 2


def test_a_fresh_pair_clearly_slower_than_the_yardstick_ends_the_fresh_pairs():
    kernel = ScriptedKernel([0.0024, 0.001])   # the first fresh pair: 1.2 times the yardstick's repeat
    yardstick = ScriptedYardstick([0.002], seconds=0.003)
    per_run, crowned = settle_yardstick(kernel, [], 5, [0.0025] * 3, yardstick)
    assert crowned is None and yardstick.repeats == 1 and per_run == [pytest.approx(0.0036)]


def test_a_candidate_slower_than_the_yardstick_is_not_timed_again():
    yardstick = ScriptedYardstick([0.002], seconds=0.003)
    per_run, crowned = settle_yardstick(ScriptedKernel([0.001]), [], 5, [0.0031] * 3, yardstick)
    assert crowned is None and per_run == [0.0031] * 3 and yardstick.repeats == 0


def test_without_warm_up_a_checked_run_long_enough_is_the_first_repeat():
    kernel = ScriptedKernel([0.03])
    per_run, number = time_kernel(kernel, [], settings(warmup=0), first_run_seconds=0.05)
    assert per_run == [0.05, 0.03, 0.03] and number == 1 and kernel.backend.calls == [1, 1]


def test_without_warm_up_a_checked_run_too_short_for_a_repeat_is_still_a_warm_up():
    kernel = ScriptedKernel([0.004])
    per_run, number = time_kernel(kernel, [], settings(warmup=0), first_run_seconds=0.004)
    assert per_run == [0.004] * 3 and number == 5 and kernel.backend.calls == [5, 5, 5]


def test_without_warm_up_the_checked_run_is_paired_with_the_yardstick_repeat_before_it():
    kernel = ScriptedKernel([0.040])
    yardstick = ScriptedYardstick([0.050], seconds=0.030)   # every pair: 0.8 of the yardstick's repeat
    per_run, number = time_kernel(kernel, [], settings(warmup=0), first_run_seconds=0.040, yardstick=yardstick,
                                  against=0.050)
    assert per_run == [pytest.approx(0.024)] * 3 and number == 1
    assert yardstick.repeats == 2 and kernel.backend.calls == [1, 1]   # the checked pair was the first


def test_a_checked_pair_clearly_slower_than_the_yardstick_ends_the_timing():
    kernel = ScriptedKernel([0.001])
    yardstick = ScriptedYardstick([0.020], seconds=0.020)
    per_run, _ = time_kernel(kernel, [], settings(warmup=0), first_run_seconds=0.030, yardstick=yardstick,
                             against=0.020)
    assert per_run == [pytest.approx(0.030)] and yardstick.repeats == 0 and kernel.backend.calls == []


def test_a_checked_run_without_its_yardstick_repeat_is_not_counted_when_paired():
    kernel = ScriptedKernel([0.040])
    yardstick = ScriptedYardstick([0.040], seconds=0.040)
    per_run, _ = time_kernel(kernel, [], settings(warmup=0), first_run_seconds=0.040, yardstick=yardstick)
    assert len(per_run) == 2 and yardstick.repeats == 2 and kernel.backend.calls == [1, 1]


def test_a_slow_candidates_checked_pair_is_on_the_yardsticks_scale():
    per_run, number = time_kernel(ScriptedKernel([1.0]), [], settings(warmup=0, slow_run_seconds=0.5),
                                  first_run_seconds=0.6, yardstick=ScriptedYardstick([0.2], 0.1), against=0.2)
    assert per_run == [pytest.approx(0.3)] and number == 1


def test_the_checked_run_counts_only_without_warm_up_and_beside_a_one_run_yardstick_repeat():
    assert checked_run_may_count(settings(warmup=0), None)
    assert checked_run_may_count(settings(warmup=0), ScriptedYardstick([0.02], 0.02, number=1))
    assert not checked_run_may_count(settings(warmup=0), ScriptedYardstick([0.002], 0.002, number=5))
    assert not checked_run_may_count(settings(warmup=1), None)
