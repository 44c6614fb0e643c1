"""GPU benchmark: searched CUDA kernels against cuBLAS / cuDNN through PyTorch (FP32, TF32 off), and
how well the static GPU model ranks kernels.

On a machine with an NVIDIA GPU, cupy and a CUDA build of torch:
  python experiments/gpu_benchmark.py --trials 200                      # GMM 1024^3, YOLO C1-C15, GRP, DEP, DIL
  python experiments/gpu_benchmark.py --cases GMM C2 DEP1 --trials 50
  python experiments/gpu_benchmark.py --cases GMM C2 --trials 60 --spaces generated template  # against the templates
  python experiments/gpu_benchmark.py --model-study --points 300        # Kendall's tau; model-only vs measured search
Anywhere (no GPU needed):
  python experiments/gpu_benchmark.py --predict --cases C8 --trials 200 # model-only search: its time and predicted best

Every measured candidate is built, checked against the reference evaluator and timed with CUDA
events in the isolated worker. The search's fastest few are re-checked here and timed again side
by side; the fastest is timed against torch in alternating rounds (ours, torch, ours, ...), and
the ratio is the median of the per-round ratios (torch time over ours: above 1, we are faster)
with its range. Results are written as JSON under experiments/results/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import time
from pathlib import Path

import numpy as np

from analysis import analyze
from flexsched.library import cuda_event_seconds as event_seconds
from flexsched.registry import get_task
from flexsched.target import get_target

YOLO = [(3, 64, 448, 7, 2), (64, 192, 112, 3, 1), (192, 128, 56, 1, 1), (128, 256, 56, 3, 1),
        (256, 256, 56, 1, 1), (256, 512, 56, 3, 1), (512, 256, 28, 1, 1), (256, 512, 28, 3, 1),
        (512, 512, 28, 1, 1), (512, 1024, 28, 3, 1), (1024, 512, 14, 1, 1), (512, 1024, 14, 3, 1),
        (1024, 1024, 14, 3, 1), (1024, 1024, 14, 3, 2), (1024, 1024, 7, 3, 1)]
GRP = [(1, 1024, 14, 14, 512, 1, 1, 0, 4), (1, 1024, 14, 14, 512, 1, 1, 0, 32), (1, 256, 56, 56, 512, 3, 1, 1, 16),
       (1, 1024, 14, 14, 1024, 3, 1, 1, 16)]
DEP = [(1, 32, 112, 112, 1, 3, 1, 1), (1, 16, 112, 112, 6, 3, 2, 1), (1, 24, 56, 56, 6, 3, 2, 1),
       (1, 32, 28, 28, 6, 3, 2, 1), (1, 64, 14, 14, 6, 3, 1, 1), (1, 96, 14, 14, 6, 3, 2, 1), (1, 160, 7, 7, 6, 3, 1, 1)]
DIL = [(1, 256, 56, 56, 512, 3, 1, 1), (1, 512, 28, 28, 256, 1, 1, 0), (1, 512, 28, 28, 1024, 3, 1, 1),
       (1, 1024, 14, 14, 1024, 3, 1, 1)]
STUDY_CASES = ("GMM", "C2", "DEP2")


def cases():
    """{case name: (task, torch function of the input tensors)}; torch loads lazily."""
    def conv(stride=1, padding=0, dilation=1, groups=1):
        def call(i, w):
            import torch.nn.functional as F

            return F.conv2d(i, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
        return call

    def matmul(a, b):
        import torch

        return torch.matmul(a, b)

    result = {"GMM": (get_task("GMM", 1024, 1024, 1024), matmul)}
    for number, (C, K, size, k, stride) in enumerate(YOLO, 1):
        result[f"C{number}"] = (get_task("C2D", 1, C, size, size, K, k, stride, k // 2), conv(stride, k // 2))
    for number, args in enumerate(GRP, 1):
        result[f"GRP{number}"] = (get_task("GRP", *args), conv(args[6], args[7], groups=args[8]))
    for number, args in enumerate(DEP, 1):
        result[f"DEP{number}"] = (get_task("DEP", *args), conv(args[6], args[7], groups=args[1]))
    for number, args in enumerate(DIL, 1):
        result[f"DIL{number}"] = (get_task("DIL", *args), conv(args[6], args[7], dilation=2))
    return result


# ---------------------------------------------------------------- timing on the GPU

def calls_per_timing(call):
    """Calls that take about 20 ms, so one timing is not a single short launch."""
    call()
    return max(1, int(0.02 / max(1e-7, event_seconds(call, 3))))


def checked_kernel(task, schedule, inputs, reference):
    """The kernel built here, checked against the reference, and its torch tensors (in, out)."""
    import torch

    from codegen.kernel import build

    kernel = build(task, schedule, "cuda")
    tensors = [torch.from_numpy(array).cuda() for array in inputs]
    outputs = [torch.empty(t.shape, dtype=torch.float32, device="cuda") for t in task.outputs]
    kernel(*tensors, *outputs)
    torch.cuda.synchronize()
    for out, ref in zip(outputs, reference):
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-4, atol=1e-4 * scale)
    return kernel, tensors, outputs


def pick_finalist(task, schedules, inputs, reference, rounds=5):
    """The fastest of a few schedules, timed round-robin, and each one's median seconds."""
    calls = []
    for schedule in schedules:
        kernel, tensors, outputs = checked_kernel(task, schedule, inputs, reference)
        calls.append(lambda k=kernel, t=tensors, o=outputs: k(*t, *o))
    number = calls_per_timing(calls[0])
    times = [[event_seconds(call, number) for _ in range(rounds)] for call in calls]
    medians = [statistics.median(record) for record in times]
    return schedules[medians.index(min(medians))], medians


