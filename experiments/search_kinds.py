"""Where a search spent its trials, by kind of kernel: per case of a record file, each kind's trials
(Space.family) split by the shape of its register tiles, the best GFLOPS of each and the trial that
measured it.

Run:  .venv/bin/python experiments/search_kinds.py R --cases C4 C6 [--top 6] [--out F.json]

R is a record file the benchmark wrote (experiments/cpu_benchmark.py --records R); nothing is run.
Each record's config is placed in the space of its own target (its CPU, vector width and register
file, as recorded), so a file from another host reads as that host's search made it. A climb seldom
leaves the kind and tile shape of its start, so which shapes a 200-trial search spent its trials on
says more of how it ended than its best alone: on a Zen 2 host, one search of YOLO C4 spent 140 of its
trials on tiles of 8 accumulators and ended at 0.73 of oneDNN, another 138 on 6 x 2-vector tiles and
ended at 0.96.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from analysis import analyze
from explore.records import load_records
from flexsched.target import Target
from space import cpu, generate

from cpu_benchmark import cases

MEMORY = "memory"


def target_of(record):
    """The record's target as far as a space needs it (its feature string is kept only as a digest)."""
    return Target.from_dict({key: value for key, value in record.target.items() if key != "features_digest"})


def tile_label(space, config):
    """The register tiles of a config as "axis rows x vectors" per reducing node, or "memory"; "" off a CPU."""
    if space.target.kind != "cpu":
        return ""
    tiles = cpu.register_tiles(space.info, space.target, config)

    def label(node):
        if node.name not in tiles:
            return MEMORY
        axis, rows, vectors = tiles[node.name]
        return f"{axis} {rows}x{vectors}"

    return ", ".join(label(node) for node in space.info.nodes if node.reduce)


def case_kinds(task, records):
    """[{kind, tiles, trials, best_gflops, best_trial}] of one task's successful records of the generated
    space, best first."""
    spaces, rows = {}, {}
    for record in records:
        if not record.ok:
            continue
        key = json.dumps(record.target, sort_keys=True)
        if key not in spaces:
            spaces[key] = generate(analyze(task), target_of(record))
        space = spaces[key]
        if not record.same_space(space):
            continue   # a template's point, or one of an older version of the generated space
        config = record.config
        kind, tiles = repr(space.family(space.point(config))), tile_label(space, config)
        row = rows.setdefault((kind, tiles), {"kind": kind, "tiles": tiles, "trials": 0, "best_gflops": 0.0,
                                              "best_trial": None})
        row["trials"] += 1
        if record.gflops > row["best_gflops"]:
            row["best_gflops"], row["best_trial"] = record.gflops, record.data.get("trial")
    return sorted(rows.values(), key=lambda row: -row["best_gflops"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", help="a record file of experiments/cpu_benchmark.py --records")
    parser.add_argument("--cases", nargs="*", default=None, help="GMM and/or C1..C15 (default: every case in R)")
    parser.add_argument("--top", type=int, default=6, help="kinds shown per case, fastest first")
    parser.add_argument("--out", help="write every case's kinds to this JSON file")
    args = parser.parse_args()
    records = load_records(args.records)
    report = {}
    for name, task in cases().items():
        if args.cases is not None and name not in args.cases:
            continue
        mine = [record for record in records if record.same_task(task)]
        if not mine:
            continue
        kinds = report[name] = case_kinds(task, mine)
        print(f"{name}: {len(mine)} records, {sum(row['trials'] for row in kinds)} ok, {len(kinds)} kinds and tile shapes")
        for row in kinds[:args.top]:
            print(f"  {row['tiles'] or row['kind']:>14}: {row['trials']:3d} trials, best {row['best_gflops']:6.1f} GFLOPS "
                  f"(trial {row['best_trial']})  {row['kind']}")
    if args.out:
        Path(args.out).write_text(json.dumps({"records": args.records, "cases": report}, indent=1))


if __name__ == "__main__":
    main()
