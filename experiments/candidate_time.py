"""Where a search's candidates spent their time, from its records: build, check and timing, by how
much slower than the search's best each candidate ran.

Run:  .venv/bin/python experiments/candidate_time.py R --cases C6 C10

R is a record file the benchmark wrote (experiments/cpu_benchmark.py --records R); the records'
own phase seconds are summed, nothing is run. The builds of a batch run side by side on the
builders (one per core), the check and timing one candidate at a time, so a search's span is
about build / cores + check + timing, plus what the search itself costs; the report gives that
remainder. Timing depends on how close a candidate comes to the yardstick (codegen/measure.py):
one within a few percent gets all its paired repeats, one far slower its checked run alone.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import statistics
from pathlib import Path

from explore.records import load_records
from flexsched.target import host_cores

from cpu_benchmark import cases

BANDS = (1.1, 1.5, 2.0, 3.0, math.inf)   # upper bounds of a candidate's time over the best's
BUILD_PHASES = ("lower_seconds", "emit_seconds", "optimize_seconds", "machine_code_seconds")


def band_of(ratio):
    """A label of the first band whose bound is above ratio (the last takes the rest), sorting as the bands do."""
    index = bisect.bisect_right(BANDS[:-1], ratio)
    return f"{index} < {BANDS[index]:g}" if BANDS[index] < math.inf else f"{index} >= {BANDS[-2]:g}"


def seconds_of(record):
    """A record's measured seconds; infinite for a failed candidate."""
    result = record.data["result"]
    return result["seconds"] if result["status"] == "ok" else math.inf


def case_report(records, cores):
    """{candidates, span, per band: count, build, check, timing, repeats} of one case's records."""
    best = min(map(seconds_of, records))
    bands = {}
    for record in records:
        details = record.data["result"].get("details") or {}
        band = bands.setdefault(band_of(seconds_of(record) / best), {"count": 0, "build": 0.0, "check": 0.0,
                                                                     "timing": 0.0, "repeats": 0})
        band["count"] += 1
        band["build"] += sum(details.get(phase, 0.0) for phase in BUILD_PHASES)
        band["check"] += details.get("check_seconds", 0.0)
        band["timing"] += details.get("timing_seconds", 0.0)
        band["repeats"] += details.get("repeats", 0)
    elapsed = [record.data["elapsed"] for record in records]
    span = max(elapsed) - min(elapsed)
    spent = sum(band["build"] / cores + band["check"] + band["timing"] for band in bands.values())
    return {"candidates": len(records), "span": span, "candidates_per_second": len(records) / span,
            "remainder": span - spent, "runs_median": runs_median(records), "bands": bands}


def runs_median(records):
    """The median over the measured candidates of their check and timing seconds over their own
    measured seconds: what the timing procedure costs in kernel runs, the yardstick's included, the
    same in a fast or a slow phase of the core (0 without any)."""
    runs = []
    for record in records:
        seconds, details = seconds_of(record), record.data["result"].get("details") or {}
        if math.isfinite(seconds) and seconds > 0:
            runs.append((details.get("check_seconds", 0.0) + details.get("timing_seconds", 0.0)) / seconds)
    return statistics.median(runs) if runs else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", help="a record file of experiments/cpu_benchmark.py --records")
    parser.add_argument("--cases", nargs="*", default=None, help="GMM and/or C1..C15 (default: every case in R)")
    parser.add_argument("--out", help="write the report to this JSON file")
    args = parser.parse_args()
    records = load_records(args.records)
    cores = host_cores()
    report = {}
    for name, task in cases().items():
        if args.cases is not None and name not in args.cases:
            continue
        mine = [record for record in records if record.same_task(task)]
        if not mine:
            continue
        row = report[name] = case_report(mine, cores)
        print(f"{name:4} {row['candidates']} candidates in {row['span']:.1f} s ({row['candidates_per_second']:.2f}/s); "
              f"the search itself and waits {row['remainder']:.1f} s; check and timing {row['runs_median']:.2f} "
              f"of a candidate's own run times (median)")
        for label, band in sorted(row["bands"].items()):
            print(f"     {label.split(' ', 1)[1]:>6} x the best: {band['count']:3d}, build {band['build']:5.1f} s "
                  f"(/{cores} cores {band['build'] / cores:5.1f}), check {band['check']:5.1f} s, "
                  f"timing {band['timing']:5.1f} s, repeats each {band['repeats'] / band['count']:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"records": args.records, "cores": cores, "cases": report}, indent=1))


if __name__ == "__main__":
    main()