def compare_side_by_side(task, schedules, torch_fn, inputs, reference, rounds=7):
    """{contender: {"ratio", "ratio_range", "ours_seconds"}} and torch's median seconds: each
    contender's kernel and torch timed in alternating rounds, ratio = torch seconds / ours."""
    calls = {}
    for name, schedule in schedules.items():
        kernel, tensors, outputs = checked_kernel(task, schedule, inputs, reference)
        calls[name] = lambda k=kernel, t=tensors, o=outputs: k(*t, *o)
    import torch

    tensors = [torch.from_numpy(array).cuda() for array in inputs]
    expected = torch_fn(*tensors)
    np.testing.assert_allclose(expected.cpu().numpy(), reference[0], rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(
        reference[0]).max())))
    calls["torch"] = lambda: torch_fn(*tensors)
    number = calls_per_timing(calls["torch"])
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            times[name].append(event_seconds(call, number))
    torch_times = times.pop("torch")
    result = {}
    for name, ours in times.items():
        ratios = [theirs / mine for theirs, mine in zip(torch_times, ours)]
        result[name] = {"ratio": statistics.median(ratios), "ratio_range": [min(ratios), max(ratios)],
                        "ours_seconds": statistics.median(ours)}
    return result, statistics.median(torch_times)


def compare_with_torch(task, schedule, torch_fn, inputs, reference, rounds=7):
    """Median and range of torch seconds / our seconds over alternating rounds."""
    kernel, tensors, outputs = checked_kernel(task, schedule, inputs, reference)
    ours = lambda: kernel(*tensors, *outputs)  # noqa: E731
    theirs = lambda: torch_fn(*tensors)  # noqa: E731
    expected = theirs()
    np.testing.assert_allclose(expected.cpu().numpy(), reference[0], rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(
        reference[0]).max())))
    number = calls_per_timing(ours)
    ratios, our_times, their_times = [], [], []
    for _ in range(rounds):
        our_times.append(event_seconds(ours, number))
        their_times.append(event_seconds(theirs, number))
        ratios.append(their_times[-1] / our_times[-1])
    return {"ratio": statistics.median(ratios), "ratio_range": [min(ratios), max(ratios)],
            "ours_seconds": statistics.median(our_times), "torch_seconds": statistics.median(their_times)}


# ---------------------------------------------------------------- searches

def tune(task, evaluator, trials, method, seed, space=None):
    from explore.optimize import optimize

    started = time.perf_counter()
    result = optimize(task, "cuda", trials=trials, method=method, seed=seed, evaluator=evaluator, build_kernel=False,
                      space=space)
    return result, time.perf_counter() - started


