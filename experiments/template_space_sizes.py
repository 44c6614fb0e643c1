"""Template space sizes beside the generated CPU space's, per operator at one benchmark shape.

Run: PYTHONPATH=. .venv/bin/python experiments/template_space_sizes.py
Writes experiments/results/template_space_sizes.json. The paper reports generated spaces 2027x
larger than templates' on average (geometric mean).
"""

import json
import math
from pathlib import Path

from analysis import analyze
from flexsched.registry import get_task
from space import generate
from flexsched.target import get_target
from space.template import template_space

# BENCHMARKS.md shapes; T1D and T3D have none listed, so they take T2D's (1,1024,8,8,512,4,2,1)
# row in one and three dimensions.
SHAPES = {
    "GMV": (1024, 1024), "GMM": (1024, 1024, 1024), "BIL": (128, 256, 512, 64),
    "C1D": (1, 128, 3136, 256, 3, 1, 1), "T1D": (1, 1024, 64, 512, 4, 2, 1),
    "C2D": (1, 64, 112, 112, 192, 3, 1, 1), "T2D": (1, 1024, 8, 8, 512, 4, 2, 1),
    "C3D": (1, 64, 8, 28, 28, 64, 3, 1, 1), "T3D": (1, 1024, 4, 8, 8, 512, 4, 2, 1),
    "GRP": (1, 256, 56, 56, 512, 3, 1, 1, 16), "DEP": (1, 32, 112, 112, 1, 3, 1, 1),
    "DIL": (1, 256, 56, 56, 512, 3, 1, 1), "BCM": (1024, 256, 8), "SHO": (1, 128, 128, 64, 3),
}
TARGET = "llvm"
OUT = Path(__file__).parent / "results" / "template_space_sizes.json"


def sizes(op, args):
    task = get_task(op, *args)
    info = analyze(task)
    template, generated = template_space(task, info, TARGET), generate(info, TARGET)
    return {"op": op, "shape": list(args), "template": template.name, "template_size": template.size,
            "generated_size": generated.size, "ratio": generated.size / template.size}


def main():
    rows = [sizes(op, args) for op, args in SHAPES.items()]
    geomean = math.exp(sum(math.log(row["ratio"]) for row in rows) / len(rows))
    for row in rows:
        print(f"{row['op']:4} {str(tuple(row['shape'])):34} {row['template_size']:>8} "
              f"{row['generated_size']:>22} {row['ratio']:10.3e}")
    print(f"geometric mean ratio {geomean:.3e}")
    lanes = get_target(TARGET).vector_lanes  # both spaces' vector knobs depend on it
    OUT.write_text(json.dumps({"target": TARGET, "vector_lanes": lanes, "rows": rows, "geomean_ratio": geomean},
                              indent=1) + "\n")


if __name__ == "__main__":
    main()
