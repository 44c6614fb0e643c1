"""The project's version: the installed distribution's (pyproject.toml's), else this source tree's."""

from __future__ import annotations

import functools
import importlib.metadata

__version__ = "0.1.0"   # a test keeps it equal to pyproject.toml's version


@functools.cache
def version():
    """The version string `flexsched --version` prints and records carry."""
    try:
        return importlib.metadata.version("flexsched")
    except importlib.metadata.PackageNotFoundError:
        return __version__