def top_schedules(result, count):
    from flexsched.schedule import Schedule

    entries = sorted((e for e in result.history if e.ok), key=lambda e: e.seconds)[:count]
    return [Schedule.from_json(entry.schedule_key) for entry in entries]


def benchmark_spaces(name, task, torch_fn, args):
    """Each of args.spaces searched with the same method and budget, its finalist picked, and all
    of them timed against torch side by side."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    flops = analyze(task).flops
    inputs = task.random_inputs(args.seed)
    reference = task.evaluate(*inputs)
    row, finalists = {"case": name, "task": str(task), "gflop": flops / 1e9, "spaces": {}}, {}
    for space in args.spaces:
        result, seconds = tune(task, "measure", args.trials, args.method, args.seed, space)
        finalists[space], _ = pick_finalist(task, top_schedules(result, args.finalists), inputs, reference)
        row["spaces"][space] = {"space": result.space.name, "space_size": result.space.size,
                                "trials": result.trials, "ok": result.history.num_ok, "search_seconds": seconds,
                                "schedule": json.loads(finalists[space].to_json())}
    compared, torch_seconds = compare_side_by_side(task, finalists, torch_fn, inputs, reference)
    row["torch_gflops"] = flops / torch_seconds / 1e9
    for space, figures in compared.items():
        row["spaces"][space].update(figures, gflops=flops / figures["ours_seconds"] / 1e9)
    if {"generated", "template"} <= set(compared):
        row["generated_over_template"] = (compared["template"]["ours_seconds"]
                                          / compared["generated"]["ours_seconds"])
    return row


def benchmark_case(name, task, torch_fn, args):
    """Measured search, finalists, comparison with torch; with --predict, the model's search alone."""
    flops = analyze(task).flops
    row = {"case": name, "task": str(task), "gflop": flops / 1e9}
    if args.predict:
        result, seconds = tune(task, "model", args.trials, args.method, args.seed)
        row.update({"model_trials": result.trials, "model_search_seconds": seconds,
                    "predicted_gflops": result.gflops, "predicted_bound": result.history.best.evaluation.details.get(
                        "bound"), "config": result.config.to_dict()})
        return row
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    inputs = task.random_inputs(args.seed)
    reference = task.evaluate(*inputs)
    result, seconds = tune(task, "measure", args.trials, args.method, args.seed)
    failures = {}
    for entry in result.history:
        if not entry.ok:
            failures[entry.evaluation.status] = failures.get(entry.evaluation.status, 0) + 1
    best, medians = pick_finalist(task, top_schedules(result, args.finalists), inputs, reference)
    comparison = compare_with_torch(task, best, torch_fn, inputs, reference)
    row.update({"trials": result.trials, "search_seconds": seconds, "failures": failures,
                "ours_gflops": flops / comparison["ours_seconds"] / 1e9,
                "torch_gflops": flops / comparison["torch_seconds"] / 1e9, **comparison,
                "schedule": json.loads(best.to_json())})
    return row


def kendall_tau(xs, ys):
    """Kendall's tau-b of two equally long sequences."""
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = np.sign(xs[i] - xs[j]), np.sign(ys[i] - ys[j])
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif dx == dy:
                concordant += 1
            else:
                discordant += 1
    pairs = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    return (concordant - discordant) / pairs if pairs else 0.0


