"""CPU benchmark: best of a search over each CPU space against PyTorch (oneDNN/MKL).

Run:  .venv/bin/python experiments/cpu_benchmark.py --trials 200            # GMM 1024^3 + 15 YOLO layers
      .venv/bin/python experiments/cpu_benchmark.py --cases GMM C2 --trials 50
      .venv/bin/python experiments/cpu_benchmark.py --method q --trials 60   # explore's Q-method instead

The default search is random distinct points; --method q or p runs explore's search instead.
The same cases run as a sweep: `flexsched sweep experiments/sweep_yolo.toml`.

This is a thin wrapper: explore's optimize() searches (every candidate built and timed in an
isolated worker and checked against the reference first), its finalists phase re-checks and
re-times the search's fastest few side by side, and the fastest is timed against the PyTorch
call (flexsched.library) in alternating rounds (explore.side_by_side): the ratio is the median
of the per-round ratios, with its range, because these machines' cores change speed for
seconds at a time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import resource
import statistics
import time
from pathlib import Path

import torch

from analysis import analyze
from codegen.evaluators import CpuEvaluator
from codegen.kernel import build
from codegen.measure import compare_array
from explore.finalists import kernel_timed
from explore.optimize import optimize
from explore.records import load_records
from explore.side_by_side import time_side_by_side
from flexsched.cpus import host
from flexsched.library import checked_library
from flexsched.registry import get_task
from flexsched.schedule import Layout, with_blocked_interface
from flexsched.target import get_target

# The final rounds against torch have timed a kernel up to 2x slower than the finalists phase just
# before, where a fresh process re-timed it as fast as the finalists (docs/results/cpu_benchmark.md).
FINAL_DRIFT = 1.25
# MeasureResult's seconds per phase, reported per case as medians over the search's candidates.
PHASES = ("lower", "emit", "optimize", "machine_code", "check", "timing", "wall")

YOLO = [(3, 64, 448, 7, 2), (64, 192, 112, 3, 1), (192, 128, 56, 1, 1), (128, 256, 56, 3, 1),
        (256, 256, 56, 1, 1), (256, 512, 56, 3, 1), (512, 256, 28, 1, 1), (256, 512, 28, 3, 1),
        (512, 512, 28, 1, 1), (512, 1024, 28, 3, 1), (1024, 512, 14, 1, 1), (512, 1024, 14, 3, 1),
        (1024, 1024, 14, 3, 1), (1024, 1024, 14, 3, 2), (1024, 1024, 7, 3, 1)]


def cpu_description():
    """The CPU's marketing name, LLVM's name for it and its vector width, for results files."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    name = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown CPU")
    return f"{name} ({host()[0]}), {get_target('llvm').device}"


def host_load():
    """(involuntary context switches of this process, CPU seconds every other process has used) so far,
    from /proc; (0, 0.0) where there is none. Around the final rounds they say whether something
    took the cores from the kernels there."""
    switches = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
    try:
        fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        own = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return switches, 0.0
    busy = sum(fields) - fields[3] - fields[4]   # all but idle and iowait
    return switches, (busy - int(own[11]) - int(own[12])) / os.sysconf("SC_CLK_TCK")


