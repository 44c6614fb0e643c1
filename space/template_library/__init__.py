"""The template library: hand-written schedule templates for the paper's operators, the baseline
that the generated spaces are compared against. Importing it registers them."""

from . import cpu_conv, cpu_hand_tuned, cpu_linalg, gpu  # noqa: F401
