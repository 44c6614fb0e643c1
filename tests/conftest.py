"""Puts this folder on sys.path, so every test module can import the shared test cases (cases.py),
and points the user's cache directory at a temporary folder, so no test reads or writes the real one."""

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def private_cache_directory(tmp_path_factory):
    """XDG_CACHE_HOME (the tuning database, kept roofs) in a folder of this test session's own."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous
