"""Loading the modules that define a user's operators: named on the command line (--module), in the
FLEXSCHED_MODULES environment variable, in a sweep file, or installed as plug-ins (the package
entry-point group "flexsched.tasks"). Loading is always the user's explicit choice: nothing read from a
record file ever chooses a module to import.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
import warnings
from pathlib import Path

from .errors import FlexschedError

ENV_VARIABLE = "FLEXSCHED_MODULES"
ENTRY_POINT_GROUP = "flexsched.tasks"


class ModuleLoadError(FlexschedError, ImportError):
    """A user module that cannot be found or fails while importing (one line naming it)."""


def load_module(spec, base_dir=None):
    """Import a module named `spec` (e.g. 'mypkg.ops') or the .py file it names (relative to base_dir
    if given, else to the working directory); ModuleLoadError if it cannot be loaded."""
    try:
        if _is_path(spec):
            return _load_file(Path(base_dir or ".") / spec)
        _search_working_directory()
        return importlib.import_module(spec)
    except _Refused as err:
        raise ModuleLoadError(f"cannot load module '{spec}': {err}") from None
    except Exception as err:  # noqa: BLE001 - any failure of the user's code is reported as its module's
        raise ModuleLoadError(f"cannot load module '{spec}': {_one_line(err)}") from None


def load_modules(specs, base_dir=None):
    """Load each module or file in order; the loaded modules."""
    return [load_module(spec, base_dir) for spec in specs]


def modules_from_env(environ=None):
    """The module names and files FLEXSCHED_MODULES lists (separated by os.pathsep or commas)."""
    text = (os.environ if environ is None else environ).get(ENV_VARIABLE, "")
    return [item.strip() for item in re.split(f"[,{re.escape(os.pathsep)}]", text) if item.strip()]


def load_entry_points():
    """Load every installed plug-in of the 'flexsched.tasks' group; one that fails is a warning, not
    an error, since the user did not name it."""
    loaded = []
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded.append(entry_point.load())
        except Exception as err:  # noqa: BLE001
            warnings.warn(f"plug-in '{entry_point.name}' ({entry_point.value}) of {ENTRY_POINT_GROUP} failed to "
                          f"load: {_one_line(err)}", stacklevel=2)
    return loaded


def load_user_modules(specs=(), environ=None):
    """What the command line loads before a subcommand runs: installed plug-ins, then the modules in
    FLEXSCHED_MODULES, then those named by --module."""
    load_entry_points()
    load_modules(modules_from_env(environ))
    load_modules(specs)


def _is_path(spec):
    """A .py file or a path (it names a file), as opposed to a dotted module name."""
    return spec.endswith(".py") or os.sep in spec or "/" in spec


def _search_working_directory():
    """Find module names in the working directory too, as `python -m` would, but after everything
    installed (appended), so a local file never shadows a library."""
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())


class _Refused(Exception):
    """A file that cannot be imported as a module, and why."""


def _load_file(path):
    """Import a .py file as the module named after it, with its folder on sys.path, so a task it
    defines has a module name that the registry (and a child process) can import again."""
    path = path.resolve()
    if not path.is_file():
        raise _Refused("no such file")
    name = path.stem
    if not name.isidentifier():
        raise _Refused(f"'{name}' is not a valid module name")
    existing = sys.modules.get(name)
    if existing is not None:
        if getattr(existing, "__file__", None) and Path(existing.__file__).resolve() == path:
            return existing
        raise _Refused(f"the name '{name}' is already taken by {getattr(existing, '__file__', None) or 'a module'}")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    return module


def _one_line(err):
    """'Type: message' on one line."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
