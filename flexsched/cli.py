"""The `flexsched` command line: list operators, analyse one, show its schedule space, tune it, write an FPGA design."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings

from . import cli_cost_model, cli_database
from .errors import FlexschedError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the default prints the whole usage first)."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _at_least(low):
    """An argparse type: a whole number of at least low (else a one-line usage error)."""
    def whole_number(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value
    return whole_number


def _build_parser():
    from .version import version

    parser = _Parser(prog="flexsched", description=__doc__)
    parser.add_argument("--version", action="version", version=f"flexsched {version()}")
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument("-v", "--verbose", action="store_true",
                           help="also print debug lines (each candidate's result)")
    verbosity.add_argument("-q", "--quiet", action="store_true", help="no progress bar or informational lines")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_Parser)
    commands.add_parser("ops", help="list the registered operators and their arguments")
    analyze = commands.add_parser("analyze", help="static analysis of an operator: mini-graph and loops")
    analyze.add_argument("op", metavar="OP", help="operator name (see `flexsched ops`)")
    analyze.add_argument("args", metavar="ARG", nargs="*", help="the operator's arguments")
    analyze.add_argument("--json", action="store_true", help="print one JSON object")
    space = commands.add_parser("space", help="the generated schedule space of an operator on a target")
    space.add_argument("op", metavar="OP", help="operator name (see `flexsched ops`)")
    space.add_argument("args", metavar="ARG", nargs="*", help="the operator's arguments")
    space.add_argument("--target", default="llvm", help="llvm (this CPU), cuda or fpga (default llvm)")
    space.add_argument("--json", action="store_true", help="print one JSON object")
    space.add_argument("--template", nargs="?", const="", metavar="NAME",
                       help="the space of a hand-written template (the default without NAME)")
    space.add_argument("--example", type=_at_least(0), metavar="SEED",
                       help="also print the schedule of the random point drawn with this seed")
    tune = commands.add_parser("tune", help="search the schedule space of an operator for its fastest schedule")
    tune.add_argument("op", metavar="OP", help="operator name (see `flexsched ops`)")
    tune.add_argument("args", metavar="ARG", nargs="*", help="the operator's arguments")
    tune.add_argument("--target", default="llvm",
                      help="llvm (this CPU, measured), cuda (an NVIDIA GPU) or fpga (modelled); default llvm")
    tune.add_argument("--device", help="the device of a cuda or fpga target, e.g. h200 or vu9p "
                                       "(passed on as TARGET:DEVICE)")
    tune.add_argument("--evaluator", metavar="NAME",
                      help="measure (run each candidate; cuda needs a GPU and cupy) or model (the static CPU or GPU "
                           "model: nothing runs; FPGA designs are always modelled); default: the target's first")
    tune.add_argument("--trials", type=_at_least(1), default=100,
                      help="points to evaluate, warm-up included (default 100)")
    tune.add_argument("--method", default="q", choices=("q", "p", "random"),
                      help="q: Q-network directions, p: every direction, random: random points (default q)")
    tune.add_argument("--starts", type=_at_least(1), default=4, help="start points per round (default 4)")
    tune.add_argument("--start-pool", type=_at_least(0), default=0, metavar="N",
                      help="price N random points with the target's static model and measure its best first, as "
                           "the first starts (default 0: random starts; 64 lifted the 1x1 YOLO layers' starts 3-10x); a "
                           "quarter of N where starts carried over (--transfer-from)")
    tune.add_argument("--transfer-from", metavar="FILE",
                      help="a record file of other tasks (other layers of the network): their best configs of each kind "
                           "of kernel, moved to this task's space, are measured among the first starts; may be the "
                           "--log file itself")
    tune.add_argument("--early-stop", type=_at_least(1), metavar="N",
                      help="stop after N trials without a 1%% improvement of the best")
    tune.add_argument("--log", metavar="FILE", help="append every evaluated point to this JSON-lines file")
    tune.add_argument("--resume", action="store_true",
                      help="continue from the records in --log without measuring them again")
    tune.add_argument("--template", nargs="?", const="", metavar="NAME",
                      help="tune a hand-written template (the operator's default without NAME) instead of the "
                           "generated space (see `flexsched templates`)")
    tune.add_argument("--finalists", type=_at_least(0), default=0, metavar="K",
                      help="after the search, rebuild its fastest K points, check them again and time them side by "
                           "side; report the fastest (default 0: the search's own best, no extra builds)")
    tune.add_argument("--seed", type=_at_least(0), default=0)
    _add_ray_options(tune, "measure the candidates")
    tune.add_argument("--json", action="store_true", help="end with one JSON object on the last line")
    cli_database.add_tune_options(tune)
    cli_cost_model.add_tune_options(tune)
    templates = commands.add_parser("templates", help="the hand-written schedule templates, per operator")
    templates.add_argument("op", metavar="OP", nargs="?", help="only this operator's")
    templates.add_argument("args", metavar="ARG", nargs="*",
                           help="the operator's arguments: also print each space's size beside the generated one's")
    templates.add_argument("--target", default="llvm", help="llvm (this CPU) or cuda (default llvm)")
    best = commands.add_parser("best", help="the best records of a tuning record file")
    best.add_argument("file", metavar="FILE", help="a record file written by `flexsched tune --log`")
    best.add_argument("--top", type=_at_least(1), default=5, help="how many records per task and target (default 5)")
    best.add_argument("--json", action="store_true", help="one JSON object per record")
    hls = commands.add_parser("hls", help="search an FPGA design with the model and write its HLS C++")
    hls.add_argument("op", metavar="OP", help="operator name (see `flexsched ops`)")
    hls.add_argument("args", metavar="ARG", nargs="*", help="the operator's arguments")
    hls.add_argument("--device", default="vu9p", help="FPGA part: vu9p, zu9eg or vx485t (default vu9p)")
    hls.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for the sources")
    hls.add_argument("--trials", type=_at_least(1), default=1000, help="model evaluations of the search (default 1000)")
    hls.add_argument("--method", default="q", choices=("q", "p", "random"),
                     help="search method, as for tune (default q)")
    hls.add_argument("--starts", type=_at_least(1), default=16,
                     help="start points per round (default 16: model estimates are cheap, and on the YOLO layers "
                          "4 starts left the Q-method below the hand-written design on two of them)")
    hls.add_argument("--seed", type=_at_least(0), default=0, help="search seed (default 0)")
    hls.add_argument("--json", action="store_true", help="print one JSON object")
    sweep = commands.add_parser("sweep", help="run a sweep file: tune every case with every contender, compare "
                                              "them with the library side by side")
    sweep.add_argument("spec", metavar="SPEC", help="a TOML sweep file (see experiments/*.toml)")
    sweep.add_argument("--trials", type=_at_least(1), help="replace the file's trials per job")
    sweep.add_argument("--finalists", type=_at_least(0), metavar="K", help="replace the file's finalists per job")
    sweep.add_argument("--rounds", type=_at_least(1), help="replace the file's rounds of the side-by-side comparison")
    sweep.add_argument("--results", metavar="FILE", help="replace the file's results path")
    sweep.add_argument("--records", metavar="DIR", help="replace the file's records directory")
    sweep.add_argument("--cost-model", metavar="MODEL",
                       help="screen every tuning job's proposals with a cost model (xgb, gnn or a saved model's file)")
    _add_ray_options(sweep, "run the tuning jobs")
    report = commands.add_parser("report", help="a markdown table (and plots) of a sweep's results file")
    report.add_argument("results", metavar="RESULTS", help="the results file a sweep wrote")
    report.add_argument("-o", "--output", metavar="DIR", help="write DIR/report.md and PNG plots there "
                                                              "(default: the table on stdout)")
    cli_database.add_commands(commands)
    cli_cost_model.add_commands(commands)
    _add_module_options(parser, commands)   # last: every subcommand, the database's too, takes -m
    return parser


def _add_ray_options(command, what):
    """--ray [ADDRESS] and --ray-per-node N (explore.ray_cluster; needs the distributed extra)."""
    command.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                         help=f"{what} on a Ray cluster: a local one, or the one at ADDRESS ('auto': the one "
                              "`ray start --head` started here); pip install 'flexsched[distributed]'")
    command.add_argument("--ray-per-node", type=_at_least(1), default=1, metavar="N",
                         help="with --ray: measurements each node takes at once (default 1: one, for quiet timing)")


def _ray_cluster(args):
    """The explore.ray_cluster.Cluster that --ray names, or None."""
    if args.ray is None:
        return None
    from explore.ray_cluster import Cluster

    return Cluster(args.ray or None, args.ray_per_node)


def _add_module_options(parser, commands):
    """-m/--module before or after the subcommand: modules (names or .py files) defining a user's operators."""
    text = "load a module or .py file that registers operators (repeatable; also FLEXSCHED_MODULES)"
    parser.add_argument("-m", "--module", dest="modules", action="append", default=[], metavar="MODULE", help=text)
    for command in commands.choices.values():  # a separate dest: a subcommand's default would hide the global one
        command.add_argument("-m", "--module", dest="command_modules", action="append", default=[],
                             metavar="MODULE", help=text)


