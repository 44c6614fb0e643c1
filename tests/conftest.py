"""Puts this folder on sys.path, so every test module can import the shared test cases (cases.py);
points the user's cache directory at a temporary folder and gives every test a tuning database of
its own, so no test reads or writes the real ones."""

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def private_cache_directory(tmp_path_factory):
    """XDG_CACHE_HOME (kept roofs, and anything else cached) in a folder of this test session's own."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture(autouse=True)
def private_tuning_database(tmp_path_factory, monkeypatch):
    """Every test (and every process it starts) tunes into a database of its own, never the user's cache."""
    path = tmp_path_factory.mktemp("tuning-db") / "tuning.jsonl"
    monkeypatch.setenv("FLEXSCHED_DB", str(path))
    return path
