"""flexsched.user_modules in this process: the forms FLEXSCHED_MODULES takes, a .py file loaded as
the module named after it (once), and one-line errors for what cannot be loaded."""

import os
import sys

import pytest

from flexsched import registry
from flexsched.registry import list_tasks
from flexsched.user_modules import ModuleLoadError, load_module, modules_from_env

MODULE = '''
import flexsched as fs

@fs.register_task("LOADED_FROM_FILE")
def loaded(n):
    X = fs.placeholder((n,), name="X")
    return X, fs.compute((n,), lambda i: X[i] + 1.0, name="Y")
'''


@pytest.fixture
def clean(monkeypatch):
    """Registrations, sys.path and sys.modules as they were, after the test."""
    list_tasks()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_the_environment_variable_splits_on_the_path_separator_and_commas():
    text = f"a.b{os.pathsep} ./c.py ,, d"
    assert modules_from_env({"FLEXSCHED_MODULES": text}) == ["a.b", "./c.py", "d"]
    assert modules_from_env({}) == []


def test_a_file_is_imported_once_under_its_own_name_with_its_folder_on_sys_path(tmp_path, clean):
    path = tmp_path / "file_ops.py"
    path.write_text(MODULE)
    module = load_module(str(path))
    assert module.__name__ == "file_ops" and sys.modules["file_ops"] is module
    assert str(tmp_path) in sys.path
    assert registry.get_task("LOADED_FROM_FILE", 4).module == "file_ops"   # a name a record can keep
    assert load_module("file_ops.py", base_dir=tmp_path) is module        # loaded once


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_anywhere", "cannot load module 'no_such_module_anywhere': ModuleNotFoundError: No module "
                                "named 'no_such_module_anywhere'"),
    ("missing.py", "cannot load module 'missing.py': no such file"),
    ("json.py", "cannot load module 'json.py': the name 'json' is already taken by "),
    ("bad-name.py", "cannot load module 'bad-name.py': 'bad-name' is not a valid module name"),
])
def test_what_cannot_be_loaded_is_one_line(tmp_path, clean, spec, message):
    for name in ("json.py", "bad-name.py"):
        (tmp_path / name).write_text("")
    with pytest.raises(ModuleLoadError) as caught:
        load_module(spec, base_dir=tmp_path)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
