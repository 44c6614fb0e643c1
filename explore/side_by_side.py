"""Timing several calls side by side in alternating rounds (A, B, C, A, B, C, ...).

These machines' cores switch speed for seconds at a time, so one A-then-B timing can be off by
1.7x; every round times each call once, and a ratio is the median of the per-round ratios.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

TARGET_TIMING_SECONDS = 0.05  # calls per timing are chosen so one timing takes about this long


def wall_clock_runs(call, number):
    """Seconds per call of call(), number calls back to back, by the host clock."""
    start = time.perf_counter()
    for _ in range(number):
        call()
    return (time.perf_counter() - start) / number


@dataclass(frozen=True)
class Timed:
    """A call to time and how: time_runs(call, number) gives seconds per call (a back end's
    time_runs on a device, wall_clock_runs on the host)."""

    name: str
    call: object
    time_runs: object = wall_clock_runs


@dataclass(frozen=True)
class SideBySide:
    """Each call's seconds per round (names in the order given) and the rounds timed."""

    names: tuple
    rounds: tuple  # rounds[r][i]: seconds per call of names[i] in round r

    def seconds(self, name):
        """The median over the rounds of one call's seconds."""
        index = self.names.index(name)
        return statistics.median(row[index] for row in self.rounds)

    def ratios(self, name, baseline):
        """Per round, baseline's seconds over name's (above 1: name is faster)."""
        i, j = self.names.index(name), self.names.index(baseline)
        return [row[j] / row[i] for row in self.rounds]

    def ratio(self, name, baseline):
        """(median, lowest, highest) of the per-round ratios baseline / name."""
        values = self.ratios(name, baseline)
        return statistics.median(values), min(values), max(values)

    def fastest(self):
        return min(self.names, key=self.seconds)


def runs_per_timing(timed):
    """Calls of one timing so it takes about TARGET_TIMING_SECONDS (at least one)."""
    timed.call()  # warm-up: first-call costs (allocation, lazy loading) stay out of the timings
    once = timed.time_runs(timed.call, 1)
    return max(1, int(TARGET_TIMING_SECONDS / max(1e-7, once)))


def time_side_by_side(calls, rounds=5, repeats=3):
    """A SideBySide of calls (Timed) timed in `rounds` alternating rounds; each round's time of a
    call is the median of `repeats` timings, all calls with the same count of runs per timing."""
    if not calls:
        raise ValueError("nothing to time")
    number = min(runs_per_timing(timed) for timed in calls)  # the slowest call sets a count fair to all
    table = []
    for _ in range(max(1, rounds)):
        table.append(tuple(statistics.median(timed.time_runs(timed.call, number) for _ in range(repeats))
                           for timed in calls))
    return SideBySide(tuple(timed.name for timed in calls), tuple(table))
