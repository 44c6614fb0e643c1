"""What fpga_model plugs in for the fpga target kind (flexsched.plugins): the model evaluator and the parts."""

from __future__ import annotations

from flexsched import plugins

from .devices import DEFAULT_DEVICE, DEVICES


def _model(target, **options):
    from .evaluator import FpgaEvaluator

    return FpgaEvaluator(target, **options)


def target_fields(device):
    """The Target fields of an FPGA part: what the space generator reads."""
    return {"device": device.part, "dsp_slices": device.dsp_slices, "bram18k_blocks": device.bram18k_blocks,
            "dsps_per_fma": device.dsps_per_fma}


plugins.register_evaluator("fpga", "model", _model, default=True)
plugins.register_devices("fpga", {name: target_fields(device) for name, device in DEVICES.items()}, DEFAULT_DEVICE)