def parse_task_args(definition, raw):
    """Command-line strings converted to the types of the definition's parameters."""
    from .errors import RegistryError

    values = []
    for param, text in zip(definition.params, raw):
        kind = type(param.default) if not param.required and param.default is not None else int
        try:
            values.append(kind(text) if kind is not bool else text.lower() in ("1", "true", "yes"))
        except ValueError:
            raise RegistryError(f"argument '{param.name}' of {definition.name} must be "
                                f"{'an integer' if kind is int else kind.__name__}, got {text!r}") from None
    values.extend(raw[len(definition.params):])  # too many: let the definition report the count
    return values


def task_from_command_line(op, raw_args):
    from .registry import task_definition

    definition = task_definition(op)
    return definition.create(*parse_task_args(definition, raw_args))


def _cmd_ops(_args, out):
    from .registry import list_tasks

    definitions = list_tasks()
    width = max(len(d.name) for d in definitions)
    for d in definitions:
        out.write(f"{d.name:<{width}}  {d.signature_text()}\n")
        if d.description:
            out.write(f"{'':<{width}}  {d.description}\n")


def _cmd_analyze(args, out):
    from analysis import analyze

    info = analyze(task_from_command_line(args.op, args.args))
    if args.json:
        out.write(json.dumps(info.to_dict()) + "\n")
    else:
        out.write(format_analysis(info))


