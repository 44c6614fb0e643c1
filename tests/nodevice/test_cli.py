"""The `flexsched` command line: ops, analyze, and one-line errors with exit status 2."""

import io
import json
import pathlib
import re
import subprocess
import sys

import pytest

from flexsched.cli import main

LIBRARY = {"GMV", "GMM", "BIL", "C1D", "T1D", "C2D", "T2D", "C3D", "T3D", "GRP", "DEP", "DIL", "BCM", "SHO"}


def run(*argv):
    out = io.StringIO()
    status = main(list(argv), out=out)
    return status, out.getvalue()


def test_ops_lists_every_library_operator_with_its_arguments():
    status, text = run("ops")
    assert status == 0
    names = {line.split()[0] for line in text.splitlines() if line and not line.startswith(" ")}
    assert LIBRARY <= names
    assert "GMM  M K N" in text
    assert "[stride=1]" in text


def test_analyze_prints_a_table():
    status, text = run("analyze", "C2D", "1", "16", "14", "14", "32", "3", "1", "1")
    assert status == 0
    assert "2 node(s), 8 spatial / 3 reduce loops" in text
    assert "rc:16 rh:3 rw:3" in text and "h:16" in text


def test_analyze_json_is_one_object():
    status, text = run("analyze", "T1D", "1", "8", "16", "4", "3", "2", "1", "--json")
    assert status == 0 and text.count("\n") == 1
    data = json.loads(text)
    assert (data["num_spatial"], data["num_reduce"], data["num_nodes"]) == (9, 2, 3)
    for node in data["nodes"]:
        assert {"name", "spatial", "reduce", "inputs", "consumers"} <= set(node)
        assert all(set(loop) == {"name", "extent"} for loop in node["spatial"] + node["reduce"])


def test_optional_arguments_and_case_insensitive_names():
    _, plain = run("analyze", "c2d", "1", "4", "8", "8", "4", "3", "--json")
    _, strided = run("analyze", "C2D", "1", "4", "8", "8", "4", "3", "2", "--json")
    assert json.loads(plain)["nodes"][1]["spatial"][2]["extent"] == 6
    assert json.loads(strided)["nodes"][1]["spatial"][2]["extent"] == 3


@pytest.mark.parametrize("argv, expected", [
    (["analyze", "NOPE", "1"], "unknown task 'NOPE'; registered: BCM, BIL"),
    (["analyze", "GMM", "4", "4"], "GMM takes 3 arguments (M K N), got 2"),
    (["analyze", "GMM", "4", "4", "4", "4"], "GMM takes 3 arguments"),
    (["analyze", "GMM", "4", "x", "4"], "argument 'K' of GMM must be an integer, got 'x'"),
    (["analyze", "GMM", "4", "0", "4"], "argument 'K' must be an integer >= 1, got 0"),
    (["analyze", "BCM", "10", "8", "4"], "argument 'rows'=10 is not a multiple of 'block'=4"),
    (["analyze", "GRP", "1", "6", "8", "8", "4", "3", "1", "1", "4"], "'C'=6 is not a multiple of 'groups'=4"),
    (["analyze", "C2D", "1", "3", "2", "2", "4", "7"], "argument 'H'=2 is too small"),
])
def test_bad_arguments_give_one_line_and_status_2(argv, expected, capsys):
    status, text = run(*argv)
    err = capsys.readouterr().err
    assert status == 2 and text == ""
    assert err.count("\n") == 1 and err.startswith("flexsched: error: ")
    assert expected in err


