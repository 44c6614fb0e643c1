"""FPGA parts as data: the resources the model and the space read, with their sources."""

from __future__ import annotations

from dataclasses import dataclass

from flexsched.errors import FlexschedError

BRAM18K_BITS = 18 * 1024


class DeviceError(FlexschedError, ValueError):
    """An unknown FPGA part."""


@dataclass(frozen=True)
class FpgaDevice:
    """One FPGA part on a typical board: on-chip resources, off-chip memory and a clock."""

    name: str                 # the short name used on the command line ("vu9p")
    part: str                 # the vendor's part family name
    dsp_slices: int
    bram18k_blocks: int       # 18 Kb block RAMs (a BRAM36 counts as two)
    uram_blocks: int          # 288 Kb UltraRAMs (UltraScale+ only; the model does not place buffers there)
    luts: int
    flip_flops: int
    ddr_channels: int         # independent off-chip memory channels of the board
    ddr_channel_gbps: float   # peak GB/s of one channel
    clock_mhz: float          # the kernel clock a design is assumed to close at
    dsps_per_fmul: int        # DSP slices of one float32 multiplier
    dsps_per_fadd: int        # DSP slices of one float32 adder
    board: str                # where the memory and clock figures come from

    @property
    def dsps_per_fma(self):
        return self.dsps_per_fmul + self.dsps_per_fadd

    @property
    def ddr_gbps(self):
        return self.ddr_channels * self.ddr_channel_gbps

    def to_dict(self):
        return {**self.__dict__, "dsps_per_fma": self.dsps_per_fma, "ddr_gbps": self.ddr_gbps}


# Resource counts: Xilinx DS890 "UltraScale Architecture and Product Data Sheet: Overview"
# (Virtex UltraScale+ and Zynq UltraScale+ tables) and DS180 "7 Series FPGAs Data Sheet:
# Overview" (Virtex-7 table). BRAM18K = 2 x the BRAM36 count the tables list.
# DSPs per float32 operator: Floating-Point Operator v7.1 (PG060), "full DSP usage": a
# single-precision multiplier takes 3 DSP48 slices and an adder 2 (Zhang et al., FPGA'15,
# count the same 5 per multiply-add on the Virtex-7: 448 PEs use 2240 DSPs).
DEVICES = {
    "vu9p": FpgaDevice(
        "vu9p", "Xilinx Virtex UltraScale+ VU9P", dsp_slices=6840, bram18k_blocks=4320, uram_blocks=960,
        luts=1_182_240, flip_flops=2_364_480,
        # AWS F1 / VCU1525 boards: four DDR4-2400 channels, 64 data bits each = 19.2 GB/s each;
        # 250 MHz is the usual kernel clock of their shells (the FlexTensor paper gives none).
        ddr_channels=4, ddr_channel_gbps=19.2, clock_mhz=250.0, dsps_per_fmul=3, dsps_per_fadd=2,
        board="AWS F1 / VCU1525: 4 x DDR4-2400 (64 bit), 250 MHz kernel clock"),
    "zu9eg": FpgaDevice(
        "zu9eg", "Xilinx Zynq UltraScale+ ZU9EG", dsp_slices=2520, bram18k_blocks=1824, uram_blocks=0,
        luts=274_080, flip_flops=548_160,
        # ZCU102 board: the programmable logic reaches the processing system's 64-bit DDR4-2400
        # (19.2 GB/s peak) through its HP ports; 200 MHz is a common PL clock.
        ddr_channels=1, ddr_channel_gbps=19.2, clock_mhz=200.0, dsps_per_fmul=3, dsps_per_fadd=2,
        board="ZCU102: PS DDR4-2400 (64 bit) via HP ports, 200 MHz"),
    "vx485t": FpgaDevice(
        "vx485t", "Xilinx Virtex-7 VX485T", dsp_slices=2800, bram18k_blocks=2060, uram_blocks=0,
        luts=303_600, flip_flops=607_200,
        # VC707 board: one DDR3-1600 SODIMM, 64 data bits = 12.8 GB/s peak; 100 MHz is the clock
        # of Zhang et al.'s accelerator on this part (FPGA'15).
        ddr_channels=1, ddr_channel_gbps=12.8, clock_mhz=100.0, dsps_per_fmul=3, dsps_per_fadd=2,
        board="VC707: 1 x DDR3-1600 SODIMM (64 bit), 100 MHz (Zhang et al. FPGA'15)"),
}
DEFAULT_DEVICE = "vu9p"


def get_device(name):
    """The FPGA part called name (case-insensitive)."""
    if isinstance(name, FpgaDevice):
        return name
    key = str(name).lower()
    if key not in DEVICES:
        raise DeviceError(f"unknown FPGA device '{name}'; choose one of {', '.join(DEVICES)}")
    return DEVICES[key]


def device_of_target(target):
    """The FpgaDevice behind an fpga Target ("fpga" is the default part, "fpga:<part>" names one)."""
    if target.kind != "fpga":
        raise DeviceError(f"target '{target.name}' is a {target.kind}, not an FPGA")
    _, _, part = target.name.partition(":")
    return get_device(part or DEFAULT_DEVICE)
