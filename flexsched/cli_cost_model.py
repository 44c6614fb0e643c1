"""The command line's cost-model commands: `cost-model train` (fit a model on record files and save it)
and `cost-model rank` (how well a saved model orders the records of files it may never have seen);
and the options that make `tune` and `sweep` model-guided."""

from __future__ import annotations

import json
import math

from .errors import FlexschedError


def add_commands(commands):
    """Add `cost-model train|rank` to the command line's subparsers (COMMANDS runs them)."""
    group = commands.add_parser("cost-model", help="learned cost models: train one on record files, or check "
                                                   "how well one ranks measured candidates")
    actions = group.add_subparsers(dest="cost_model_command", required=True, metavar="ACTION",
                                   parser_class=type(group))
    train = actions.add_parser("train", help="fit a cost model on the measured records of files and save it")
    train.add_argument("record_files", metavar="RECORDS", nargs="+", help="record files (`flexsched tune --log`)")
    train.add_argument("--model", default="xgb", choices=("xgb", "gnn"),
                       help="xgb: boosted trees on feature vectors; gnn: a graph network on the loop nest "
                            "(default xgb)")
    train.add_argument("--loss", default="rank", choices=("rank", "mse"),
                       help="pairwise rank loss within each task, or squared error on relative speed (default rank)")
    train.add_argument("-o", "--output", required=True, metavar="FILE", dest="model_file",
                       help="where to save the model (JSON)")
    rank = actions.add_parser("rank", help="Kendall's tau between a model's ranking and the measured times of "
                                           "each task in record files")
    rank.add_argument("model", metavar="MODEL", help="a saved model (`cost-model train -o`)")
    rank.add_argument("record_files", metavar="RECORDS", nargs="+", help="record files to rank")
    rank.add_argument("--json", action="store_true", help="one JSON object per task")


def add_tune_options(parser):
    """--cost-model and --screen-ratio, for `tune`."""
    parser.add_argument("--cost-model", metavar="MODEL",
                        help="screen proposals with a cost model: xgb or gnn (learning from this search) or a "
                             "saved model's file; only the best-ranked are measured")
    parser.add_argument("--screen-ratio", type=int, default=None, metavar="N",
                        help="with --cost-model: candidates ranked per candidate measured (default 8)")
    parser.add_argument("--save-cost-model", metavar="FILE",
                        help="with --cost-model: save the model as trained by this search")


def check_tune_options(args):
    """FlexschedError for cost-model options that make no sense together."""
    if args.cost_model is None and (args.screen_ratio is not None or args.save_cost_model):
        raise FlexschedError("--screen-ratio and --save-cost-model need --cost-model")
    if args.screen_ratio is not None and args.screen_ratio < 1:
        raise FlexschedError(f"--screen-ratio must be at least 1, got {args.screen_ratio}")


def _model_kwargs(args):
    if args.model == "gnn":
        return {"loss": args.loss}
    return {"objective": "rank:pairwise" if args.loss == "rank" else "reg:squarederror"}


def run_cost_model(args, out):
    from explore.cost_model import load_model, make_model, samples_from_records

    if args.cost_model_command == "train":
        samples, skipped = samples_from_records(args.record_files)
        if not samples:
            raise FlexschedError(f"no measured record with a schedule in {', '.join(args.record_files)}: nothing to train on")
        model = make_model(args.model, **_model_kwargs(args))
        model.fit(samples)
        model.save(args.model_file)
        groups = len({s.group for s in samples})
        out.write(f"trained {model.name} ({args.loss} loss) on {len(samples)} candidates of {groups} tasks"
                  f"{f', {skipped} records skipped' if skipped else ''}; saved to {args.model_file}\n")
        return
    model = load_model(args.model)
    samples, skipped = samples_from_records(args.record_files)
    for line in rank_report(model, samples):
        out.write((json.dumps(line) if args.json else _rank_line(line)) + "\n")


def rank_report(model, samples):
    """Per task: Kendall's tau between the model's scores and the measured speed of its successful samples."""
    from .stats import kendall_tau

    groups = {}
    for sample in samples:
        if math.isfinite(sample.seconds):
            groups.setdefault(sample.group, []).append(sample)
    report = []
    for group, members in groups.items():
        scores = model.scores([s.features for s in members])
        tau = kendall_tau(scores, [-s.seconds for s in members]) if len(members) > 1 else float("nan")
        report.append({"task": group, "candidates": len(members), "kendall_tau": tau})
    return report


def _rank_line(line):
    return f"{line['task']}: Kendall's tau {line['kendall_tau']:.3f} over {line['candidates']} measured candidates"


COMMANDS = {"cost-model": run_cost_model}