def test_unknown_command_from_a_real_process():
    result = subprocess.run([sys.executable, "-m", "flexsched", "frobnicate"], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "invalid choice: 'frobnicate'" in result.stderr and "'analyze'" in result.stderr


def test_analyze_from_a_real_process():
    result = subprocess.run([sys.executable, "-m", "flexsched", "analyze", "GMV", "64", "32"],
                            capture_output=True, text=True)
    assert result.returncode == 0 and "1 spatial / 1 reduce loops" in result.stdout


@pytest.mark.parametrize("target", ["llvm", "cuda", "fpga"])
def test_space_json_has_the_documented_fields(target):
    status, text = run("space", "C2D", "1", "8", "14", "14", "16", "3", "1", "1", "--target", target, "--json")
    assert status == 0 and text.count("\n") == 1
    data = json.loads(text)
    assert data["num_knobs"] == len(data["knobs"]) >= 1
    assert data["num_directions"] == sum(knob["num_directions"] for knob in data["knobs"])
    product = 1
    for knob in data["knobs"]:
        assert {"name", "kind", "num_values"} <= set(knob)
        product *= knob["num_values"]
    assert data["size"] == product


def test_space_table_and_example_schedule():
    status, text = run("space", "GMM", "64", "64", "64", "--example", "1")
    assert status == 0
    assert "GMM(64, 64, 64) on llvm" in text and "O.split.i" in text and "split" in text
    assert "random point (seed 1)" in text and "[parallel]" in text


def test_space_unknown_target_is_one_line_with_choices(capsys):
    status, _ = run("space", "GMM", "4", "4", "4", "--target", "tpu")
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert "unknown target 'tpu'; choose one of llvm, cuda, fpga" in err


SMALL_ARGS = {"GMV": "16 8", "GMM": "8 8 8", "BIL": "4 4 4 4", "C1D": "1 4 12 4 3 1 1", "T1D": "1 4 6 4 3 2 1",
              "C2D": "1 4 8 8 4 3 1 1", "T2D": "1 4 4 4 4 2 2 0", "C3D": "1 2 4 4 4 2 3 1 1",
              "T3D": "1 2 3 3 3 2 2 2 0", "GRP": "1 4 8 8 4 3 1 1 2", "DEP": "1 4 8 8 2 3 1 1",
              "DIL": "1 4 9 9 4 3 1 2 2", "BCM": "16 8 4", "SHO": "1 6 6 12 3"}


@pytest.mark.parametrize("target", ["llvm", "cuda", "fpga"])
def test_space_sizes_for_every_library_operator(target):
    assert set(SMALL_ARGS) == LIBRARY
    for name, args in SMALL_ARGS.items():
        status, text = run("space", name, *args.split(), "--target", target, "--json")
        assert status == 0, name
        assert json.loads(text)["size"] >= 1


@pytest.mark.parametrize("argv, expected", [
    (["space", "GMM", "99999999999999999999", "2", "2"],
     "flexsched: error: task GMM: tensor 'A': shape[0] is 99999999999999999999, beyond the largest extent supported, "
     "2**31 = 2147483648\n"),
    (["space", "GMM", "2147483648", "1", "2147483648"],
     "flexsched: error: task GMM: tensor 'O': shape 2147483648x2147483648 of float32 needs 1.72e+10 GiB, more than "
     "this machine's memory ("),
    (["tune", "C2D", "1", "3000000000", "8", "8", "4", "3", "1", "1"],
     "flexsched: error: task C2D: tensor 'I': shape[1] is 3000000000, beyond"),
])
def test_a_shape_too_large_is_refused_at_once_from_a_real_process(argv, expected):
    result = subprocess.run([sys.executable, "-m", "flexsched", *argv], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(expected) and result.stderr.count("\n") == 1


def test_templates_lists_each_operators_templates_and_compares_space_sizes():
    status, text = run("templates", "GMM", "256", "256", "256")
    assert status == 0
    assert text.startswith("GMM  gmm_register_blocked (default)  [cpu]")
    size, generated = [int(word) for word in text.split() if word.isdigit()][-2:]
    assert 0 < size < generated
    status, text = run("templates", "--target", "cuda")
    assert status == 0 and "gmm_cuda (default)  [gpu]" in text and "cpu]" not in text


def test_space_of_a_template_shows_its_knobs():
    status, text = run("space", "GMM", "64", "64", "64", "--template", "--json")
    assert status == 0
    data = json.loads(text)
    assert data["space"]["name"] == "template:GMM:gmm_register_blocked"
    assert [knob["name"] for knob in data["knobs"]][:2] == ["tile_i", "tile_j"]


@pytest.mark.parametrize("argv, message", [
    (["templates", "NOPE"], "operator 'NOPE' has no template for cpu targets; operators with one: "),
    (["tune", "SHO", "1", "8", "8", "9", "3", "--template", "nope", "--trials", "1"],
     "operator 'SHO' has no template 'nope' for cpu targets"),
])
def test_an_unknown_template_is_one_line_naming_what_exists(argv, message, capsys):
    status, _ = run(*argv)
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and message in err


def test_version_is_the_distribution_version(capsys):
    from flexsched.version import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"flexsched {version()}\n"


FPGA_TUNE = ["tune", "GMM", "16", "16", "16", "--target", "fpga", "--trials", "3", "--method", "random"]


def test_quiet_leaves_out_the_progress_bar_and_verbose_adds_each_candidate(capsys):
    assert main(["-q", *FPGA_TUNE], out=io.StringIO()) == 0
    assert capsys.readouterr().err == ""
    assert main([*FPGA_TUNE], out=io.StringIO()) == 0
    plain = capsys.readouterr().err
    assert "3/3 trials" in plain and "debug" not in plain
    assert main(["-v", *FPGA_TUNE], out=io.StringIO()) == 0
    verbose = capsys.readouterr().err
    assert "flexsched: debug: trial 1: ok" in verbose and "flexsched: debug: trial 3: " in verbose
    assert main(["-v", "-q", "ops"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_only_the_command_line_configures_logging():
    root = pathlib.Path(__file__).resolve().parents[2]
    configuring = [str(path.relative_to(root)) for top in ("flexsched", "analysis", "space", "codegen", "fpga_model",
                                                           "explore")
                   for path in (root / top).rglob("*.py")
                   if re.search(r"basicConfig|addHandler|StreamHandler|FileHandler", path.read_text())]
    assert configuring == ["flexsched/cli.py"]
