"""Lowering to a loop IR and the CPU/GPU back ends (issue: lowering and the CPU back end)."""
