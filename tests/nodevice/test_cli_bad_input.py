"""Every subcommand given bad input: exit status 2, one line on stderr, no traceback, nothing written or lost."""

# Each case runs `flexsched.cli.main` in this process on a folder holding a record file of another task,
# a corrupt record file, a sweep file and a results file; afterwards every file there has the same bytes
# and no file or folder has appeared (there or in the working directory). Cases that would tune must
# fail before the search: none of them starts a measurement worker.

import io
import os
import re

import pytest

from explore.optimize import optimize
from fake_evaluator import FakeEvaluator
from flexsched import cpus
from flexsched.cli import main
from flexsched.registry import get_task

OTHER_CPU = "skylake" if cpus.host()[0] != "skylake" else "znver4"
SWEEP = """name = "tiny"
trials = 2
seeds = [0]
contenders = ["random"]
results = "results.json"
records = "records"

[[cases]]
name = "GMM8"
op = "GMM"
args = [8, 8, 8]
"""

# (argv with {dir} for the folder, what the one line must say)
CASES = [
    ([], "the following arguments are required: COMMAND"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["-v", "-q", "ops"], "not allowed with argument"),
    (["ops", "extra"], "unrecognized arguments: extra"),
    (["analyze"], "the following arguments are required: OP"),
    (["analyze", "NOPE", "1"], "unknown task 'NOPE'"),
    (["analyze", "GMM", "4", "x", "4"], "argument 'K' of GMM must be an integer, got 'x'"),
    (["analyze", "GMM", "4", "-4", "4"], "argument 'K' must be an integer >= 1, got -4"),
    (["analyze", "GMM", "4", "4"], "GMM takes 3 arguments"),
    (["space", "GMM", "16", "16", "16", "--target", "tpu"], "unknown target 'tpu'"),
    (["space", "GMM", "16", "16", "16", "--target", "llvm -mcpu"], "'-mcpu' is not one of"),
    (["space", "GMM", "16", "16", "16", "--template", "NOPE"], "NOPE"),
    (["space", "GMM", "16", "16", "16", "--example", "-1"], "argument --example: must be at least 0, got -1"),
    (["tune"], "the following arguments are required: OP"),
    (["tune", "GMM", "16", "16", "16", "--trials", "0"], "argument --trials: must be at least 1, got 0"),
    (["tune", "GMM", "16", "16", "16", "--trials", "-5"], "argument --trials: must be at least 1, got -5"),
    (["tune", "GMM", "16", "16", "16", "--trials", "many"], "argument --trials: expected a whole number, got 'many'"),
    (["tune", "GMM", "16", "16", "16", "--starts", "0"], "argument --starts: must be at least 1, got 0"),
    (["tune", "GMM", "16", "16", "16", "--early-stop", "0"], "argument --early-stop: must be at least 1, got 0"),
    (["tune", "GMM", "16", "16", "16", "--finalists", "-1"], "argument --finalists: must be at least 0, got -1"),
    (["tune", "GMM", "16", "16", "16", "--seed", "-1"], "argument --seed: must be at least 0, got -1"),
    (["tune", "GMM", "16", "16", "16", "--method", "annealing"], "argument --method: invalid choice: 'annealing'"),
    (["tune", "NOPE", "16"], "unknown task 'NOPE'"),
    (["tune", "GMM", "16", "16", "16", "--target", "tpu"], "unknown target 'tpu'"),
    (["tune", "GMM", "16", "16", "16", "--target", "cuda", "--device", "nope"], "unknown GPU 'nope'"),
    (["tune", "GMM", "16", "16", "16", "--target", "fpga", "--device", "nope"], "unknown FPGA device 'nope'"),
    (["tune", "GMM", "16", "16", "16", "--evaluator", "guess"],
     "unknown evaluator 'guess' for cpu targets; choose one of measure"),
    (["tune", "GMM", "16", "16", "16", "--target", "fpga", "--evaluator", "measure"],
     "unknown evaluator 'measure' for fpga targets; choose one of model"),
    (["tune", "GMM", "16", "16", "16", "--target", f"llvm -mcpu={OTHER_CPU}"],
     f"cannot measure on llvm -mcpu={OTHER_CPU}: the code is for CPU '{OTHER_CPU}'"),
    (["tune", "GMM", "16", "16", "16", "--template", "NOPE"], "NOPE"),
    (["tune", "GMM", "16", "16", "16", "--log", "{dir}"], "--log {dir}: is a directory"),
    (["tune", "GMM", "16", "16", "16", "--log", "{dir}/missing/run.jsonl"],
     "--log {dir}/missing/run.jsonl: its folder {dir}/missing does not exist"),
    (["tune", "GMM", "16", "16", "16", "--log", "/proc/x.jsonl"], "--log /proc/x.jsonl: cannot write in /proc"),
    (["tune", "GMM", "16", "16", "16", "--log", "{dir}/corrupt.jsonl"],
     "{dir}/corrupt.jsonl: not a record file (line 1: not JSON"),
    (["tune", "GMM", "16", "16", "16", "--log", "{dir}/corrupt.jsonl", "--resume"], "not a record file"),
    (["tune", "GMM", "16", "16", "16", "--log", "{dir}/other.jsonl", "--resume"],
     "{dir}/other.jsonl: none of its 3 records is of GMM(16, 16, 16), so there is nothing to resume"),
    (["tune", "GMM", "16", "16", "16", "--resume"], "--resume needs a record file to continue from (--log FILE)"),
    (["tune", "GMM", "30000", "30000", "30000", "--trials", "2", "--log", "{dir}/big.jsonl"],
     "GMM(30000, 30000, 30000) needs about 16.8 GiB to measure"),
    # 3.6 TiB a tensor: more than any machine has (100000 cubed, 37 GiB a tensor, fits a large one).
    (["tune", "GMM", "1000000", "1000000", "1000000", "--trials", "2"], "more than this machine's memory"),
    (["templates", "NOPE"], "operator 'NOPE' has no template for cpu targets"),
    (["templates", "GMM", "--target", "tpu"], "unknown target 'tpu'"),
    (["best"], "the following arguments are required: FILE"),
    (["best", "{dir}/nothing.jsonl"], "no record file '{dir}/nothing.jsonl'"),
    (["best", "{dir}/corrupt.jsonl"], "{dir}/corrupt.jsonl: not a record file"),
    (["best", "{dir}/other.jsonl", "--top", "0"], "argument --top: must be at least 1, got 0"),
    (["hls", "GMM", "16", "16", "16"], "the following arguments are required: -o/--output"),
    (["hls", "GMM", "16", "16", "16", "-o", "/proc/hls"], "-o/--output /proc/hls: cannot write in /proc"),
    (["hls", "GMM", "16", "16", "16", "-o", "{dir}/other.jsonl"], "-o/--output {dir}/other.jsonl: is not a directory"),
    (["hls", "GMM", "16", "16", "16", "-o", "{dir}/other.jsonl/a/b"],
     "-o/--output {dir}/other.jsonl/a/b: {dir}/other.jsonl is not a directory"),
    (["hls", "GMM", "16", "16", "16", "-o", "{dir}/out", "--device", "nope"], "unknown FPGA device 'nope'"),
    (["hls", "GMM", "16", "16", "16", "-o", "{dir}/out", "--trials", "0"], "argument --trials: must be at least 1"),
    (["sweep"], "the following arguments are required: SPEC"),
    (["sweep", "{dir}/nothing.toml"], "nothing.toml"),
    (["sweep", "{dir}/corrupt.jsonl"], "corrupt.jsonl"),
    (["sweep", "{dir}/tiny.toml", "--trials", "0"], "argument --trials: must be at least 1, got 0"),
    (["sweep", "{dir}/tiny.toml", "--rounds", "0"], "argument --rounds: must be at least 1, got 0"),
    (["sweep", "{dir}/tiny.toml", "--results", "{dir}"], "--results {dir}: is a directory"),
    (["sweep", "{dir}/tiny.toml", "--results", "/proc/r.json"], "--results /proc/r.json: cannot write in /proc"),
    (["sweep", "{dir}/tiny.toml", "--records", "{dir}/other.jsonl"], "--records {dir}/other.jsonl: is not a directory"),
    (["db"], "the following arguments are required: ACTION"),
    (["db", "list", "--db", "{dir}"], "--db {dir}: is a directory"),
    (["db", "show", "NOPE", "--db", "{dir}/other.jsonl"], "{dir}/other.jsonl: no records of NOPE()"),
    (["db", "import", "{dir}/nothing.jsonl", "--db", "{dir}/other.jsonl"], "no record file '{dir}/nothing.jsonl'"),
    (["tune", "GMM", "16", "16", "16", "--db", "{dir}/missing/db.jsonl"],
     "--db {dir}/missing/db.jsonl: its folder {dir}/missing does not exist"),
    (["export", "GMM", "8", "8", "8"], "the following arguments are required: -o/--output"),
    (["export", "GMM", "8", "8", "8", "-o", "/proc/lib"], "-o/--output /proc/lib: cannot write in /proc"),
    (["export", "GMM", "8", "8", "8", "-o", "{dir}/lib", "--target", "fpga"], "export writes CPU shared libraries"),
    (["export", "GMM", "8", "8", "8", "-o", "{dir}/lib", "--log", "{dir}/nothing.jsonl"],
     "no record file '{dir}/nothing.jsonl'"),
    (["export", "GMM", "16", "16", "16", "-o", "{dir}/lib", "--log", "{dir}/other.jsonl"],
     "no successful record of GMM(16, 16, 16) on llvm"),
    (["cost-model"], "the following arguments are required: ACTION"),
    (["cost-model", "train", "{dir}/nothing.jsonl", "-o", "{dir}/m.json"], "no record file '{dir}/nothing.jsonl'"),
    (["cost-model", "train", "{dir}/other.jsonl", "-o", "/proc/m.json"], "-o/--output /proc/m.json: cannot write in /proc"),
    (["cost-model", "train", "{dir}/other.jsonl", "--model", "forest", "-o", "{dir}/m.json"],
     "argument --model: invalid choice: 'forest'"),
    (["cost-model", "rank", "{dir}/corrupt.jsonl", "{dir}/other.jsonl"], "not a saved cost model"),
    (["tune", "GMM", "16", "16", "16", "--cost-model", "forest"], "cost model 'forest': neither a model name (xgb, gnn) nor a saved model file"),
    (["tune", "GMM", "16", "16", "16", "--screen-ratio", "4"], "--screen-ratio and --save-cost-model need --cost-model"),
    (["report"], "the following arguments are required: RESULTS"),
    (["report", "{dir}/nothing.json"], "no results file '{dir}/nothing.json'"),
    (["report", "{dir}/corrupt.jsonl"], "cannot read results file"),
    (["report", "{dir}/other.jsonl"], "cannot read results file"),
    (["report", "{dir}/results.json", "-o", "/proc/report"], "-o/--output /proc/report: cannot write in /proc"),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    optimize(get_task("GMM", 8, 8, 8), "llvm", trials=3, method="random", log=str(folder / "other.jsonl"),
             evaluator=FakeEvaluator(), build_kernel=False)
    (folder / "corrupt.jsonl").write_bytes(b"\x00\x01 not a record\n{\"task\": 3}\n")
    (folder / "tiny.toml").write_text(SWEEP)
    (folder / "results.json").write_text('{"cases": []}')
    return folder


def snapshot(folder):
    return {path: path.read_bytes() if path.is_file() else None for path in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("argv, expected", CASES, ids=[" ".join(argv) or "(none)" for argv, _ in CASES])
def test_bad_input_is_one_line_and_status_2_and_changes_nothing(argv, expected, inputs, capsys, monkeypatch):
    monkeypatch.delenv("FLEXSCHED_LLVM_TARGET", raising=False)

    def no_worker(self):
        raise AssertionError("a worker started: bad input must fail before any work")

    monkeypatch.setattr("codegen.worker.Worker._start", no_worker)
    argv = [arg.replace("{dir}", str(inputs)) for arg in argv]
    expected = expected.replace("{dir}", str(inputs))
    before, here = snapshot(inputs), sorted(os.listdir("."))
    out = io.StringIO()
    status = main(argv, out=out)
    captured = capsys.readouterr()
    err = captured.err
    assert status == 2, err
    assert re.match(r"flexsched( [a-z-]+)*: error: ", err) and err.count("\n") == 1 and err.endswith("\n"), err
    assert expected in err, err
    assert "Traceback" not in err and out.getvalue() == "" and captured.out == ""
    assert snapshot(inputs) == before and sorted(os.listdir(".")) == here


def test_every_subcommand_has_a_case():
    from flexsched.cli import _COMMANDS

    covered = {argv[0] for argv, _ in CASES if argv and not argv[0].startswith("-")}
    assert set(_COMMANDS) <= covered
