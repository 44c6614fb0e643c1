"""Report of an exploration study: trials and time each method needs to reach 95% of the best
performance any method found, as a markdown table, and plots of best GFLOPS against trials and
against wall time (PNG, when matplotlib is installed).

Run:  .venv/bin/python experiments/exploration_report.py experiments/results/exploration_study.json \\
          [--plots experiments/results/plots] [--fraction 0.95]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

METHOD_NAMES = {"q": "Q-method", "p": "P-method", "random": "random (AutoTVM-style)"}


def first_reaching(curve, threshold):
    """(trial, seconds) of the first row whose best reaches threshold, or None."""
    for trial, seconds, best in curve:
        if best >= threshold:
            return trial, seconds
    return None


def summarise(runs, fraction):
    """{case: {"best": GFLOPS, "methods": {method: {...}}}} over seeds."""
    by_case = defaultdict(list)
    for run in runs:
        by_case[run["case"]].append(run)
    summary = {}
    for case, case_runs in by_case.items():
        best_any = max(run["best_gflops"] for run in case_runs)
        threshold = fraction * best_any
        methods = {}
        for method in [m for m in METHOD_NAMES if any(r["method"] == m for r in case_runs)]:
            runs_of = [r for r in case_runs if r["method"] == method]
            reached = [first_reaching(r["curve"], threshold) for r in runs_of]
            hits = [hit for hit in reached if hit is not None]
            methods[method] = {
                "seeds": len(runs_of), "reached": len(hits),
                "trials": statistics.median(h[0] for h in hits) if hits else None,
                "seconds": statistics.median(h[1] for h in hits) if hits else None,
                "final_gflops": statistics.median(r["best_gflops"] for r in runs_of),
                "total_trials": statistics.median(r["trials"] for r in runs_of),
            }
        summary[case] = {"best": best_any, "threshold": threshold, "methods": methods}
    return summary


def markdown(summary, fraction):
    percent = f"{fraction:.0%}"
    lines = [f"| case | best any (GFLOPS) | method | reached {percent} | trials to {percent} (median) | "
             f"seconds to {percent} (median) | final best (median GFLOPS) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for case, data in summary.items():
        for method, row in data["methods"].items():
            trials = f"{row['trials']:.0f}" if row["trials"] is not None else "-"
            seconds = f"{row['seconds']:.0f}" if row["seconds"] is not None else "-"
            lines.append(f"| {case} | {data['best']:.1f} | {METHOD_NAMES[method]} | {row['reached']}/{row['seeds']} "
                         f"| {trials} | {seconds} | {row['final_gflops']:.1f} |")
    lines.append("")
    lines.append(f"Q-method time to {percent} relative to the others (median over seeds that reached it; "
                 "the paper: 27.6% of the P-method's, 52.9% of AutoTVM's):")
    lines.append("")
    for case, data in summary.items():
        q = data["methods"].get("q", {}).get("seconds")
        parts = []
        for other in ("p", "random"):
            theirs = data["methods"].get(other, {}).get("seconds")
            if q is not None and theirs:
                parts.append(f"{q / theirs:.0%} of {METHOD_NAMES[other]}")
            elif other in data["methods"]:
                parts.append(f"n/a against {METHOD_NAMES[other]} (one of them never reached {percent})")
        lines.append(f"- {case}: " + ("; ".join(parts) if parts else "n/a"))
    return "\n".join(lines) + "\n"


def plot(runs, directory):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots")
        return []
    directory.mkdir(parents=True, exist_ok=True)
    colours = {"q": "tab:red", "p": "tab:blue", "random": "tab:green"}
    written = []
    for case in sorted({run["case"] for run in runs}):
        figure, (by_trial, by_time) = plt.subplots(1, 2, figsize=(11, 4))
        labelled = set()
        for run in (r for r in runs if r["case"] == case):
            trials, seconds, best = zip(*run["curve"])
            label = METHOD_NAMES[run["method"]] if run["method"] not in labelled else None
            labelled.add(run["method"])
            by_trial.step(trials, best, where="post", color=colours[run["method"]], alpha=0.8, label=label)
            by_time.step(seconds, best, where="post", color=colours[run["method"]], alpha=0.8)
        by_trial.set_xlabel("trials")
        by_time.set_xlabel("wall time (s)")
        for axes in (by_trial, by_time):
            axes.set_ylabel("best GFLOPS so far")
            axes.grid(alpha=0.3)
        by_trial.legend()
        figure.suptitle(f"{case}: exploration on this CPU (one line per seed)")
        figure.tight_layout()
        path = directory / f"exploration_{case}.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("study", help="the JSON written by exploration_study.py")
    parser.add_argument("--fraction", type=float, default=0.95)
    parser.add_argument("--plots", help="folder for PNG plots (default: beside the study JSON)")
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()
    study = json.loads(Path(args.study).read_text())
    summary = summarise(study["runs"], args.fraction)
    text = markdown(summary, args.fraction)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    for path in plot(study["runs"], Path(args.plots) if args.plots else Path(args.study).parent / "plots"):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
