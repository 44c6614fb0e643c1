"""Puts this folder on sys.path, so every test module can import the shared test cases (cases.py);
points the user's cache directory and the compiled-kernel cache at temporary folders and gives every
test a tuning database of its own, so no test reads or writes the real ones."""

import os

import pytest

# Set for the whole session, so the measurement and build workers tests start inherit them.
PRIVATE_ENVIRONMENT = {"XDG_CACHE_HOME": "cache", "FLEXSCHED_KERNEL_CACHE": "kernels"}


@pytest.fixture(autouse=True, scope="session")
def private_cache_directory(tmp_path_factory):
    """XDG_CACHE_HOME (kept roofs, and anything else cached) and FLEXSCHED_KERNEL_CACHE (compiled
    kernels) in folders of this test session's own."""
    previous = {name: os.environ.get(name) for name in PRIVATE_ENVIRONMENT}
    for name, folder in PRIVATE_ENVIRONMENT.items():
        os.environ[name] = str(tmp_path_factory.mktemp(folder))
    yield
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def private_tuning_database(tmp_path_factory, monkeypatch):
    """Every test (and every process it starts) tunes into a database of its own, never the user's cache."""
    path = tmp_path_factory.mktemp("tuning-db") / "tuning.jsonl"
    monkeypatch.setenv("FLEXSCHED_DB", str(path))
    return path
