"""The 15 YOLO convolution layers on the VU9P: the model-searched design against a fixed
hand-written design (Zhang et al. FPGA'15 style, the FlexTensor paper's FPGA baseline), in
estimated GFLOPS per layer and the geometric-mean ratio (the paper reports 1.5x).

Run:  python experiments/fpga_yolo.py [--trials 20000] [--device vu9p]
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
from fpga_model.model import FpgaModel  # noqa: E402
from fpga_model.search import search_design  # noqa: E402
from space import generate  # noqa: E402

YOLO = [(3, 64, 448, 7, 2), (64, 192, 112, 3, 1), (192, 128, 56, 1, 1), (128, 256, 56, 3, 1),
        (256, 256, 56, 1, 1), (256, 512, 56, 3, 1), (512, 256, 28, 1, 1), (256, 512, 28, 3, 1),
        (512, 512, 28, 1, 1), (512, 1024, 28, 3, 1), (1024, 512, 14, 1, 1), (512, 1024, 14, 3, 1),
        (1024, 1024, 14, 3, 1), (1024, 1024, 14, 3, 2), (1024, 1024, 7, 3, 1)]
# The baseline: one design for every layer, as a hand-written kernel would be: 64 output x 16
# input channels of PEs (1024 PEs, 5120 of the VU9P's 6840 DSPs), 14 x 14 output tiles.
BASELINE = {"Tm": 64, "Tn": 16, "Tr": 14, "Tc": 14}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20000, help="model evaluations per layer")
    parser.add_argument("--device", default="vu9p")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(HERE / "results" / "fpga_yolo.json"))
    args = parser.parse_args(argv)
    target = get_target(f"fpga:{args.device}")
    rows = []
    for number, (C, K, size, k, stride) in enumerate(YOLO, 1):
        task = get_task("C2D", 1, C, size, size, K, k, stride, k // 2)
        info = analyze(task)
        space = generate(info, target)
        start = time.perf_counter()
        design = search_design(task, target, args.trials, args.seed, space=space)
        elapsed = time.perf_counter() - start
        baseline = FpgaModel(task, args.device, info=info).estimate(tiled_conv_config(info, **BASELINE))
        searched = design.evaluation.details
        rows.append({"layer": f"C{number}", "task": info.task, "searched_gflops": searched["gflops"],
                     "baseline_gflops": baseline.gflops, "ratio": searched["gflops"] / baseline.gflops,
                     "searched": {key: searched[key] for key in ("dsp", "bram", "bound", "latency_s")},
                     "baseline": {"dsp": baseline.dsp, "bram": baseline.bram, "bound": baseline.bound,
                                  "feasible": baseline.feasible, "reason": baseline.reason},
                     "config": design.config.to_dict(), "trials": design.trials, "search_s": elapsed})
        print(f"C{number}: searched {searched['gflops']:.1f} GFLOPS, baseline {baseline.gflops:.1f} "
              f"({elapsed:.1f} s, {design.trials / elapsed:.0f} designs/s)", file=sys.stderr)
    geomean = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"device": args.device, "trials": args.trials, "seed": args.seed,
                                          "baseline": BASELINE, "layers": rows, "geomean_ratio": geomean},
                                         indent=1) + "\n")
    print("| layer | task | searched GFLOPS | DSP | BRAM18K | bound | baseline GFLOPS | bound | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        s, b = r["searched"], r["baseline"]
        print(f"| {r['layer']} | {r['task']} | {r['searched_gflops']:.1f} | {s['dsp']} | {s['bram']} | {s['bound']} "
              f"| {r['baseline_gflops']:.1f} | {b['bound']} | {r['ratio']:.2f} |")
    print(f"\ngeometric-mean ratio (searched / baseline) over {len(rows)} layers: {geomean:.2f}")


if __name__ == "__main__":
    main()