def _space_name(args):
    """The space option of optimize for --template [NAME] (None: the generated space)."""
    if args.template is None:
        return None
    return f"template:{args.template}" if args.template else "template"


def _cmd_space(args, out):
    from analysis import analyze
    from explore.optimize import space_for
    from space import generate

    task = task_from_command_line(args.op, args.args)
    info = analyze(task)
    space = space_for(task, args.target, _space_name(args), info) if args.template is not None else \
        generate(info, args.target)
    if args.json:
        data = space.to_dict()
        if args.example is not None:
            point = space.random_point(args.example)
            data["example"] = {"config": space.config(point).to_dict(),
                               "schedule": json.loads(space.schedule(point).to_json())}
        out.write(json.dumps(data) + "\n")
        return
    out.write(format_space(space))
    if args.example is not None:
        point = space.random_point(args.example)
        out.write(f"\nrandom point (seed {args.example}): {space.config(point).to_json()}\n")
        out.write(space.schedule(point).apply(info).describe() + "\n")


class ProgressBar:
    """trials, best GFLOPS and elapsed time on one line of stderr (redrawn on a terminal,
    otherwise a line about every tenth of the budget)."""

    WIDTH = 24

    def __init__(self, total, stream):
        self.total = max(1, total)
        self.stream = stream
        self.started = time.monotonic()
        self.redraw = stream.isatty()
        self._last_line = 0

    def __call__(self, history):
        done = len(history)
        if not self.redraw and done != self.total and done - self._last_line < max(1, self.total // 10):
            return
        self._last_line = done
        filled = min(self.WIDTH, self.WIDTH * done // self.total)
        elapsed = int(time.monotonic() - self.started)
        # Past the budget only while no point has succeeded: the warm-up goes on (explore.search).
        count = f"{done}/{self.total} trials" if done <= self.total else \
            f"{done} trials, {self.total} budgeted (the warm-up goes on until a point succeeds)"
        text = (f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {count}  "
                f"best {history.best_gflops:.2f} GFLOPS {history.best_gbps:.2f} GB/s  "
                f"{elapsed // 60}:{elapsed % 60:02d}")
        self.stream.write(("\r" + text) if self.redraw else text + "\n")
        self.stream.flush()

    def finish(self):
        if self.redraw:
            self.stream.write("\n")


def _cmd_tune(args, out):
    from explore.optimize import optimize

    if args.resume and not args.log:
        raise FlexschedError("--resume needs a record file to continue from (--log FILE)")
    cli_cost_model.check_tune_options(args)
    task = task_from_command_line(args.op, args.args)
    target = f"{args.target}:{args.device}" if args.device else args.target
    progress = ProgressBar(args.trials, sys.stderr) if _informing() else None
    try:
        result = optimize(task, target, trials=args.trials, method=args.method, log=args.log, resume=args.resume,
                          seed=args.seed, starts=args.starts, early_stopping=args.early_stop, progress=progress,
                          evaluator=args.evaluator, space=_space_name(args), finalists=args.finalists,
                          cost_model=args.cost_model, screen_ratio=args.screen_ratio, start_pool=args.start_pool,
                          transfer_from=args.transfer_from, build_kernel=False, ray=_ray_cluster(args))  # the record file keeps the result
    finally:
        if progress:
            progress.finish()
    summary = result.summary()
    modelled = result.target.kind in ("cpu", "gpu") and result.judged_by == "modelled"
    out.write(f"{summary['task']} on {result.target.name} ({result.target.device}), {result.space.name} space, "
              f"method {result.method}: "
              f"best {result.gflops:.2f} GFLOPS ({result.seconds * 1e3:.4g} ms per run"
              f"{f', predicted by the static {result.target.kind.upper()} model' if modelled else ''})\n")
    if result.target.kind in ("cpu", "gpu"):
        from codegen.roof import roof_for

        roof = roof_for(result.target, _roof_file())   # measured (or read) once for the line and the summary
        out.write(roofline_line(result, modelled, roof) + "\n")
        summary.update(roofline_summary(result, roof))
    reused = f", {result.reused} reused from a run sharing the log" if result.reused else ""
    out.write(f"{result.trials} trials ({result.evaluated} evaluated now{reused}, {summary['ok']} ok), "
              f"stopped by {result.stop_reason}, {summary['elapsed']:.1f} s\n")
    if result.resumed_from is not None:
        out.write(result.resumed_from.line() + "\n")
    if result.priced_starts:
        out.write(f"first starts: the static model's best of {result.priced_starts} random points\n")
    if args.transfer_from:
        out.write(f"first starts: {result.transferred_starts} carried over from other tasks' best configs in "
                  f"{args.transfer_from}\n")
    if result.cost_model is not None:
        out.write(f"cost model {result.cost_model.name}: ranked out {result.screened_out} proposals, never measured\n")
        if args.save_cost_model:
            result.cost_model.save(args.save_cost_model)
            out.write(f"cost model saved to {args.save_cost_model}\n")
    if result.finalists:
        out.write(f"re-timed the search's fastest {len(result.finalists)} side by side: "
                  + ", ".join(f"{f.seconds * 1e3:.4g} ms (search {f.search_seconds * 1e3:.4g})"
                              for f in result.finalists) + "\n")
    out.write(f"config: {result.config.to_json()}\n")
    if result.target.kind == "fpga":  # a modelled design: say what it costs and what bounds it
        details = result.history.best.evaluation.details
        out.write(format_estimate(details))
        summary.update({key: details[key] for key in FPGA_SUMMARY_KEYS if key in details})
    if modelled:
        details = result.history.best.evaluation.details
        out.write((format_gpu_estimate if result.target.kind == "gpu" else format_cpu_estimate)(details))
        summary.update({"predicted": True, "bound": details.get("bound")})
    if args.log:
        out.write(f"records: {args.log} (rebuild the best with flexsched.build_best, or `flexsched export ... --log`)\n")
    cli_database.remember_tuned(result, args, out)
    if args.json:
        out.write(json.dumps(summary) + "\n")


def roofline_line(result, modelled, roof):
    """'roofline: X GFLOPS, Y GB/s: memory-bound, Z% of the memory roof (...)' for a CPU or GPU result."""
    from codegen.roof import describe

    what = "predicted" if modelled else "measured"
    return f"roofline ({what}): " + describe(result.gflops, result.gbps, result.history.flops,
                                                 result.history.bytes_moved, roof)


def _roof_file():
    """Where the best roofs measured on this machine are kept: the user's cache directory."""
    import os

    from .user_cache import user_cache_dir

    return os.path.join(user_cache_dir(), "roofs.json")


def roofline_summary(result, roof):
    """The roof fields of the --json summary: which roof binds and the peaks it was judged by."""
    return {"bound": roof.bound(result.history.flops, result.history.bytes_moved), "roof": roof.to_dict()}


def _cmd_templates(args, out):
    from flexsched.target import get_target
    from space import list_templates

    kind = get_target(args.target).kind
    templates = list_templates(args.op, kind)
    if args.op and not templates:
        raise FlexschedError(f"operator '{args.op}' has no template for {kind} targets; operators with one: "
                             + ", ".join(sorted({t.op for t in list_templates(kind=kind)})))
    sizes = _template_sizes(args, templates) if args.args else {}
    width = max((len(t.op) for t in templates), default=2)
    for template in templates:
        mark = " (default)" if template.default else ""
        out.write(f"{template.op:<{width}}  {template.name}{mark}  [{', '.join(template.kinds)}]  "
                  f"{template.description}\n")
        if template.name in sizes:
            size, generated = sizes[template.name]
            out.write(f"{'':<{width}}  {size} points; the generated space has {generated} "
                      f"({generated / size:.3g}x as many)\n")


def _template_sizes(args, templates):
    """{template name: (its space's size, the generated space's size)} for the command line's task."""
    from analysis import analyze
    from space import generate, template_space

    task = task_from_command_line(args.op, args.args)
    info = analyze(task)
    generated = generate(info, args.target).size
    return {t.name: (template_space(task, info, args.target, t).size, generated) for t in templates}


def _cmd_best(args, out):
    import os
    from collections import defaultdict

    from explore.records import best_records, check_record_file, load_records, target_label

    if not os.path.exists(args.file):
        raise FlexschedError(f"no record file '{args.file}'")
    check_record_file(args.file)
    records = load_records(args.file)
    groups = defaultdict(list)
    for record in records:
        groups[(record.task_ref["name"], tuple(record.task_ref["args"]), target_label(record.target))].append(record)
    if not groups:
        raise FlexschedError(f"{args.file}: no records")
    for (name, task_args, target), group in groups.items():
        best = best_records(group, args.top)
        if args.json:
            for record in best:
                out.write(json.dumps(dict(record.data)) + "\n")
            continue
        ok = sum(r.ok for r in group)
        out.write(f"{name}({', '.join(map(str, task_args))}) on {target}: {len(group)} records, {ok} ok\n")
        if not best:
            out.write("  no successful record\n")
        for rank, record in enumerate(best, 1):
            out.write(f"  {rank}. {record.gflops:.2f} GFLOPS  {record.seconds * 1e3:.4g} ms  "
                      f"(line {record.line}, {record.data.get('method', '?')}, {record.space['name']})  {json.dumps(record.data['config'])}\n")


def _cmd_hls(args, out):
    from codegen.hls import emit_hls
    from explore.optimize import optimize

    task = task_from_command_line(args.op, args.args)
    # The search of `tune --target fpga`: explore's methods with the model as the evaluator.
    result = optimize(task, f"fpga:{args.device}", trials=args.trials, method=args.method, seed=args.seed,
                      starts=args.starts)
    paths = emit_hls(task, result.schedule, name=args.op.lower()).write(args.output)
    details = result.history.best.evaluation.details
    if args.json:
        summary = result.summary()
        summary.update({key: details[key] for key in FPGA_SUMMARY_KEYS if key in details})
        out.write(json.dumps({**summary, "files": paths}) + "\n")
        return
    out.write(f"{result.task} on {result.target.name} ({result.trials} designs estimated, method {result.method})\n"
              f"design: {result.config.to_json()}\n" + format_estimate(details)
              + "".join(f"wrote {path}\n" for path in paths))


FPGA_SUMMARY_KEYS = ("gflops", "latency_s", "cycles", "dsp", "bram", "bandwidth_gbps", "bound")


def format_estimate(d):
    """The model's estimate of a design (an FPGA Evaluation's details), for people."""
    return (f"estimate: {d['gflops']:.1f} GFLOPS, latency {d['latency_s'] * 1e3:.4g} ms "
            f"({d['cycles']:.0f} cycles at {d['clock_mhz']:g} MHz), {d['bound']}-bound\n"
            f"resources: {d['dsp']} DSP, {d['bram']} BRAM18K, {d['bandwidth_gbps']:.2f} GB/s "
            f"({d['bandwidth_use']:.0%} of peak DDR)\n")


def format_gpu_estimate(details):
    """The static GPU model's view of a kernel (a modelled Evaluation's details), for people."""
    lines = [f"predicted: {details['bound']}-bound\n"]
    for launch in details["launches"]:
        lines.append(f"  {launch['entry']}: {launch['blocks']} blocks x {launch['threads']} threads, "
                     f"{launch['registers']} registers, {launch['shared_bytes']} B shared, "
                     f"{launch['blocks_per_sm']} blocks/SM ({launch['limited_by']}), {launch['waves']} wave(s), "
                     f"{launch['bound']}-bound\n")
    return "".join(lines)


def format_cpu_estimate(details):
    """The static CPU model's view of a kernel (a modelled Evaluation's details), for people."""
    lines = [f"predicted: {details['bound']}-bound\n"]
    for segment in details["segments"]:
        spread = f"{segment['parallel_extent']} parallel iterations, " if segment["parallel_extent"] else ""
        mix = segment["instructions"]
        lines.append(f"  {segment['symbol']}: {spread}{segment['calls']} call(s) on the busiest core, "
                     f"{mix.get('fma', 0):.4g} FMAs, {mix.get('load', 0):.4g} loads, {mix.get('store', 0):.4g} "
                     f"stores, {segment['seconds'] * 1e3:.4g} ms, {segment['bound']}-bound\n")
    return "".join(lines)


def format_space(space):
    """The knobs of a space as a table under a one-line summary."""
    rows = [("knob", "kind", "values", "directions")]
    rows += [(k.name, k.kind, str(k.num_values), str(k.num_directions)) for k in space.knobs]
    widths = [max(len(row[c]) for row in rows) for c in range(4)]
    lines = [f"{space.info.task} on {space.target.name} ({space.target.device}): {space.size:.4g} points "
             f"({space.size}), {space.num_knobs} knobs, {space.num_directions} directions\n"]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() + "\n" for row in rows]
    return "".join(lines)


def format_analysis(info):
    """The analysis as a readable table with each node's body below its row."""
    header = (f"{info.task}: {info.num_nodes} node(s), {info.num_spatial} spatial / {info.num_reduce} "
              f"reduce loops, {info.flops / 1e9:.4g} GFLOP\n")
    rows = [("node", "spatial loops", "reduce loops", "inputs", "consumers", "GFLOP")]
    for node in info.nodes:
        rows.append((
            node.name,
            " ".join(f"{loop.name}:{loop.extent}" for loop in node.spatial),
            " ".join(f"{loop.name}:{loop.extent}" for loop in node.reduce) or "-",
            " ".join(node.inputs),
            " ".join(node.consumers) or "(output)",
            f"{node.flops / 1e9:.4g}",
        ))
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    lines = [header]
    for r, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() + "\n")
        if r:
            node = info.nodes[r - 1]
            index = ", ".join(loop.name for loop in node.spatial)
            lines.append(f"    {node.name}[{index}] = {node.body}\n")
    return "".join(lines)


