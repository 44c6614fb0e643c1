"""Reporting a sweep's results file: a markdown table, and plots when matplotlib is installed."""

from __future__ import annotations

import json
import math
from pathlib import Path

from .errors import FlexschedError

PLOTS_HINT = "plots need matplotlib: pip install flexsched[plots]"


def load_results(path):
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise FlexschedError(f"no results file '{path}'") from None
    except (OSError, ValueError) as err:
        raise FlexschedError(f"cannot read results file '{path}': {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise FlexschedError(f"{path}: not a sweep results file (no 'cases' list)")
    return data


def _number(value, digits):
    return "-" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.{digits}f}"


def markdown_table(results):
    """One row per case, target and contender: GFLOPS, GB/s, ratio to the library (median, range), trials, time."""
    lines = [f"Sweep {results.get('sweep', '')}: {results.get('trials')} trials per job, seeds "
             f"{results.get('seeds')}; ratio = {results.get('ratio', 'library seconds / contender seconds')}, "
             "median (range) over alternating rounds.", "",
             "| case | target | contender | GFLOPS | GB/s | ratio to library | trials | tuning time (s) |",
             "| --- | --- | --- | ---: | ---: | --- | ---: | ---: |"]
    for row in results["cases"]:
        for name, entry in row["contenders"].items():
            if "skipped" in entry:
                lines.append(f"| {row['case']} | {row['target']} | {name} | - | - | {entry['skipped']} | - | - |")
                continue
            ratio = entry.get("ratio_to_library")
            ratio_text = f"{ratio['median']:.2f} ({ratio['min']:.2f}-{ratio['max']:.2f})" if ratio else "-"
            lines.append(f"| {row['case']} | {row['target']} | {name} | {_number(entry.get('gflops'), 2)} | "
                         f"{_number(entry.get('gbps'), 2)} | {ratio_text} | {entry.get('trials', '-')} | {_number(entry.get('tuning_seconds'), 1)} |")
    return "\n".join(lines) + "\n"


def write_plots(results, directory):
    """PNG files in directory: speedups over the library per case, best-so-far curves per case; returns
    their paths (none when matplotlib is missing: ImportError)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display is needed or wanted
    import matplotlib.pyplot as plt

    directory = Path(directory)
    paths = []
    rows = [row for row in results["cases"]
            if any(n != "library" and "ratio_to_library" in e for n, e in row["contenders"].items())]
    if rows:
        names = sorted({n for row in rows for n, e in row["contenders"].items() if n != "library"
                        and "ratio_to_library" in e})
        figure, axes = plt.subplots(figsize=(max(6, 1.2 * len(rows) * max(1, len(names))), 4))
        width = 0.8 / max(1, len(names))
        for index, name in enumerate(names):
            values = [row["contenders"].get(name, {}).get("ratio_to_library", {}).get("median", 0.0) for row in rows]
            axes.bar([r + index * width for r in range(len(rows))], values, width, label=name)
        axes.axhline(1.0, color="black", linewidth=0.8)
        axes.set_xticks([r + width * (len(names) - 1) / 2 for r in range(len(rows))])
        axes.set_xticklabels([f"{row['case']}\n{row['target']}" for row in rows])
        axes.set_ylabel("speedup over the library (median)")
        axes.legend()
        figure.tight_layout()
        paths.append(directory / "speedup.png")
        figure.savefig(paths[-1])
        plt.close(figure)
    for row in results["cases"]:
        curves = [(name, seed) for name, entry in row["contenders"].items() for seed in entry.get("seeds", [])]
        if not curves:
            continue
        figure, (by_trial, by_time) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for name, seed in curves:
            points = seed["curve"]
            label = f"{name} seed {seed['seed']}"
            best = [p["best_gflops"] for p in points]
            by_trial.step([p["trial"] for p in points], best, where="post", label=label)
            by_time.step([p["elapsed"] for p in points], best, where="post", label=label)
        by_trial.set_xlabel("trials")
        by_time.set_xlabel("tuning time (s)")
        by_trial.set_ylabel("best GFLOPS so far (search timings)")
        figure.suptitle(f"{row['case']} on {row['target']}")
        by_trial.legend()
        figure.tight_layout()
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in f"{row['case']}-{row['target']}")
        paths.append(directory / f"curve-{safe}.png")
        figure.savefig(paths[-1])
        plt.close(figure)
    template_plot = write_template_plot(results, directory)
    return paths + ([template_plot] if template_plot else [])


def template_comparisons(results, generated="q"):
    """Per case and target with both measured: (row, template contender, median, lowest, highest of the
    per-round template seconds / `generated` seconds, space size ratio); above 1: template-free faster."""
    found = []
    for row in results["cases"]:
        side = row.get("side_by_side")
        if not side or generated not in side["names"]:
            continue
        mine = side["names"].index(generated)
        for index, name in enumerate(side["names"]):
            if not name.startswith("template"):
                continue
            ratios = sorted(r[index] / r[mine] for r in side["rounds"])
            sizes = row["contenders"][generated].get("space_size", 0) / max(1, row["contenders"][name].get(
                "space_size", 1))
            found.append((row, name, ratios[len(ratios) // 2], ratios[0], ratios[-1], sizes))
    return found


def template_table(results, generated="q"):
    """Markdown: template-free search against each template, equal budgets, side by side; '' if none."""
    found = template_comparisons(results, generated)
    if not found:
        return ""
    lines = [f"Template-free ({generated}) against templates: template seconds / template-free seconds, median "
             "(range) over alternating rounds (above 1: the generated space's kernel is faster).", "",
             "| case | target | template | template-free / template | generated space / template space |",
             "| --- | --- | --- | --- | ---: |"]
    for row, name, median, low, high, sizes in found:
        lines.append(f"| {row['case']} | {row['target']} | {name} | {median:.2f} ({low:.2f}-{high:.2f}) | "
                     f"{sizes:.3g}x |")
    geomean = math.exp(sum(math.log(item[2]) for item in found) / len(found))
    lines += ["", f"Geometric mean over {len(found)} cases: {geomean:.2f}; lowest {min(i[2] for i in found):.2f}."]
    return "\n".join(lines) + "\n"


def write_template_plot(results, directory, generated="q"):
    """template_vs_generated.png: per case, the template-free kernel's speedup over the template's; its path
    or None when no case has both."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = template_comparisons(results, generated)
    if not found:
        return None
    figure, axes = plt.subplots(figsize=(max(6, 0.7 * len(found)), 4))
    axes.bar(range(len(found)), [item[2] for item in found])
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks(range(len(found)))
    axes.set_xticklabels([item[0]["case"] for item in found], rotation=45, ha="right")
    axes.set_ylabel(f"template-free ({generated}) speedup over template")
    figure.tight_layout()
    path = Path(directory) / "template_vs_generated.png"
    figure.savefig(path)
    plt.close(figure)
    return path
