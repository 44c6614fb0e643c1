"""The operator library: the 14 operators of BENCHMARKS.md, registered by their abbreviations."""

from . import conv, linalg, shift  # noqa: F401  (importing registers the operators)
