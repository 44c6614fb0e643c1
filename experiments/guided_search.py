"""Model-guided against unguided Q search: how many measurements a cost model saves.

Run:  .venv/bin/python experiments/guided_search.py --out experiments/results/guided_search.json
      .venv/bin/python experiments/guided_search.py --cases GMM --seeds 0 --unguided 60 --guided 30   # a quick look

Per case and seed: an unguided Q search of --unguided trials, and a Q search guided by a cost model
(--model, learning from its own measurements only) of --guided trials, i.e. at most half the
measurements. Both measure every candidate the same way (built, checked against the reference and
timed in the isolated worker). The figure of merit is the guided search's best over the unguided one's,
and the number of measurements the guided search needed to reach 95% of the unguided best. Both bests are
then re-timed side by side in alternating rounds, so the ratio does not ride on a core's speed phase.
Results are written after every run, so a stopped experiment keeps what it finished.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_benchmark import cases as cases_of, cpu_description  # noqa: E402  (GMM 1024^3 and the YOLO layers)

from explore.finalists import checked_kernel, kernel_timed  # noqa: E402
from explore.optimize import optimize  # noqa: E402
from explore.side_by_side import time_side_by_side  # noqa: E402
from flexsched.target import get_target  # noqa: E402


def first_reaching(history, gflops):
    """The number of measurements after which the best reached gflops (None if never)."""
    for trial, _, best in history.best_curve():
        if best >= gflops:
            return trial
    return None


def run(name, task, seed, trials, model, ratio):
    start = time.perf_counter()
    result = optimize(task, "llvm", trials=trials, method="q", seed=seed, cost_model=model, screen_ratio=ratio,
                      build_kernel=False)
    return result, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["GMM", "C2", "C6", "C9", "C13"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--unguided", type=int, default=200)
    parser.add_argument("--guided", type=int, default=100)
    parser.add_argument("--model", default="xgb")
    parser.add_argument("--ratio", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=9, help="alternating rounds re-timing the two bests")
    parser.add_argument("--out", default="experiments/results/guided_search.json")
    parser.add_argument("--summary", action="store_true", help="only summarise the results file")
    args = parser.parse_args()
    out = Path(args.out)
    if args.summary:
        print_summary(json.loads(out.read_text())["rows"], args.guided)
        return
    rows = json.loads(out.read_text())["rows"] if out.exists() else []
    done = {(r["case"], r["seed"]) for r in rows}
    all_cases = cases_of()
    for seed in args.seeds:
        for name in args.cases:
            if (name, seed) in done:
                continue
            task = all_cases[name]
            plain, plain_s = run(name, task, seed, args.unguided, None, args.ratio)
            guided, guided_s = run(name, task, seed, args.guided, args.model, args.ratio)
            target_gflops = 0.95 * plain.gflops
            inputs = task.random_inputs(seed=1)
            reference = task.evaluate(*inputs)
            calls = []
            for label, result in (("unguided", plain), ("guided", guided)):  # both checked before timing
                kernel, arrays = checked_kernel(task, result.schedule.to_json(), get_target("llvm"), inputs, reference)
                calls.append(kernel_timed(label, kernel, arrays))
            ratio = time_side_by_side(calls, rounds=args.rounds).ratio("guided", "unguided")[0]
            row = {"case": name, "task": str(task), "seed": seed, "model": args.model, "ratio": args.ratio,
                   "unguided_trials": len(plain.history), "guided_trials": len(guided.history),
                   "unguided_gflops": plain.gflops, "guided_gflops": guided.gflops,
                   "search_ratio": guided.gflops / plain.gflops,
                   "guided_reached_95_at": first_reaching(guided.history, target_gflops),
                   "unguided_reached_95_at": first_reaching(plain.history, target_gflops),
                   "unguided_best_at_guided_budget": max((b for t, _, b in plain.history.best_curve()
                                                          if t <= args.guided), default=0.0),
                   "retimed_guided_over_unguided": ratio,
                   "screened_out": guided.screened_out,
                   "unguided_seconds": plain_s, "guided_seconds": guided_s}
            rows.append(row)
            print(json.dumps(row), flush=True)
            out.write_text(json.dumps({"cpu": cpu_description(),
                                       "command": "experiments/guided_search.py", "rows": rows}, indent=1))
    print_summary(rows, args.guided)


def print_summary(rows, guided_trials):
    """Per case, the median over seeds of both figures of merit, and whether the target holds."""
    print(f"case  seeds  median re-timed guided/unguided  median search guided/unguided  "
          f"guided reached 95% within {guided_trials} (of seeds)")
    for name in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == name]
        reached = sum(r["guided_reached_95_at"] is not None for r in mine)
        retimed = statistics.median(r["retimed_guided_over_unguided"] for r in mine)
        search = statistics.median(r["search_ratio"] for r in mine)
        print(f"{name:5} {len(mine):5}  {retimed:31.2f}  {search:30.2f}  {reached}/{len(mine)}")


if __name__ == "__main__":
    main()
