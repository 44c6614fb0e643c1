"""Analytical FPGA pipeline model and HLS emission (issue: FPGA target)."""
