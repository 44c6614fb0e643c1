"""Hand-written FPGA convolution designs (Zhang et al., FPGA'15 style), as configs of our space.

Zhang's accelerator unrolls Tm output channels by Tn input channels into a PE array, tiles the
output rows and columns by Tr x Tc, and keeps the whole kernel window in each tile; the
FlexTensor paper's FPGA baseline uses these schedules. Loop names are those of the library's
convolutions (k, rc, h, w, rh, rw), which is why this lives in experiments/ and not in a package.
"""

from __future__ import annotations


def _split(extent, tile, lanes):
    lanes = min(lanes, extent)
    tile = max(1, min(tile, -(-extent // lanes)))
    return (-(-extent // (tile * lanes)), tile, lanes)


def tiled_conv_config(info, Tm, Tn, Tr, Tc):
    """{knob: value} of the Tm x Tn PE array with Tr x Tc output tiles, for the node named O."""
    node = info.node("O")
    extents = {loop.name: loop.extent for loop in node.loops if loop.extent > 1}
    plan = {"k": (1, Tm), "rc": (1, Tn), "h": (Tr, 1), "w": (Tc, 1)}
    config = {f"O.split.{name}": _split(extent, *plan.get(name, (extent, 1))) for name, extent in extents.items()}
    config.update({f"{n.name}.attach": "inline" for n in info.nodes if n.name != "O"})
    return config
