"""Puts this folder on sys.path, so every test module can import the shared test cases (cases.py);
gives every test a tuning database of its own."""

import pytest


@pytest.fixture(autouse=True)
def private_tuning_database(tmp_path_factory, monkeypatch):
    """Every test (and every process it starts) tunes into a database of its own, never the user's cache."""
    path = tmp_path_factory.mktemp("tuning-db") / "tuning.jsonl"
    monkeypatch.setenv("FLEXSCHED_DB", str(path))
    return path