def _cmd_sweep(args, out):
    from .sweep import run_sweep
    from .sweep_spec import load_spec

    spec = load_spec(args.spec, trials=args.trials, finalists=args.finalists, rounds=args.rounds,
                     results=args.results, records=args.records, cost_model=args.cost_model)
    run_sweep(spec, sys.stderr if _informing() else _Discard(), _ray_cluster(args))
    out.write(f"results: {spec.results} (records in {spec.records}; `flexsched report {spec.results}`)\n")


def _cmd_report(args, out):
    from pathlib import Path

    from .report import PLOTS_HINT, load_results, markdown_table, template_table, write_plots

    results = load_results(args.results)
    table = markdown_table(results)
    comparison = template_table(results)
    if comparison:
        table += "\n" + comparison
    if not args.output:
        out.write(table)
        return
    directory = Path(args.output)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "report.md").write_text(table)
    out.write(f"wrote {directory / 'report.md'}\n")
    try:
        paths = write_plots(results, directory)
    except ImportError:
        out.write(PLOTS_HINT + "\n")
        return
    out.write("".join(f"wrote {path}\n" for path in paths))


_COMMANDS = {"ops": _cmd_ops, "analyze": _cmd_analyze, "space": _cmd_space, "tune": _cmd_tune, "best": _cmd_best,
             "hls": _cmd_hls, "templates": _cmd_templates,
             "sweep": _cmd_sweep, "report": _cmd_report, **cli_database.COMMANDS, **cli_cost_model.COMMANDS}


