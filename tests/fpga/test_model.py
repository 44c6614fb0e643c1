"""The analytical FPGA model, its evaluator and the design search (no hardware)."""

import json
import math
import time

import numpy as np
import pytest

from analysis import analyze
from explore.optimize import optimize
from flexsched.cli import main
from flexsched.registry import get_task
from flexsched.target import TargetError, get_target
from fpga_model.devices import DEVICES, device_of_target
from fpga_model.evaluator import FpgaEvaluator
from fpga_model.model import FpgaModel, ModelParams
from space import Config, generate

pytestmark = pytest.mark.fpga

TINY = {
    "GMV": (8, 6), "GMM": (6, 5, 7), "BIL": (3, 4, 5, 3), "C1D": (1, 3, 10, 4, 3, 1, 1),
    "T1D": (1, 4, 8, 4, 3, 2, 1), "C2D": (1, 3, 7, 7, 4, 3, 1, 1), "T2D": (1, 3, 4, 4, 2, 3, 2, 1),
    "C3D": (1, 2, 4, 4, 4, 3, 3, 1, 1), "T3D": (1, 2, 3, 3, 3, 2, 3, 2, 1), "GRP": (1, 4, 5, 5, 4, 3, 1, 1, 2),
    "DEP": (1, 4, 5, 5, 2, 3, 1, 1), "DIL": (1, 3, 7, 7, 4, 3, 1, 2, 2), "BCM": (8, 8, 4), "SHO": (1, 4, 4, 9, 3),
}
EXACT = ModelParams(memory_efficiency=1.0, ddr_latency_ns=0.0)  # keep the hand computation short


def test_a_tiny_gmm_design_matches_the_hand_computation():
    model = FpgaModel(get_task("GMM", 16, 8, 16), "vu9p", EXACT)
    estimate = model.estimate({"O.split.i": (2, 2, 4), "O.split.j": (2, 4, 2), "O.split.rk": (1, 8, 1)})
    # 8 PEs (i 4 x j 2); a round is 2 x 4 x 8 = 64 pipelined iterations at II 1 (8 spatial tile
    # iterations separate two updates of one accumulator, more than the adder's 7 cycles),
    # plus a depth of 2 + 4 + 7 = 13. A's 8 x 8 tile is one contiguous 256-byte run (4 beats of
    # 64 B); B's and O's 8 x 8 tiles are 8 runs of 32 B (8 beats): R = W = 8 cycles.
    (node,) = estimate.nodes
    assert (node.pe, node.ii, node.rounds) == (8, 1, 4)
    assert (node.read_cycles, node.compute_cycles, node.write_cycles) == (8, 77, 8)
    assert node.bound == "compute"
    assert estimate.cycles == 3 * 77 + 8 + 77 + 8
    assert estimate.seconds == pytest.approx(324 / 250e6)
    assert estimate.gflops == pytest.approx(2 * 16 * 8 * 16 / (324 / 250e6) / 1e9)
    assert (estimate.dsp, estimate.bram) == (8 * 5, 0)


def test_an_accumulating_pipeline_waits_for_the_adder():
    model = FpgaModel(get_task("GMM", 16, 8, 16), "vu9p", EXACT)
    estimate = model.estimate({"O.split.i": (4, 1, 4), "O.split.j": (8, 1, 2), "O.split.rk": (1, 8, 1)})
    assert estimate.nodes[0].ii == 7  # one output per round: each iteration waits on the last add


@pytest.mark.parametrize("config, reason", [
    ({"O.split.i": (16, 1, 64), "O.split.j": (32, 1, 32), "O.split.rk": (1024, 1, 1)},
     "DSP: the design needs 10240 DSP slices, the vu9p has 6840"),
    ({"O.split.i": (1, 1024, 1), "O.split.j": (1, 1024, 1), "O.split.rk": (1, 1024, 1)}, "BRAM: the design needs"),
])
def test_a_design_over_the_device_is_rejected_with_its_reason(config, reason):
    model = FpgaModel(get_task("GMM", 1024, 1024, 1024), "vu9p")
    estimate = model.estimate(config)
    assert not estimate.feasible and estimate.reason.startswith(reason)
    assert estimate.seconds == math.inf and estimate.gflops == 0


