"""Schedule-space sizes for GMM 1024^3 and the 15 YOLO-v1 convolution layers on each target.

Run: .venv/bin/python experiments/space_sizes.py [--markdown]
The paper reports spaces of 3.9e9 to 2.4e12 points; the README explains how ours are counted.
"""

import sys

from analysis import analyze
from flexsched.registry import get_task
from space import generate

TARGETS = ("llvm", "cuda", "fpga")
# YOLO-v1 layers (BENCHMARKS.md, Table 4 of the paper): C, K, H=W, k, stride; padding k//2.
YOLO = [(3, 64, 448, 7, 2), (64, 192, 112, 3, 1), (192, 128, 56, 1, 1), (128, 256, 56, 3, 1),
        (256, 256, 56, 1, 1), (256, 512, 56, 3, 1), (512, 256, 28, 1, 1), (256, 512, 28, 3, 1),
        (512, 512, 28, 1, 1), (512, 1024, 28, 3, 1), (1024, 512, 14, 1, 1), (512, 1024, 14, 3, 1),
        (1024, 1024, 14, 3, 1), (1024, 1024, 14, 3, 2), (1024, 1024, 7, 3, 1)]


def cases():
    yield "GMM 1024^3", ("GMM", (1024, 1024, 1024))
    for number, (C, K, size, k, stride) in enumerate(YOLO, 1):
        yield f"YOLO C{number}", ("C2D", (1, C, size, size, K, k, stride, k // 2))


def main(markdown):
    rows = []
    for label, (name, args) in cases():
        info = analyze(get_task(name, *args))
        spaces = [generate(info, target) for target in TARGETS]
        rows.append((label, *(f"{s.size:.2e} ({s.num_knobs} knobs, {s.num_directions} dirs)" for s in spaces)))
    header = ("case", *TARGETS)
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + " --- |" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(str(r[c])) for r in [header, *rows]) for c in range(len(header))]
        for row in [header, *rows]:
            print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)))


if __name__ == "__main__":
    main("--markdown" in sys.argv[1:])
