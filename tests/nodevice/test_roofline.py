"""Bytes moved and the roofline: which roof binds a task, and how close a time is to it."""

import pytest

from analysis import analyze
from codegen.roof import Roof, describe, roof_for
from flexsched.registry import get_task

ROOF = Roof(peak_gflops=100.0, peak_gbps=20.0, source="test figures")   # ridge at 5 FLOP per byte


def test_compulsory_bytes_count_inputs_and_outputs_once():
    info = analyze(get_task("GMM", 8, 4, 2))          # A 8x4, B 4x2, O 8x2, float32
    assert info.compulsory_bytes == 4 * (8 * 4 + 4 * 2 + 8 * 2)
    assert info.to_dict()["compulsory_bytes"] == info.compulsory_bytes


def test_intermediate_stages_are_not_compulsory_traffic():
    info = analyze(get_task("C2D", 1, 2, 6, 6, 3, 3, 1, 1))   # a padded input stage in between
    roles = {t.name: t.role for t in info.tensors}
    assert "intermediate" in roles.values()
    assert info.compulsory_bytes == sum(t.bytes for t in info.tensors if t.role != "intermediate")


@pytest.mark.parametrize("flops, bytes_moved, bound, attainable", [
    (1e9, 1e9, "memory", 20.0),      # 1 FLOP per byte: 20 GB/s x 1
    (1e10, 1e9, "compute", 100.0),   # 10 FLOP per byte: past the ridge
    (5e9, 1e9, "compute", 100.0),    # on the ridge: both roofs meet
    (1e9, 0, "compute", 100.0),      # nothing to move
])
def test_the_lower_roof_binds(flops, bytes_moved, bound, attainable):
    assert ROOF.bound(flops, bytes_moved) == bound
    assert ROOF.attainable_gflops(flops, bytes_moved) == pytest.approx(attainable)


def test_an_outer_product_is_memory_bound_and_a_large_matmul_compute_bound():
    outer, matmul = analyze(get_task("GMM", 1024, 1, 1024)), analyze(get_task("GMM", 1024, 1024, 1024))
    assert ROOF.bound(outer.flops, outer.compulsory_bytes) == "memory"
    assert ROOF.bound(matmul.flops, matmul.compulsory_bytes) == "compute"


def test_describe_names_the_binding_roof_and_the_share_reached():
    line = describe(10.0, 10.0, 1e9, 1e9, ROOF)
    assert "memory-bound" in line and "50% of the memory roof (20 GB/s" in line
    assert describe(10.0, 1.0, 1e9, 1e9, None) == "10.00 GFLOPS, 1.00 GB/s"


def test_a_gpu_roof_is_its_datasheet():
    roof = roof_for("cuda")
    assert roof.peak_gbps == 3350 and roof.peak_gflops > 60000 and "datasheet" in roof.source
    assert roof_for("fpga") is None


def test_a_working_set_that_fits_in_cache_is_said_to_be_able_to_pass_the_memory_roof():
    cached = Roof(100.0, 20.0, "test figures", cache_bytes=2**20)
    assert "fit in the 1 MiB last-level cache" in describe(1.0, 30.0, 1e5, 2**19, cached)
    assert "last-level cache" not in describe(1.0, 30.0, 1e9, 2**30, cached)
