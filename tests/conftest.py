"""Puts this folder on sys.path, so every test module can import the shared test cases (cases.py)."""
