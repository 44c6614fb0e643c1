"""The static GPU model's parts on hand-made inputs (no compiler, no GPU): PTX instruction classes
weighted by line, occupancy limits, and ptxas reports read back."""

import pytest

from codegen.gpu_model import ModelError, _resident_blocks, instruction_mix
from codegen.nvcc import PtxKernel, Resources, parse_ptxas_report
from flexsched.target import gpu_device

H100, A100 = gpu_device("cuda"), gpu_device("cuda:a100")


def test_instructions_are_classed_and_weighted_by_their_source_line():
    kernel = PtxKernel("k", (("fma.rn.f32", 10), ("ld.shared.f32", 10), ("ld.global.nc.v4.f32", 4),
                             ("st.global.f32", 12), ("mad.lo.s32", 10), ("div.s32", 3), ("bar.sync", 9),
                             ("ex2.approx.f32", 10), ("ld.local.f32", 10), ("bra.uni", 10), ("ld.param.u64", 1)),
                       Resources(32))
    mix = instruction_mix(kernel, {10: 64, 9: 8, 4: 8})
    assert mix["fp32"] == 64 and mix["shared"] == 64 and mix["sfu"] == 64 and mix["local"] == 64
    assert mix["global_load"] == 8 and mix["global_store"] == 1 and mix["barrier"] == 8
    assert mix["integer"] == 64 + 20   # an integer division expands to about 20 instructions
    assert mix["other"] == 64 + 1


def test_occupancy_is_limited_by_whichever_resource_runs_out_first():
    # 8 warps of 32 registers: threads allow 8 blocks, registers 8, shared memory plenty
    assert _resident_blocks(8, 32, 0, H100, "k") == (8, "threads")
    # 255 registers a thread: 8160 a warp, allocated as 8192; 8 warps take the SM's 65536
    assert _resident_blocks(8, 255, 0, H100, "k") == (1, "registers")
    # 100 KB of shared memory: two blocks in the H100's 228 KB, one in the A100's 164 KB
    assert _resident_blocks(2, 32, 100 * 1024, H100, "k") == (2, "shared")
    assert _resident_blocks(2, 32, 100 * 1024, A100, "k") == (1, "shared")
    assert _resident_blocks(1, 16, 0, H100, "k") == (32, "blocks")
    with pytest.raises(ModelError, match="does not fit an SM"):
        _resident_blocks(2, 32, 300 * 1024, H100, "k")
    with pytest.raises(ModelError, match="300 registers per thread"):
        _resident_blocks(1, 300, 0, H100, "k")


def test_ptxas_reports_are_read_per_entry():
    report = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'first' for 'sm_90'
ptxas info    : Function properties for first
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'second' for 'sm_90'
ptxas info    : Function properties for second
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 18 registers, 380 bytes cmem[0]
"""
    resources = parse_ptxas_report(report)
    assert resources["first"] == Resources(255, 4, 4, 8, 1024, 1)
    assert resources["second"] == Resources(18, 0, 0, 0, 0, 0)