def test_more_pes_within_the_limits_never_raise_compute_cycles():
    model = FpgaModel(get_task("C2D", 1, 64, 28, 28, 128, 3, 1, 1), "vu9p")
    base = {"O.split.h": (2, 7, 2), "O.split.w": (2, 7, 2), "O.split.rc": (8, 8, 1), "O.split.rh": (1, 3, 1),
            "O.split.rw": (1, 3, 1), "pad.attach": "inline"}
    previous = math.inf
    for lanes in (1, 2, 4, 8, 16, 32):
        estimate = model.estimate({**base, "O.split.k": (4, 32 // lanes, lanes)})
        assert estimate.feasible, estimate.reason
        assert estimate.nodes[0].compute_cycles <= previous
        previous = estimate.nodes[0].compute_cycles


@pytest.mark.parametrize("op", sorted(TINY))
def test_random_points_of_every_operator_evaluate(op):
    task = get_task(op, *TINY[op])
    space = generate(analyze(task), "fpga")
    rng = np.random.default_rng(0)
    results = FpgaEvaluator(get_target("fpga")).evaluate(task, space, [space.random_point(rng) for _ in range(40)])
    assert all(r.status in ("ok", "rejected") for r in results), [r.error for r in results if r.status == "error"]
    for result in results:
        if result.ok:
            assert math.isfinite(result.seconds) and result.error == ""
            assert {"gflops", "latency_s", "cycles", "dsp", "bram", "bandwidth_gbps", "bound"} <= set(result.details)
            assert result.details["bound"] in ("read", "compute", "write")
            json.dumps(result.details)
        else:  # the space leaves joint DSP and BRAM limits to the model: those are the only rejections
            assert result.seconds == math.inf and result.error.startswith(("DSP: ", "BRAM: "))


C2 = ("C2D", 1, 64, 112, 112, 192, 3, 1, 1)  # YOLO's second layer, a 3x3 convolution
C2_BASELINE = {"pad.split.c": (64, 1, 1), "pad.split.h": (114, 1, 1), "pad.split.w": (114, 1, 1),
               "pad.attach": "inline", "O.split.k": (3, 1, 64), "O.split.rc": (4, 1, 16), "O.split.h": (8, 14, 1),
               "O.split.w": (8, 14, 1), "O.split.rh": (1, 3, 1), "O.split.rw": (1, 3, 1)}


def test_a_1024_lane_array_of_a_3x3_conv_is_a_point_and_fits_the_vu9p():
    # 64 output x 16 input channels of PEs: outside the old evenly grown caps (768 lanes at most).
    task = get_task(*C2)
    space = generate(analyze(task), "fpga:vu9p")
    point = space.point(Config(tuple(C2_BASELINE.items())))
    (result,) = FpgaEvaluator(get_target("fpga:vu9p")).evaluate(task, space, [point])
    assert result.ok, result.error
    assert (result.details["nodes"][0]["pe"], result.details["dsp"]) == (1024, 5120)


def test_an_array_over_the_dsps_is_a_point_the_model_rejects_with_the_reason():
    task = get_task(*C2)
    space = generate(analyze(task), "fpga:vu9p")
    wide = {**C2_BASELINE, "O.split.k": (1, 3, 64), "O.split.rc": (2, 1, 32)}  # 2048 lanes, 10240 DSPs
    (result,) = FpgaEvaluator(get_target("fpga:vu9p")).evaluate(task, space, [space.point(Config(tuple(wide.items())))])
    assert result.status == "rejected"
    assert result.error == "DSP: the design needs 10240 DSP slices, the vu9p has 6840"


@pytest.mark.parametrize("op, args", [("C2D", C2[1:]), ("C3D", (1, 64, 16, 56, 56, 64, 3, 1, 1)),
                                      ("GMM", (4096, 4096, 4096)), ("GRP", (1, 384, 13, 13, 384, 3, 1, 1, 2))])
def test_enough_random_points_fit_a_small_device_for_the_warm_up(op, args):
    # explore's warm-up draws up to 64 random points until one succeeds; at 10% that fails
    # with probability 0.9^64 = 1e-3, and the rates measured are 17-48% on the ZU9EG.
    task = get_task(op, *args)
    space = generate(analyze(task), "fpga:zu9eg")
    results = FpgaEvaluator(get_target("fpga:zu9eg")).evaluate(task, space, [space.random_point(s) for s in range(200)])
    assert sum(r.ok for r in results) >= 20


def test_the_model_evaluates_thousands_of_points_per_second():
    task = get_task("C2D", 1, 64, 112, 112, 192, 3, 1, 1)
    space = generate(analyze(task), "fpga")
    evaluator = FpgaEvaluator(get_target("fpga"))
    points = [space.random_point(seed) for seed in range(1000)]
    evaluator.evaluate(task, space, points[:10])
    start = time.perf_counter()
    evaluator.evaluate(task, space, points)
    assert 1000 / (time.perf_counter() - start) > 1000


def test_the_q_search_nearly_peaks_the_largest_array_that_fits():
    # GMM 256 has power-of-two factors only: 256 lanes is the largest array within the ZU9EG's
    # 504 (2520 DSPs / 5), 2 x 256 flops x 200 MHz = 102.4 GFLOPS at best.
    task = get_task("GMM", 256, 256, 256)
    result = optimize(task, "fpga:zu9eg", trials=300, method="q", seed=0)
    first = next(entry for entry in result.history.entries if entry.ok)
    assert result.trials == 300 and result.kernel is None
    assert result.gflops >= 0.95 * 102.4 > first.gflops
    assert result.history.best.evaluation.details["dsp"] == 256 * 5 <= DEVICES["zu9eg"].dsp_slices


def test_fpga_targets_name_their_device():
    assert get_target("fpga").dsp_slices == DEVICES["vu9p"].dsp_slices
    zu9eg = get_target("fpga:zu9eg")
    assert (zu9eg.kind, zu9eg.dsp_slices, zu9eg.bram18k_blocks) == ("fpga", 2520, 1824)
    assert device_of_target(zu9eg) is DEVICES["zu9eg"]
    assert device_of_target(get_target("fpga")) is DEVICES["vu9p"]
    with pytest.raises(TargetError, match="unknown FPGA device 'kintex'; choose one of vu9p, zu9eg, vx485t"):
        get_target("fpga:kintex")


def test_hls_command_writes_the_sources_and_reports_the_design(tmp_path, capsys):
    assert main(["hls", "GMM", "16", "16", "16", "--device", "zu9eg", "-o", str(tmp_path), "--trials", "100",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"gflops", "latency_s", "dsp", "bram", "bound", "config", "files"} <= set(report)
    assert (report["method"], report["trials"], report["target"]) == ("q", 100, "fpga:zu9eg")  # explore's search
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gmm.cpp", "gmm.h", "gmm_tb.cpp"]
    assert main(["hls", "GMM", "16", "16", "16", "--device", "nope", "-o", str(tmp_path)]) == 2
    assert "unknown FPGA device 'nope'" in capsys.readouterr().err


def test_tune_on_an_fpga_searches_with_the_model_and_reports_the_design(capsys):
    assert main(["tune", "C2D", "1", "4", "8", "8", "8", "3", "1", "1", "--target", "fpga", "--device", "zu9eg",
                 "--trials", "60", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(lines[-1])
    assert summary["target"] == "fpga:zu9eg" and summary["trials"] == 60
    device = DEVICES["zu9eg"]
    assert 0 < summary["dsp"] <= device.dsp_slices and 0 <= summary["bram"] <= device.bram18k_blocks
    assert summary["bound"] in ("read", "compute", "write")
    assert summary["gflops"] == pytest.approx(summary["best_gflops"])
    assert summary["latency_s"] == pytest.approx(summary["best_seconds"])
    assert any(line.startswith("resources:") for line in lines)