def cases():
    """{case name: task}."""
    result = {"GMM": get_task("GMM", 1024, 1024, 1024)}
    for number, (C, K, size, k, stride) in enumerate(YOLO, 1):
        result[f"C{number}"] = get_task("C2D", 1, C, size, size, K, k, stride, k // 2)
    return result


def copy_other_cases(earlier, path, tasks):
    """Start the record file `path` with the lines of `earlier` whose task is none of `tasks`."""
    with open(path, "w") as out:
        for record in load_records(earlier):
            if not any(record.same_task(task) for task in tasks):
                out.write(json.dumps(record.data) + "\n")


def pass_sizes(text):
    """--passes: "N" (N equal passes) or the trials of each pass ("160,40")."""
    parts = tuple(int(part) for part in text.split(","))
    if any(part < 1 for part in parts):
        raise argparse.ArgumentTypeError(f"passes must be positive, got {text}")
    return parts


def pass_ends(sizes, trials):
    """The trials each case has done at the end of each pass (the last: `trials`)."""
    if len(sizes) == 1:   # a count of equal passes
        if sizes[0] > trials:
            raise ValueError(f"{sizes[0]} passes of {trials} trials leave some empty")
        return tuple(trials * done // sizes[0] for done in range(1, sizes[0] + 1))
    if sum(sizes) != trials:
        raise ValueError(f"the passes' trials {list(sizes)} add up to {sum(sizes)}, not --trials {trials}")
    return tuple(itertools.accumulate(sizes))


def search_pass(task, args, evaluator, trials, resume):
    """One of a case's earlier passes (--passes): its search resumed up to `trials` in all, with no
    finalists and no final build; (seconds, starts carried over from the other cases)."""
    start = time.perf_counter()
    result = optimize(task, get_target("llvm"), trials=trials, method=args.method, seed=args.seed,
                      evaluator=evaluator, start_pool=args.start_pool, log=args.records, resume=resume,
                      transfer_from=args.records if args.transfer else None, build_kernel=False)
    return time.perf_counter() - start, result.transferred_starts


def run_case(name, task, args, evaluator, earlier=(0.0, 0)):
    """The case's (last) search, its finalists and the rounds against torch; earlier: the seconds and
    carried-over starts of its earlier passes, whose records the search resumes."""
    info = analyze(task)
    target = get_target("llvm")
    start = time.perf_counter()
    result = optimize(task, target, trials=args.trials, method=args.method, seed=args.seed, evaluator=evaluator,
                      finalists=args.finalists, start_pool=args.start_pool, log=args.records,
                      resume=len(args.passes) > 1, transfer_from=args.records if args.transfer else None)
    search_seconds = time.perf_counter() - start + earlier[0]
    entries = result.history.entries
    failures = {}
    for entry in entries:
        if not entry.ok:
            failures[entry.evaluation.status] = failures.get(entry.evaluation.status, 0) + 1
    inputs = task.random_inputs(seed=1)
    reference = task.evaluate(*inputs)   # once per case: the reference evaluator is slow on big layers
    library = checked_library(task, target, inputs, reference)
    ours = kernel_timed("ours", result.kernel, result.kernel.arguments(inputs))
    contestants = [ours, library]
    prepacked = prepacked_kernel(task, result.schedule, inputs, reference)
    if prepacked is not None:
        contestants.append(kernel_timed("ours, weights pre-packed", prepacked, prepacked.arguments(inputs)))
    load, started = host_load(), time.perf_counter()
    side = time_side_by_side(contestants, args.rounds)
    load_after, rounds_seconds = host_load(), time.perf_counter() - started
    ratios = side.ratios("ours", library.name)
    prepacked_ratios = side.ratios("ours, weights pre-packed", library.name) if prepacked is not None else []
    compiles = [e.evaluation.details.get("compile_seconds", 0.0) for e in entries if e.ok and e.evaluation.details]
    measured = [e.evaluation.details for e in entries if e.evaluation.details]
    search_loop_seconds = entries[-1].elapsed   # the search alone: no finalists, no final build
    return {
        "case": name, "task": str(task), "method": args.method, "trials": len(entries), "ok": result.history.num_ok,
        "failures": failures, "search_seconds": search_seconds, "candidates_per_second": len(entries) / search_seconds,
        "priced_starts": result.priced_starts, "transferred_starts": result.transferred_starts + earlier[1],
        "passes": list(args.passes),
        "compile_seconds_mean": statistics.mean(compiles) if compiles else 0.0,
        "search_loop_seconds": search_loop_seconds, "search_candidates_per_second": len(entries) / search_loop_seconds,
        "phase_seconds_median": {phase: statistics.median(d.get(f"{phase}_seconds", 0.0) for d in measured)
                                 for phase in PHASES} if measured else {},
        "kernel_cache_hits": sum(1 for d in measured if d.get("kernel_cache")),
        "timed_once": sum(1 for d in measured if d.get("status") == "ok" and d.get("repeats") == 1),
        "best_seconds": side.seconds("ours"), "torch_seconds": side.seconds(library.name),
        "gflops": info.flops / side.seconds("ours") / 1e9, "torch_gflops": info.flops / side.seconds(library.name) / 1e9,
        "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
        "prepacked_inputs": sorted(prepacked.blocked) if prepacked is not None else [],
        "prepacked_ratio_median": statistics.median(prepacked_ratios) if prepacked_ratios else None,
        "cpu": cpu_description(),
        "finalist_seconds": [f.seconds for f in result.finalists],
        # What else ran during the final rounds: this process preempted, and other processes' cores.
        "final_rounds_preemptions_per_second": (load_after[0] - load[0]) / rounds_seconds,
        "final_rounds_other_cores": (load_after[1] - load[1]) / rounds_seconds,
        "best_schedule": json.loads(result.schedule.to_json()),
    }


def prepacked_kernel(task, schedule, inputs, reference):
    """The best schedule with the weights it stores blocked passed blocked by the caller (as an inference
    engine packs weights once), checked against the reference; None when it blocks no weight."""
    # The weights: every input but the first, which is the activation in these cases (a convolution's I,
    # GMM's A); an activation blocked inside the kernel is converted on every call, as in use.
    blocked = {step.tensor for step in schedule.steps if isinstance(step, Layout)} & {t.name for t in task.inputs[1:]}
    if not blocked:
        return None
    kernel = build(task, with_blocked_interface(schedule, blocked))
    for output, expected in zip(kernel.run(*inputs), reference):
        wrong = compare_array(output, expected)
        if wrong:   # a fast wrong kernel is no result
            raise RuntimeError(f"{task} with {', '.join(sorted(blocked))} pre-packed: {wrong}")
    return kernel


def phase_line(row):
    """Where a case's candidates spent their time: median seconds per phase, and the search's rate."""
    phases = " ".join(f"{phase.replace('_', ' ')} {seconds:.3f}" for phase, seconds in
                      row["phase_seconds_median"].items())
    return (f"     median s per candidate: {phases}; {row['search_candidates_per_second']:.2f} cand/s in the "
            f"search loop, {row['kernel_cache_hits']} kernel cache hits, {row['timed_once']} timed once")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="*", default=None, help="GMM and/or C1..C15 (default: all)")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--finalists", type=int, default=5,
                        help="the search's fastest few, timed again side by side to pick the best")
    parser.add_argument("--method", default="random", choices=("random", "q", "p"),
                        help="random: distinct random points; q/p: explore's Q- or P-method")
    parser.add_argument("--start-pool", type=int, default=0, metavar="N",
                        help="q/p: price N random points with the static CPU model and start from its best "
                             "(0: random starts; a quarter of N where starts carried over)")
    parser.add_argument("--records", metavar="FILE",
                        help="log every case's evaluated points to this new record file")
    parser.add_argument("--transfer", action="store_true",
                        help="with --records: each case also starts from the best of each kind of kernel of the cases "
                             "tuned before it in this run whose space has the same knobs (explore.transfer)")
    parser.add_argument("--records-from", metavar="EARLIER",
                        help="with --records: the new file starts with EARLIER's records of the cases not run now, "
                             "so --transfer carries over layers tuned in another run (GMM's best to the 1x1 layers)")
    parser.add_argument("--passes", type=pass_sizes, default=(1,), metavar="N|T1,T2,...",
                        help="with --records: spread each case's trials over N equal passes over the cases (or "
                             "passes of T1, T2, ... trials), each resuming its search, so with --transfer every case "
                             "starts from what all the others found in the passes before (as a network is tuned "
                             "task by task in rounds)")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--min-run-seconds", type=float, default=0.01,
                        help="shortest timed repeat of a search's candidate (paired with the yardstick's)")
    parser.add_argument("--slow-run", type=float, default=0.5,
                        help="candidates slower than this per run are timed once (they cannot win)")
    parser.add_argument("--out", default="experiments/results/cpu_benchmark.json")
    args = parser.parse_args()
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    all_cases = cases()
    names = args.cases or list(all_cases)
    unknown = [name for name in names if name not in all_cases]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(all_cases)}")
    if args.transfer and not args.records:
        parser.error("--transfer starts from the earlier cases' records: give --records FILE")
    try:
        args.passes = pass_ends(args.passes, args.trials)
    except ValueError as err:
        parser.error(f"--passes: {err}")
    if len(args.passes) > 1 and not args.records:
        parser.error("--passes resumes each case's search from its records: give --records FILE")
    if args.records and Path(args.records).exists():
        parser.error(f"--records {args.records} exists: a shared record file would hand this run earlier runs' points")
    if args.records_from:
        if not args.records:
            parser.error("--records-from copies an earlier run's records into --records FILE: give --records FILE")
        copy_other_cases(args.records_from, args.records, [all_cases[name] for name in names])
    rows = []
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    settings = dict(timeout_s=args.timeout, repeats=3, min_run_seconds=args.min_run_seconds, slow_run_seconds=args.slow_run)
    with CpuEvaluator(**settings) as evaluator:
        earlier = {name: (0.0, 0) for name in names}   # seconds and carried-over starts of the earlier passes
        for done, end in enumerate(args.passes[:-1], 1):
            for name in names:
                seconds, carried = search_pass(all_cases[name], args, evaluator, end, resume=done > 1)
                earlier[name] = (earlier[name][0] + seconds, earlier[name][1] + carried)
                print(f"{name:4} pass {done} of {len(args.passes)}: {end} trials, {carried} starts carried over",
                      flush=True)
        for name in names:
            row = run_case(name, all_cases[name], args, evaluator, earlier[name])
            rows.append(row)
            out_path.write_text(json.dumps(rows, indent=1))  # kept after every case
            print(f"{name:4} {row['gflops']:7.1f} GFLOPS vs torch {row['torch_gflops']:7.1f}: ratio "
                  f"{row['ratio_median']:.2f} ({row['ratio_min']:.2f}-{row['ratio_max']:.2f}), "
                  f"{row['ok']}/{row['trials']} ok, compile {row['compile_seconds_mean']:.2f} s, "
                  f"{row['candidates_per_second']:.2f} cand/s", flush=True)
            print(phase_line(row), flush=True)
            if row["prepacked_ratio_median"] is not None:
                print(f"     with {', '.join(row['prepacked_inputs'])} pre-packed (converted once ahead of time): "
                      f"ratio {row['prepacked_ratio_median']:.2f}", flush=True)
            finalist_seconds = min(row["finalist_seconds"], default=row["best_seconds"])
            if row["best_seconds"] > FINAL_DRIFT * finalist_seconds:
                print(f"     the final rounds timed the kernel {row['best_seconds'] / finalist_seconds:.1f}x slower than "
                      f"the finalists phase did (other processes took {row['final_rounds_other_cores']:.2f} of a core "
                      f"meanwhile; this one was preempted {row['final_rounds_preemptions_per_second']:.0f} times a "
                      f"second): re-time it with experiments/cpu_retime.py", flush=True)
    conv = [row["ratio_median"] for row in rows if row["case"].startswith("C")]
    if conv:
        print(f"YOLO geometric-mean ratio over {len(conv)} layers: "
              f"{math.exp(statistics.mean(math.log(r) for r in conv)):.3f}")


if __name__ == "__main__":
    main()