def model_study(name, task, args):
    """The model's rank correlation with measured times over random points, and a model-only
    search's best measured against a measured search's best."""
    from codegen.measure import MeasureInput, Measurer
    from codegen.evaluators import GpuModelEvaluator
    from space import generate

    space = generate(analyze(task), "cuda")
    rng = np.random.default_rng(args.seed)
    points = [space.random_point(rng) for _ in range(args.points)]
    with GpuModelEvaluator("cuda") as model:
        predicted = model.evaluate(task, space, points)
    with Measurer(timeout_s=120, warmup=1, repeats=3, min_run_seconds=0.005, kinds=("gpu",)) as measurer:
        measured = measurer.measure([MeasureInput.of(task, space.schedule(p), "cuda") for p in points])
    pairs = [(p.seconds, m.seconds) for p, m in zip(predicted, measured) if p.ok and m.ok]
    tau = kendall_tau([p for p, _ in pairs], [m for _, m in pairs])
    model_result, model_seconds = tune(task, "model", args.trials, args.method, args.seed)
    measured_result, measure_seconds = tune(task, "measure", args.trials, args.method, args.seed)
    inputs = task.random_inputs(args.seed)
    reference = task.evaluate(*inputs)
    chosen, (model_best,) = pick_finalist(task, top_schedules(model_result, 1), inputs, reference)
    chosen, (measured_best,) = pick_finalist(task, top_schedules(measured_result, 1), inputs, reference)
    return {"case": name, "task": str(task), "points": len(points), "both_ok": len(pairs), "kendall_tau": tau,
            "model_search_best_seconds": model_best, "measured_search_best_seconds": measured_best,
            "model_over_measured": measured_best / model_best, "model_search_seconds": model_seconds,
            "measured_search_seconds": measure_seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="*", help="case names (default: all, or the study's three)")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--method", default="q", choices=("q", "p", "random"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--finalists", type=int, default=5)
    parser.add_argument("--predict", action="store_true", help="search with the static model only (no GPU needed)")
    parser.add_argument("--model-study", action="store_true", help="Kendall's tau and model-only vs measured search")
    parser.add_argument("--points", type=int, default=300, help="random points per space for --model-study")
    parser.add_argument("--spaces", nargs="*", help="spaces to search and compare side by side: generated, "
                                                    "template, template:NAME (default: the generated one alone)")
    parser.add_argument("--out", default="experiments/results/gpu_benchmark.json")
    args = parser.parse_args()
    all_cases = cases()
    names = args.cases or (list(STUDY_CASES) if args.model_study else list(all_cases))
    unknown = [name for name in names if name not in all_cases]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(all_cases)}")
    if not args.predict:
        from codegen.cuda_runtime import unavailable_reason

        if unavailable_reason():
            parser.exit(2, f"gpu_benchmark: {unavailable_reason()} (--predict searches with the model alone)\n")
    device = _device_name(args.predict)
    rows = []
    for name in names:
        task, torch_fn = all_cases[name]
        if args.model_study:
            row = model_study(name, task, args)
        elif args.spaces:
            row = benchmark_spaces(name, task, torch_fn, args)
        else:
            row = benchmark_case(name, task, torch_fn, args)
        rows.append(row)
        print(json.dumps(row), flush=True)
    report = {"command": "python experiments/gpu_benchmark.py " + " ".join(_argv()), "device": device,
              "date": datetime.date.today().isoformat(), "rows": rows}
    _summarise(report)
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {path}")


def _device_name(predict):
    if predict:
        target = get_target("cuda")
        return f"{target.device}, predicted by the static model (no GPU used)"
    import torch

    return torch.cuda.get_device_name()


def _argv():
    import sys

    return sys.argv[1:]


def _summarise(report):
    rows = report["rows"]
    ratios = [row["ratio"] for row in rows if "ratio" in row]
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geometric mean of torch/ours over {len(ratios)} cases: {geomean:.2f}")
        report["geomean_ratio"] = geomean
    for space in {space for row in rows for space in row.get("spaces", {})}:
        ratios = [row["spaces"][space]["ratio"] for row in rows if space in row.get("spaces", {})]
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"{space}: geometric mean of torch/ours over {len(ratios)} cases: {geomean:.2f}")
        report[f"geomean_ratio_{space}"] = geomean
    speedups = [row["generated_over_template"] for row in rows if "generated_over_template" in row]
    if speedups:
        geomean = math.exp(sum(math.log(r) for r in speedups) / len(speedups))
        print(f"generated over template: geometric mean {geomean:.2f} over {len(speedups)} cases, "
              f"range {min(speedups):.2f}-{max(speedups):.2f}")
        report["geomean_generated_over_template"] = geomean
    taus = [row["kendall_tau"] for row in rows if "kendall_tau" in row]
    if taus:
        print("Kendall's tau: " + ", ".join(f"{row['case']} {row['kendall_tau']:.2f}" for row in rows))


if __name__ == "__main__":
    main()
