"""The 15 YOLO convolution layers on the VU9P: the model-searched design against a fixed
hand-written design (Zhang et al. FPGA'15 style, the FlexTensor paper's FPGA baseline), in
estimated GFLOPS per layer and the geometric-mean ratio (the paper reports 1.5x).

The search is explore's (explore.optimize, the FPGA model as the evaluator), by default the
Q-method; the same budget is also spent by the other methods (--also) as a check on it.

Run:  python experiments/fpga_yolo.py [--trials 1000] [--method q] [--starts 16] [--also p,random] [--device vu9p]
Writes experiments/results/fpga_yolo.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from fpga_designs import tiled_conv_config  # noqa: E402

from analysis import analyze  # noqa: E402
from flexsched.registry import get_task  # noqa: E402
from flexsched.target import get_target  # noqa: E402
from explore.optimize import optimize  # noqa: E402
from fpga_model.model import FpgaModel  # noqa: E402

YOLO = [(3, 64, 448, 7, 2), (64, 192, 112, 3, 1), (192, 128, 56, 1, 1), (128, 256, 56, 3, 1),
        (256, 256, 56, 1, 1), (256, 512, 56, 3, 1), (512, 256, 28, 1, 1), (256, 512, 28, 3, 1),
        (512, 512, 28, 1, 1), (512, 1024, 28, 3, 1), (1024, 512, 14, 1, 1), (512, 1024, 14, 3, 1),
        (1024, 1024, 14, 3, 1), (1024, 1024, 14, 3, 2), (1024, 1024, 7, 3, 1)]
# The baseline: one design for every layer, as a hand-written kernel would be: 64 output x 16
# input channels of PEs (1024 PEs, 5120 of the VU9P's 6840 DSPs), 14 x 14 output tiles.
BASELINE = {"Tm": 64, "Tn": 16, "Tr": 14, "Tc": 14}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000, help="model evaluations per layer")
    parser.add_argument("--method", default="q", choices=("q", "p", "random"), help="explore's search method")
    parser.add_argument("--starts", type=int, default=16,
                        help="explore's start points per round (default 16; with 4, q lost C4 and C10 to the baseline)")
    parser.add_argument("--also", default="p,random", help="other methods run on the same budget ('' for none)")
    parser.add_argument("--device", default="vu9p")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(HERE / "results" / "fpga_yolo.json"))
    args = parser.parse_args(argv)
    target = get_target(f"fpga:{args.device}")
    also = [method for method in args.also.split(",") if method and method != args.method]
    rows = []
    for number, (C, K, size, k, stride) in enumerate(YOLO, 1):
        task = get_task("C2D", 1, C, size, size, K, k, stride, k // 2)
        info = analyze(task)
        start = time.perf_counter()
        result = optimize(task, target, trials=args.trials, method=args.method, seed=args.seed, starts=args.starts)
        elapsed = time.perf_counter() - start
        others = {method: optimize(task, target, trials=args.trials, method=method, seed=args.seed,
                                   starts=args.starts).gflops
                  for method in also}
        baseline = FpgaModel(task, args.device, info=info).estimate(tiled_conv_config(info, **BASELINE))
        searched = result.history.best.evaluation.details
        pe = next(node["pe"] for node in searched["nodes"] if node["name"] == "O")
        rows.append({"layer": f"C{number}", "task": info.task, "searched_gflops": searched["gflops"],
                     "baseline_gflops": baseline.gflops, "ratio": searched["gflops"] / baseline.gflops,
                     "searched": {"pe": pe, **{key: searched[key] for key in ("dsp", "bram", "bound", "latency_s")}},
                     "baseline": {"pe": baseline.nodes[0].pe, "dsp": baseline.dsp, "bram": baseline.bram,
                                  "bound": baseline.bound, "feasible": baseline.feasible, "reason": baseline.reason},
                     "other_methods_gflops": others, "config": result.config.to_dict(), "trials": result.trials,
                     "feasible_trials": result.history.num_ok, "search_s": elapsed})
        print(f"C{number}: {args.method} {searched['gflops']:.1f} GFLOPS, baseline {baseline.gflops:.1f}, "
              + "".join(f"{m} {g:.1f}, " for m, g in others.items())
              + f"({elapsed:.1f} s, {result.history.num_ok}/{result.trials} fit)", file=sys.stderr)
    geomean = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    others_geomean = {m: math.exp(sum(math.log(r["other_methods_gflops"][m] / r["baseline_gflops"]) for r in rows)
                                  / len(rows)) for m in also}
    Path(args.out).write_text(json.dumps({"device": args.device, "method": args.method, "trials": args.trials,
                                          "starts": args.starts,
                                          "seed": args.seed, "baseline": BASELINE, "layers": rows,
                                          "geomean_ratio": geomean, "other_methods_geomean_ratio": others_geomean},
                                         indent=1) + "\n")
    heads = "".join(f" {m} GFLOPS |" for m in also)
    print(f"| layer | task | searched GFLOPS | PE | DSP | BRAM18K | bound | baseline GFLOPS | bound | ratio |{heads}")
    print("| --- " * (10 + len(also)) + "|")
    for r in rows:
        s, b = r["searched"], r["baseline"]
        print(f"| {r['layer']} | {r['task']} | {r['searched_gflops']:.1f} | {s['pe']} | {s['dsp']} | {s['bram']} "
              f"| {s['bound']} | {r['baseline_gflops']:.1f} | {b['bound']} | {r['ratio']:.2f} |"
              + "".join(f" {r['other_methods_gflops'][m]:.1f} |" for m in also))
    print(f"\ngeometric-mean ratio (searched / baseline) over {len(rows)} layers: {geomean:.2f}"
          + "".join(f"; {m}: {g:.2f}" for m, g in others_geomean.items()))


if __name__ == "__main__":
    main()
