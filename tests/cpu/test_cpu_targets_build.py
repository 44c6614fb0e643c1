"""Kernels built for a CPU target other than this host: compiled, kept, and refused at run time in one line."""

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from analysis import analyze
from codegen.cpu_backend import CompiledFunc, cannot_run_here, scheduling_cpu
from codegen.evaluators import MeasureEvaluator
from codegen.ir import CodegenError
from codegen.kernel import build
from flexsched import cpus
from flexsched.evaluation import ExplorationError
from flexsched.registry import get_task
from flexsched.schedule import Schedule
from flexsched.target import LLVM_TARGET_VARIABLE, get_target
from space.config import Config
from space.generate import generate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
from hot_loop import hottest_block  # noqa: E402

HOST_CPU, HOST_FEATURES = cpus.host()
OTHER_CPU = "skylake" if HOST_CPU != "skylake" else "znver4"
TASK = get_task("GMM", 16, 16, 16)
# Each row of O one 16-lane vector: whole registers on SSE, AVX2 and AVX-512 alike.
VECTOR_ROWS = Schedule.from_json(json.dumps([{"kind": "reorder", "node": "O", "order": ["i", "rk", "j"]},
                                             {"kind": "vectorize", "node": "O", "loop": "j"}]))


def reference_run(kernel):
    inputs = TASK.random_inputs(seed=2)
    (out,) = kernel.run(*inputs)
    np.testing.assert_allclose(out, TASK.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)


def test_a_kernel_for_another_cpu_builds_but_refuses_to_run():
    kernel = build(TASK, None, f"llvm -mcpu={OTHER_CPU}")
    assert kernel.llvm_ir and kernel.assembly()  # inspectable, and saved or shipped as it is
    with pytest.raises(CodegenError) as raised:
        kernel.run(*TASK.random_inputs())
    message = str(raised.value)
    assert f"cannot run here: the code is for CPU '{OTHER_CPU}', not this host's '{HOST_CPU}'" in message
    assert "\n" not in message


def test_a_kernel_using_a_feature_this_host_lacks_refuses_to_run():
    lacking = [name for name in ("amx-tile", "avx512vp2intersect", "avx512fp16", "xop", "fma4", "tbm")
               if f"-{name}" in HOST_FEATURES.split(",")]
    if not lacking:
        pytest.skip("this host has every candidate feature")
    kernel = build(TASK, None, f"llvm -mattr=+{lacking[0]}")
    with pytest.raises(CodegenError, match=rf"lacks \(\+{lacking[0]}\)"):
        kernel.run(*TASK.random_inputs())


@pytest.mark.parametrize("attrs, widest", [("-avx512f", "ymm"), ("-avx512f,-avx", "xmm")])
def test_fewer_features_than_the_host_runs_here_on_narrower_registers(attrs, widest):
    if widest == "ymm" and "avx2" not in cpus.enabled(HOST_FEATURES):
        pytest.skip("needs a host with AVX2")
    for schedule in (None, VECTOR_ROWS):
        kernel = build(TASK, schedule, f"llvm -mattr={attrs}")
        reference_run(kernel)
        wider = {"ymm": ("zmm",), "xmm": ("zmm", "ymm")}[widest]
        assert not any(f"%{register}" in kernel.assembly() for register in wider)
    assert f"%{widest}" in kernel.assembly()   # the vectorised rows use the widest registers there are


def test_the_forced_target_is_what_llvm_builds_and_runs_here(monkeypatch):
    """FLEXSCHED_LLVM_TARGET at AVX2: kernels of the bare llvm target are AVX2 code, and run on this host."""
    monkeypatch.setenv(LLVM_TARGET_VARIABLE, "llvm -mattr=-avx512f")
    target = get_target("llvm")
    kernel = build(TASK, VECTOR_ROWS, "llvm")
    assert kernel.compiled.code.host == (target.cpu, target.features) and target.vector_lanes <= 8
    reference_run(kernel)
    assert "%zmm" not in kernel.assembly()


def test_avx512_code_is_refused_on_a_host_with_only_avx2(monkeypatch):
    """As on an AVX2-only machine (this host's features cut to AVX2): AVX-512 code neither runs nor is
    measured there, and says why in one line."""
    avx512 = get_target(f"llvm -mcpu={HOST_CPU} -mattr=+avx512f")
    avx2 = get_target(f"llvm -mcpu={HOST_CPU} -mattr=-avx512f")
    code = build(TASK, VECTOR_ROWS, avx512).compiled.code
    monkeypatch.setattr(cpus, "host", lambda: (avx2.cpu, avx2.features))
    assert cannot_run_here((avx2.cpu, avx2.features)) == ""
    reason = cannot_run_here((avx512.cpu, avx512.features))
    prefix = f"the code uses features this host's CPU '{HOST_CPU}' lacks ("
    assert reason.startswith(prefix)
    shown = [name.strip() for name in reason[len(prefix):].rstrip(")").split(",") if name.strip() != "..."]
    # AVX-512's features, and where the CPU has them its successors (AVX10 sorts first: Intel hosts with FP16)
    assert any(name.startswith("+avx512") for name in shown)
    assert all(name.startswith(("+avx512", "+avx10", "+evex512")) for name in shown), shown
    assert "\n" not in reason
    with pytest.raises(CodegenError, match="cannot run here: the code uses features"):
        CompiledFunc(code)(*TASK.random_inputs(), np.zeros((16, 16), "float32"))
    with MeasureEvaluator(avx512) as evaluator, pytest.raises(ExplorationError) as raised:
        evaluator.check(TASK)
    assert f"cannot measure on {avx512.name}: {reason}; predict with the static CPU model" in str(raised.value)


