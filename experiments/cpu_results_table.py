"""Print the CPU benchmark results (JSON from cpu_benchmark.py) as a markdown table.

Run: .venv/bin/python experiments/cpu_results_table.py experiments/results/cpu_benchmark_*.json
"""

import json
import math
import statistics
import sys


def case_order(row):
    """GMM first, then the YOLO layers by number, whatever order the files came in."""
    name = row["case"]
    return (0, 0) if name == "GMM" else (1, int(name[1:]))


def main(paths):
    rows = sorted((row for path in paths for row in json.load(open(path))), key=case_order)
    print("| case | task | trials (ok) | ours GFLOPS | torch GFLOPS | ratio (range) | weights pre-packed | "
          "compile s | candidates/s (search loop) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        if "error" in row:
            print(f"| {row['case']} | | | | | {row['error']} | | | |")
            continue
        prepacked = row.get("prepacked_ratio_median")
        loop_rate = row.get("search_candidates_per_second")
        print(f"| {row['case']} | {row['task']} | {row['trials']} ({row['ok']}) | {row['gflops']:.1f} | "
              f"{row['torch_gflops']:.1f} | {row['ratio_median']:.2f} ({row['ratio_min']:.2f}–{row['ratio_max']:.2f}) | "
              f"{'' if prepacked is None else f'{prepacked:.2f}'} | {row['compile_seconds_mean']:.2f} | "
              f"{row['candidates_per_second']:.2f}{'' if loop_rate is None else f' ({loop_rate:.2f})'} |")
    conv = [row["ratio_median"] for row in rows if row["case"].startswith("C") and "error" not in row]
    if conv:
        mean = math.exp(statistics.mean(math.log(r) for r in conv))
        print(f"\nYOLO geometric-mean ratio over {len(conv)} layers: {mean:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
