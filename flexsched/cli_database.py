"""The command line's tuning-database commands: `db list|show|export|import`, and `export`, which
writes a workload's best tuned kernel as a shared library; flexsched.cli adds them to its parser."""

from __future__ import annotations

import json

from .errors import FlexschedError

DB_HELP = "the tuning database file (default: $FLEXSCHED_DB, else ~/.cache/flexsched/tuning.jsonl)"


def add_commands(commands):
    """Add `db` and `export` to the command line's subparsers (COMMANDS runs them)."""
    db = commands.add_parser("db", help="the tuning database: list, show, export or import its best records")
    actions = db.add_subparsers(dest="db_command", required=True, metavar="ACTION", parser_class=type(db))
    listing = actions.add_parser("list", help="one line per workload: task, target, best GFLOPS, date, trials")
    show = actions.add_parser("show", help="the stored records of an operator's workload, with config and schedule")
    show.add_argument("op", metavar="OP", help="operator (or jit function) name")
    show.add_argument("args", metavar="ARG", nargs="*", help="the operator's arguments")
    dump = actions.add_parser("export", help="write each workload's best record to a JSON-lines file")
    dump.add_argument("file", metavar="FILE")
    load = actions.add_parser("import", help="merge a record file: each workload's best, where it beats the stored one")
    load.add_argument("file", metavar="FILE", help="a record file (`flexsched tune --log`, or `db export`)")
    for parser in (listing, show, dump, load):
        parser.add_argument("--db", metavar="PATH", help=DB_HELP)
    library = commands.add_parser("export", help="write the best tuned kernel of an operator as a shared "
                                                 "library (lib<name>.so) and C header")
    library.add_argument("op", metavar="OP", help="operator name (see `flexsched ops`)")
    library.add_argument("args", metavar="ARG", nargs="*", help="the operator's arguments")
    library.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for the library and header")
    library.add_argument("--target", default="llvm", help="the CPU target the record was tuned on (default llvm)")
    source = library.add_mutually_exclusive_group()
    source.add_argument("--log", metavar="FILE", help="take the best record from this record file")
    source.add_argument("--db", metavar="PATH", help="take it from this tuning database (the default source; " + DB_HELP + ")")
    library.add_argument("--name", help="the C function's name (default: from the operator and its arguments)")


def add_tune_options(tune):
    """--db PATH and --no-db for `tune`."""
    group = tune.add_mutually_exclusive_group()
    group.add_argument("--db", metavar="PATH", help="add the best record to this tuning database (" + DB_HELP + ")")
    group.add_argument("--no-db", action="store_true", help="leave the tuning database alone")


def remember_tuned(result, args, out):
    """Add a tune run's best record to the database its options name; one line says what happened."""
    from .database import open_database

    if args.no_db:
        return
    database = open_database(args.db)
    added = database.add(result.best_record())
    out.write(f"database: {'added the best record to' if added else 'kept the faster record already in'} "
              f"{database.path}\n")


def run_db(args, out):
    from .database import open_database

    database = open_database(args.db)
    {"list": _list, "show": _show, "export": _export_records, "import": _import_records}[args.db_command](
        database, args, out)


def _list(database, _args, out):
    from .database import target_text, task_text, trials_text, tuned_date

    workloads = database.workloads()
    if not workloads:
        out.write(f"{database.path}: no records\n")
        return
    for workload in workloads:
        best = workload.best
        judge = "" if best.judged_by in ("", "measured") else f" ({best.judged_by})"
        out.write(f"{task_text(best.task_ref)}  {target_text(best.target)}  {best.gflops:.2f} GFLOPS{judge}  "
                  f"tuned {tuned_date(best)}  {trials_text(best)}\n")


def _show(database, args, out):
    from .database import tuned_date, trials_text

    chosen = [w for w in database.workloads() if w.best.task_ref["name"].lower() == args.op.lower()
              and [str(a) for a in w.best.task_ref["args"]] == list(args.args)]
    if not chosen:
        raise FlexschedError(f"{database.path}: no records of {args.op}({', '.join(args.args)})")
    for workload in chosen:
        out.write(f"{workload.title()}: {len(workload.records)} record(s), fastest first\n")
        for rank, record in enumerate(workload.records, 1):
            out.write(f"  {rank}. {record.gflops:.2f} GFLOPS  {record.seconds * 1e3:.4g} ms  tuned {tuned_date(record)}  "
                      f"{trials_text(record)}, method {record.data.get('method', '?')}, {record.space['name']} space\n"
                      f"     config: {json.dumps(record.data['config'])}\n")
            if record.data.get("schedule") is not None:
                out.write(f"     schedule: {json.dumps(record.data['schedule'])}\n")


def _export_records(database, args, out):
    count = database.export_file(args.file)
    out.write(f"wrote {count} record{'s' if count != 1 else ''} (the best of each workload) to {args.file}\n")


def _import_records(database, args, out):
    report = database.import_file(args.file)
    out.write(report.line(args.file, database.path) + "\n")


def run_export(args, out):
    """`flexsched export`: the best record of a workload built and saved as a shared library."""
    from codegen.kernel import build

    from .cli import task_from_command_line
    from .target import get_target

    task = task_from_command_line(args.op, args.args)
    target = get_target(args.target)
    if target.kind != "cpu":
        raise FlexschedError(f"export writes CPU shared libraries; target '{target.name}' is a {target.kind}")
    record, schedule, source = _best_record(task, target, args)
    kernel = build(task, schedule, target)
    library, header = kernel.save(args.output, args.name)
    out.write(f"{task} on {target.name}: {record.gflops:.2f} GFLOPS record (line {record.line} of {source})\n"
              f"wrote {library}\nwrote {header}\n")


def _best_record(task, target, args):
    """(record, schedule, its file) of the workload's best record in --log or the database."""
    import os

    from .database import open_database

    if args.log:
        from analysis import analyze
        from explore.records import load_records
        from explore.resume import best_replayable_record
        from space import generate

        if not os.path.exists(args.log):
            raise FlexschedError(f"no record file '{args.log}'")
        record, schedule = best_replayable_record(args.log, load_records(args.log), task, target,
                                                  lambda: generate(analyze(task), target))
        return record, schedule, args.log
    database = open_database(args.db)
    lookup = database.lookup(task, target)
    if not lookup.applied:
        raise FlexschedError(f"{database.path}: no record of {task} on {target.name} to export"
                             + (f" ({lookup.note})" if lookup.warn else ""))
    return lookup.record, lookup.schedule, database.path


COMMANDS = {"db": run_db, "export": run_export}