@pytest.mark.skipif("avx512f" in cpus.enabled(HOST_FEATURES), reason="needs a host without AVX-512")
def test_forcing_avx512_on_this_host_is_refused(monkeypatch):
    monkeypatch.setenv(LLVM_TARGET_VARIABLE, "llvm -mattr=+avx512f")
    target = get_target("llvm")
    assert target.vector_lanes == 16
    kernel = build(TASK, VECTOR_ROWS, "llvm")   # it builds (to inspect or ship), but does not run here
    assert "%zmm" in kernel.assembly()
    with pytest.raises(CodegenError, match=rf"cannot run here: the code uses features this host's CPU "
                                           rf"'{HOST_CPU}' lacks \(\+avx512f\)$"):
        kernel.run(*TASK.random_inputs())
    with MeasureEvaluator("llvm") as evaluator:
        with pytest.raises(ExplorationError, match=re.escape(f"cannot measure on {target.name}:")):
            evaluator.check(TASK)


@pytest.mark.parametrize("cpu, features, scheduled_as", [
    ("znver5", "+avx2,+avx512f", "x86-64-v4"),
    ("znver4", "+avx2,+avx512f,-avx512f", "znver4"),
    ("emeraldrapids", "+avx2,+avx512f", "emeraldrapids"),
    ("skylake", "+avx2", "skylake"),
])
def test_zen_4_and_5_avx512_code_is_scheduled_by_the_generic_x86_64_v4_model(cpu, features, scheduled_as):
    assert scheduling_cpu(cpu, features) == scheduled_as


def test_a_large_unrolled_tile_built_for_zen_5_keeps_its_operands_in_registers():
    # A 1 x 1 convolution's 8 x 32 register tile with its reduction unrolled 32 steps: scheduled by
    # LLVM's Zen 5 model, its loads were hoisted until 278 of its instructions touched the stack.
    task = get_task("C2D", 1, 512, 28, 28, 256, 1, 1, 0, 1)
    target = get_target("llvm -mcpu=znver5")
    space = generate(analyze(task), target)
    chosen = {"pad.split.c": (512, 1), "pad.split.hw": (28, 28), "pad.fuse": 2, "pad.attach": "at",
              "O.split.k": (2, 1, 16, 8), "O.split.hw": (1, 25, 1, 32), "O.split.rc": (16, 16, 2), "O.order": 3,
              "O.accumulate": "registers", "O.vector": "hw", "O.block.pad": "none", "O.fuse": 1, "O.unroll": 512,
              "O.pack.pad": "none", "O.pack.W": "S0"}
    config = Config(tuple((knob.name, chosen[knob.name]) for knob in space.knobs))
    block = hottest_block(build(task, space.schedule(space.point(config)), target).assembly())
    assert block["multiply_adds"] == 8 * 2 * 32   # rows x vectors a row x reduce steps, all in one block
    assert block["stack_references"] == 0


def test_a_stride_2_tile_of_half_the_avx512_registers_keeps_its_taps_apart_and_its_operands_in_registers():
    # YOLO C1's kind of tile (7 x 7, stride 2): 2 rows x 8 columns by 16 channels, 16 accumulators of 32
    # registers, its 7 filter taps unrolled. The taps share 34 input columns; merged, they spilled 85 of the
    # loop's instructions to the stack. Fenced apart, each column is one embedded broadcast of its multiply-add.
    task = get_task("C2D", 1, 3, 64, 64, 16, 7, 2, 3)
    target = get_target("llvm -mcpu=znver5")   # built, not run: any x86 host
    space = generate(analyze(task), target)
    config = space.config(space.random_point(0)).to_dict()
    # O.vector "k": the channels take w's innermost factor (16) and w takes k's (8).
    config.update({"O.split.k": (4, 1, 1, 8), "O.split.h": (16, 1, 1, 2), "O.split.w": (2, 1, 1, 16),
                   "O.split.rc": (3, 1, 1), "O.split.rh": (7, 1, 1), "O.split.rw": (1, 1, 7), "O.unroll": 512,
                   "O.accumulate": "registers", "O.vector": "k", "O.block.pad": "none", "O.pack.pad": "none",
                   "O.pack.W": "none", "pad.attach": "root"})
    kernel = build(task, space.schedule(Config.from_dict(config)), target)
    block = hottest_block(kernel.assembly())
    assert block["multiply_adds"] == 2 * 8 * 7   # rows x columns x taps, one vector each, in one block
    assert block["stack_references"] == 0
    assert kernel.llvm_ir.count('asm sideeffect ""') == 7 - 1
