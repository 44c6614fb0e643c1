"""Validate the FPGA model against a published accelerator: Zhang et al., "Optimizing FPGA-based
Accelerator Design for Deep Convolutional Neural Networks", FPGA'15 (Virtex-7 VX485T on a VC707,
100 MHz, float32, Tm = 64, Tn = 7, AlexNet's five convolution layers, 61.62 GFLOPS reported).

Run:  python experiments/fpga_validation.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fpga_designs import tiled_conv_config  # noqa: E402

from analysis import analyze  # noqa: E402
from flexsched.registry import get_task  # noqa: E402
from fpga_model.model import FpgaModel  # noqa: E402

REPORTED_GFLOPS = 61.62  # Zhang et al. FPGA'15, the implemented accelerator, all conv layers
# AlexNet (with its two-GPU groups): name, task, Tr = Tc (ours: the paper's per-layer tiles
# were not checked here; these divide each output size and fit the VX485T's BRAM).
LAYERS = [
    ("conv1", ("C2D", 1, 3, 227, 227, 96, 11, 4, 0), 11),
    ("conv2", ("GRP", 1, 96, 27, 27, 256, 5, 1, 2, 2), 27),
    ("conv3", ("C2D", 1, 256, 13, 13, 384, 3, 1, 1), 13),
    ("conv4", ("GRP", 1, 384, 13, 13, 384, 3, 1, 1, 2), 13),
    ("conv5", ("GRP", 1, 384, 13, 13, 256, 3, 1, 1, 2), 13),
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows, flops, seconds = [], 0, 0.0
    for name, spec, tile in LAYERS:
        task = get_task(*spec)
        info = analyze(task)
        estimate = FpgaModel(task, "vx485t", info=info).estimate(tiled_conv_config(info, 64, 7, tile, tile))
        if not estimate.feasible:
            raise SystemExit(f"{name}: {estimate.reason}")
        rows.append({"layer": name, "task": info.task, "gflop": info.flops / 1e9, "ms": estimate.seconds * 1e3,
                     "gflops": estimate.gflops, "dsp": estimate.dsp, "bram": estimate.bram, "bound": estimate.bound})
        flops, seconds = flops + info.flops, seconds + estimate.seconds
    total = {"gflop": flops / 1e9, "ms": seconds * 1e3, "gflops": flops / seconds / 1e9,
             "reported_gflops": REPORTED_GFLOPS, "error": flops / seconds / 1e9 / REPORTED_GFLOPS - 1}
    if args.json:
        print(json.dumps({"layers": rows, "total": total}))
        return
    print("| layer | task | GFLOP | model ms | model GFLOPS | DSP | BRAM18K | bound |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['layer']} | {r['task']} | {r['gflop']:.3f} | {r['ms']:.2f} | {r['gflops']:.1f} | {r['dsp']} | "
              f"{r['bram']} | {r['bound']} |")
    print(f"\nall conv layers: {total['gflop']:.3f} GFLOP in {total['ms']:.2f} ms = {total['gflops']:.2f} GFLOPS "
          f"(model) vs {REPORTED_GFLOPS} GFLOPS reported: error {total['error']:+.1%}")


if __name__ == "__main__":
    main()