# Options naming a file the command writes (its folder must exist) or a folder it writes in (made with
# any missing parents, under a writable one): checked before any work, so a bad path costs nothing.
_FILE_OPTIONS = {"log": "--log", "results": "--results", "db": "--db", "model_file": "-o/--output",
                 "save_cost_model": "--save-cost-model"}
_FOLDER_OPTIONS = {"output": "-o/--output", "records": "--records"}


def _check_paths(args):
    """FlexschedError naming the option and path of the first output that cannot be written."""
    import os
    import tempfile

    def writable_folder(folder):
        try:
            with tempfile.TemporaryFile(dir=folder):
                return ""
        except OSError as err:
            return f"cannot write in {folder} ({err.strerror or err})"

    for options, is_file in ((_FILE_OPTIONS, True), (_FOLDER_OPTIONS, False)):
        for dest, option in options.items():
            path = getattr(args, dest, None)
            if not path:
                continue
            parent = os.path.dirname(os.path.abspath(path))
            if is_file and os.path.isdir(path):
                problem = "is a directory"
            elif is_file and os.path.exists(path):
                problem = "" if os.path.isfile(path) else "is not a regular file"
                try:
                    open(path, "ab").close()   # appending nothing changes nothing
                except OSError as err:
                    problem = problem or f"cannot be written ({err.strerror or err})"
            elif not is_file and os.path.exists(path):
                problem = writable_folder(path) if os.path.isdir(path) else "is not a directory"
            elif is_file and not os.path.isdir(parent):
                problem = f"its folder {parent} does not exist"
            else:
                while not os.path.exists(parent):  # a folder is made with its missing parents
                    parent = os.path.dirname(parent)
                problem = writable_folder(parent) if os.path.isdir(parent) else f"{parent} is not a directory"
            if problem:
                raise FlexschedError(f"{option} {path}: {problem}")


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """A warning as one line of stderr (a skipped record says which file and line, not which source line)."""
    sys.stderr.write(f"flexsched: warning: {message}\n")


