"""NVIDIA GPUs as data: the limits a schedule must respect and the rates the static GPU model uses.

Figures from NVIDIA's H100 and H200 product briefs and datasheets (SM counts, boost clocks, memory
bandwidth, L2 size), the Hopper and Ampere architecture whitepapers (FP32 and INT32 lanes per SM,
shared memory per SM) and the CUDA C Programming Guide's table of compute capabilities (threads,
blocks, registers and shared memory per SM and per block). Latencies are typical published
microbenchmark figures for these generations, used only by the model.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuDevice:
    """One NVIDIA GPU model."""

    name: str
    part: str
    arch: str                        # nvcc's -arch, e.g. sm_90
    sms: int
    clock_mhz: float                 # boost clock
    fp32_lanes_per_sm: int           # FP32 FMA units per SM (one warp instruction per 32 per clock)
    int32_lanes_per_sm: int
    sfu_lanes_per_sm: int            # special-function units (exp, log, rsqrt)
    memory_gbps: float               # DRAM bandwidth, GB/s
    l2_gbps: float                   # L2 bandwidth, GB/s (about 2x DRAM on these parts)
    l2_bytes: int
    shared_bytes_per_sm: int
    shared_bytes_per_block: int      # without the dynamic opt-in
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    max_threads_per_sm: int = 2048
    max_threads_per_block: int = 1024
    max_blocks_per_sm: int = 32
    warp_size: int = 32
    shared_banks: int = 32
    global_latency_cycles: int = 600
    shared_latency_cycles: int = 30
    fma_latency_cycles: int = 4
    launch_overhead_s: float = 3e-6

    @property
    def peak_gflops(self):
        """FP32 FMA peak, counting a multiply-add as 2."""
        return self.sms * self.fp32_lanes_per_sm * 2 * self.clock_mhz / 1e3


DEVICES = {
    # H100 SXM5 80GB (HBM3): 132 SMs at 1.98 GHz, 67 TFLOPS FP32, 3.35 TB/s, 50 MB L2.
    "h100": GpuDevice("h100", "NVIDIA H100 SXM5 80GB", "sm_90", sms=132, clock_mhz=1980, fp32_lanes_per_sm=128,
                      int32_lanes_per_sm=64, sfu_lanes_per_sm=16, memory_gbps=3350, l2_gbps=7000,
                      l2_bytes=50 * 2**20, shared_bytes_per_sm=228 * 1024, shared_bytes_per_block=48 * 1024),
    # H100 PCIe 80GB (HBM2e): 114 SMs at 1.755 GHz, 51 TFLOPS FP32, 2.0 TB/s.
    "h100-pcie": GpuDevice("h100-pcie", "NVIDIA H100 PCIe 80GB", "sm_90", sms=114, clock_mhz=1755,
                           fp32_lanes_per_sm=128, int32_lanes_per_sm=64, sfu_lanes_per_sm=16, memory_gbps=2000,
                           l2_gbps=5500, l2_bytes=50 * 2**20, shared_bytes_per_sm=228 * 1024,
                           shared_bytes_per_block=48 * 1024),
    # H200 SXM 141GB (HBM3e): the H100's SMs and clocks with 4.8 TB/s.
    "h200": GpuDevice("h200", "NVIDIA H200 SXM 141GB", "sm_90", sms=132, clock_mhz=1980, fp32_lanes_per_sm=128,
                      int32_lanes_per_sm=64, sfu_lanes_per_sm=16, memory_gbps=4800, l2_gbps=7000,
                      l2_bytes=50 * 2**20, shared_bytes_per_sm=228 * 1024, shared_bytes_per_block=48 * 1024),
    # A100 SXM4 80GB: 108 SMs at 1.41 GHz, 19.5 TFLOPS FP32, 2.04 TB/s, 40 MB L2, 164 KB shared per SM.
    "a100": GpuDevice("a100", "NVIDIA A100 SXM4 80GB", "sm_80", sms=108, clock_mhz=1410, fp32_lanes_per_sm=64,
                      int32_lanes_per_sm=64, sfu_lanes_per_sm=16, memory_gbps=2039, l2_gbps=4000,
                      l2_bytes=40 * 2**20, shared_bytes_per_sm=164 * 1024, shared_bytes_per_block=48 * 1024),
}
DEFAULT_GPU = "h100"
