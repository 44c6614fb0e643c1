"""Kernels built for a CPU target other than this host: compiled, kept, and refused at run time in one line."""

import numpy as np
import pytest

from codegen.ir import CodegenError
from codegen.kernel import build
from flexsched import cpus
from flexsched.registry import get_task

HOST_CPU, HOST_FEATURES = cpus.host()
OTHER_CPU = "skylake" if HOST_CPU != "skylake" else "znver4"
TASK = get_task("GMM", 16, 16, 16)


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
    kernel = build(TASK, None, f"llvm -mattr={attrs}")
    reference_run(kernel)
    wider = {"ymm": ("zmm",), "xmm": ("zmm", "ymm")}[widest]
    assert not any(f"%{register}" in kernel.assembly() for register in wider)