class _Discard:
    """A stream for the lines -q leaves out."""

    def write(self, text):
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return False


def _informing():
    """Whether informational lines and the progress bar show (not under -q)."""
    return logging.getLogger("flexsched").isEnabledFor(logging.INFO)


class _LogFormat(logging.Formatter):
    def format(self, record):
        kind = "" if record.levelno == logging.INFO else f"{record.levelname.lower()}: "
        return f"flexsched: {kind}{record.getMessage()}"


def _start_logging(args):
    """Send the flexsched.* loggers to stderr at the level -v/-q choose (library code adds no handler)."""
    logger = logging.getLogger("flexsched")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LogFormat())
    saved = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO)
    logger.propagate = False
    return handler, saved


def _stop_logging(started):
    handler, (level, propagate) = started
    logger = logging.getLogger("flexsched")
    logger.removeHandler(handler)
    logger.setLevel(level)
    logger.propagate = propagate


def main(argv=None, out=None):
    """Entry point; returns the exit status."""
    out = out or sys.stdout
    try:
        args = _build_parser().parse_args(argv)
    except SystemExit as done:  # --help, --version, or a usage error argparse has printed in one line
        return done.code if isinstance(done.code, int) else EXIT_USAGE
    logging_started = _start_logging(args)
    try:
        _check_paths(args)
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            from .user_modules import load_user_modules

            load_user_modules([*args.modules, *args.command_modules])
            _COMMANDS[args.command](args, out)
    except FlexschedError as err:
        sys.stderr.write(f"flexsched: error: {err}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        if getattr(args, "log", None):
            sys.stderr.write(f"flexsched: interrupted; every finished point is in {args.log} (continue with --resume)\n")
        return 130
    except BrokenPipeError:  # `flexsched ops | head`: the reader left, nothing is wrong
        sys.stderr.close()
    finally:
        _stop_logging(logging_started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
