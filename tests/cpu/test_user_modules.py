"""A user's operators on the command line: a module named by --module/-m (a .py file or a module
name), by FLEXSCHED_MODULES or by a sweep file works with every subcommand as a library operator
does; a module that cannot be loaded is one line and status 2. Each runs `python -m flexsched` in a
fresh process, so nothing registered here leaks into other tests."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parents[2]

MODULE = '''
import flexsched as fs

@fs.register_task("MYOP")
def myop(n, m):
    """Row sums of a doubled matrix."""
    A = fs.placeholder((n, m), name="A")
    k = fs.reduce_axis(m, "k")
    return A, fs.compute((n,), lambda i: fs.sum(A[i, k] * 2.0, axis=k), name="S")
'''

FAST_TUNE = ["--trials", "3", "--method", "random"]


@pytest.fixture
def user_module(tmp_path):
    """mymod.py, defining MYOP, in a folder of its own."""
    folder = tmp_path / "ops"
    folder.mkdir()
    path = folder / "mymod.py"
    path.write_text(MODULE)
    return path


def flexsched(*argv, cwd, env=None):
    environ = dict(os.environ, PYTHONPATH=str(REPO))
    environ.pop("FLEXSCHED_MODULES", None)
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "flexsched", *map(str, argv)], capture_output=True, text=True,
                          cwd=cwd, env=environ, timeout=120)


def test_ops_analyze_space_and_hls_see_a_module_given_as_a_file(user_module, tmp_path):
    listed = flexsched("-m", user_module, "ops", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "MYOP  n m\n" in listed.stdout and "Row sums of a doubled matrix." in listed.stdout
    analysed = flexsched("analyze", "MYOP", "8", "8", "-m", user_module, "--json", cwd=tmp_path)
    assert analysed.returncode == 0, analysed.stderr
    assert json.loads(analysed.stdout)["task"] == "MYOP(8, 8)"
    space = flexsched("space", "MYOP", "8", "8", "--target", "cuda", "-m", user_module, cwd=tmp_path)
    assert space.returncode == 0 and space.stdout.startswith("MYOP(8, 8) on cuda"), space.stderr
    hls = flexsched("-m", user_module, "hls", "MYOP", "8", "8", "--trials", "5", "--method", "random",
                    "-o", tmp_path / "design", cwd=tmp_path)
    assert hls.returncode == 0 and "wrote " in hls.stdout, hls.stderr


def test_tune_logs_and_best_lists_a_user_operator_and_its_records_rebuild(user_module, tmp_path):
    log = tmp_path / "f.jsonl"
    tuned = flexsched("-m", user_module, "tune", "MYOP", "8", "8", *FAST_TUNE, "--log", log, cwd=tmp_path)
    assert tuned.returncode == 0, tuned.stderr
    assert tuned.stdout.startswith("MYOP(8, 8) on llvm")
    best = flexsched("best", log, "-m", user_module, cwd=tmp_path)
    assert best.returncode == 0, best.stderr
    from flexsched.target import get_target

    llvm = get_target("llvm").name   # "llvm", or the CPU $FLEXSCHED_LLVM_TARGET names
    assert best.stdout.startswith(f"MYOP(8, 8) on {llvm}: 3 records, 3 ok")
    # The record names the module (mymod): loaded by the user, its best record rebuilds.
    rebuild = ("import sys, numpy as np, flexsched as fs\n"
               "from flexsched.user_modules import load_module\n"
               "load_module(sys.argv[1])\n"
               "kernel = fs.build_best(sys.argv[2])\n"
               "task = fs.get_task('MYOP', 8, 8)\n"
               "(a,) = task.random_inputs()\n"
               "print(np.allclose(kernel.run(a)[0], task.evaluate(a)[0], rtol=1e-4))\n")
    rebuilt = subprocess.run([sys.executable, "-c", rebuild, str(user_module), str(log)], capture_output=True,
                             text=True, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert rebuilt.stdout == "True\n", rebuilt.stderr


def test_the_environment_variable_names_files_and_modules(user_module, tmp_path):
    by_file = flexsched("analyze", "MYOP", "4", "4", cwd=tmp_path, env={"FLEXSCHED_MODULES": str(user_module)})
    assert by_file.returncode == 0 and by_file.stdout.startswith("MYOP(4, 4)"), by_file.stderr
    # A module name, found on PYTHONPATH, beside a library module in a comma-separated list.
    by_name = flexsched("ops", cwd=tmp_path, env={"FLEXSCHED_MODULES": "json, mymod",
                                                  "PYTHONPATH": os.pathsep.join([str(REPO), str(user_module.parent)])})
    assert by_name.returncode == 0 and "MYOP" in by_name.stdout, by_name.stderr


@pytest.mark.parametrize("name, reason", [
    ("no_such_module_here", "ModuleNotFoundError: No module named 'no_such_module_here'"),
    ("missing.py", "no such file"),
])
def test_a_module_that_cannot_be_loaded_is_one_line_and_status_2(tmp_path, name, reason):
    result = flexsched("-m", name, "ops", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"flexsched: error: cannot load module '{name}': {reason}\n"
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('half written')\n")
    result = flexsched("ops", cwd=tmp_path, env={"FLEXSCHED_MODULES": str(broken)})
    assert result.returncode == 2
    assert result.stderr == f"flexsched: error: cannot load module '{broken}': RuntimeError: half written\n"


def test_without_the_module_the_error_says_how_to_load_it(tmp_path):
    result = flexsched("tune", "MYOP", "8", "8", *FAST_TUNE, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "unknown task 'MYOP'" in result.stderr
    assert "--module/-m" in result.stderr and "FLEXSCHED_MODULES" in result.stderr


def test_a_sweep_file_names_its_modules(user_module, tmp_path):
    spec = user_module.parent / "mine.toml"
    spec.write_text('modules = ["mymod.py"]\ntrials = 2\ncontenders = ["random"]\nfinalists = 0\nrounds = 1\n'
                    '[[cases]]\nname = "mine"\nop = "MYOP"\nargs = [8, 8]\n')
    swept = flexsched("sweep", spec, "--results", tmp_path / "results.json", "--records", tmp_path / "records",
                      cwd=tmp_path)
    assert swept.returncode == 0, swept.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert "mine" in json.dumps(results)
    spec.write_text(spec.read_text().replace("mymod.py", "nothing.py"))
    refused = flexsched("sweep", spec, cwd=tmp_path)
    assert refused.returncode == 2 and "field 'modules': cannot load module 'nothing.py': no such file" in refused.stderr


def test_installed_plug_ins_register_their_operators(tmp_path):
    site = tmp_path / "site"
    info = site / "myplugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myplugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[flexsched.tasks]\nmine = plugin_ops\nbroken = plugin_missing\n")
    (site / "plugin_ops.py").write_text(MODULE)
    result = flexsched("ops", cwd=tmp_path, env={"PYTHONPATH": os.pathsep.join([str(REPO), str(site)])})
    assert result.returncode == 0 and "MYOP  n m\n" in result.stdout
    # A broken plug-in the user did not name is a warning; the command still runs.
    assert result.stderr.startswith("flexsched: warning: plug-in 'broken' (plugin_missing) of flexsched.tasks failed "
                                    "to load: ModuleNotFoundError")
