"""Kernel objects: calling conventions, argument checks, what they show, and the C library."""

import re
import subprocess
import textwrap

import numpy as np
import pytest
import torch

from analysis import analyze
from codegen.kernel import build
from flexsched.registry import get_task
from flexsched.target import get_target
from space import Config, generate

pytestmark = pytest.mark.cpu


@pytest.fixture(scope="module")
def gmm():
    task = get_task("GMM", 24, 20, 36)
    space = generate(analyze(task), "llvm")
    return task, build(task, space.schedule(space.random_point(4)))


def test_numpy_and_torch_arguments_without_copies(gmm):
    task, kernel = gmm
    a, b = task.random_inputs(0)
    expected = task.evaluate(a, b)[0]
    out = torch.zeros(24, 36)
    kernel(torch.from_numpy(a), torch.from_numpy(b), out)  # written in place: no copy made
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-4)
    (again,) = kernel.run(a, b)
    np.testing.assert_allclose(again, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arrays, message", [
    (lambda a, b, o: (a[:, :10], b, o), "argument 'A'"),
    (lambda a, b, o: (a, b.astype("float64"), o), "argument 'B'"),
    (lambda a, b, o: (a, b, o.T), "argument 'O'"),
    (lambda a, b, o: (a, b), "takes 3 arrays"),
])
def test_bad_arguments_name_the_parameter(gmm, arrays, message):
    task, kernel = gmm
    a, b = task.random_inputs(0)
    with pytest.raises((ValueError, TypeError), match=message):
        kernel(*arrays(a, b, np.zeros((24, 36), "float32")))


def test_kernel_shows_loop_ir_llvm_ir_and_assembly(gmm):
    _, kernel = gmm
    assert "for O." in kernel.loop_ir and "O[" in kernel.loop_ir
    assert "define" in kernel.llvm_ir and "fmul" in kernel.llvm_ir or "fma" in kernel.llvm_ir
    assert "ret" in kernel.asm()


def test_workspaces_for_intermediate_stages():
    task = get_task("C2D", 1, 3, 9, 9, 4, 3, 1, 1)
    space = generate(analyze(task), "llvm")
    config = space.config(space.random_point(0)).to_dict()
    config["pad.attach"] = "root"  # the padded input lives in a workspace the kernel owns
    from space import Config
    kernel = build(task, space.schedule(space.point(Config.from_dict(config))))
    assert [b.name for b in kernel.lowered.workspaces] == ["pad"]
    inputs = task.random_inputs(1)
    np.testing.assert_allclose(kernel.run(*inputs)[0], task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)


def test_arguments_and_workspaces_start_on_a_cache_line():
    task = get_task("C2D", 1, 3, 9, 9, 4, 3, 1, 1)
    space = generate(analyze(task), "llvm")
    config = space.config(space.random_point(0)).to_dict()
    config["pad.attach"] = "root"
    kernel = build(task, space.schedule(space.point(Config.from_dict(config))))
    image, weight = task.random_inputs(1)
    offset = np.empty(image.size + 16, image.dtype)
    offset = offset[(-offset.ctypes.data % 64) // 4 + 1:][:image.size].reshape(image.shape)   # 4 bytes past a line
    offset[...] = image
    arrays = kernel.arguments([offset, weight])
    assert all(array.ctypes.data % 64 == 0 for array in arrays)
    np.testing.assert_array_equal(arrays[0], image)
    kernel(*arrays)
    assert all(array.ctypes.data % 64 == 0 for array in kernel._local.workspaces)
    np.testing.assert_allclose(arrays[-1], task.evaluate(image, weight)[0], rtol=1e-4, atol=1e-4)


C_MAIN = textwrap.dedent("""
    #include <stdio.h>
    #include <stdlib.h>
    #include "{name}.h"
    static float *load(const char *path, size_t count) {{
        float *data = malloc(count * sizeof(float));
        FILE *file = fopen(path, "rb");
        if (!data || !file || fread(data, sizeof(float), count, file) != count) exit(2);
        fclose(file);
        return data;
    }}
    int main(int argc, char **argv) {{
        {loads}
        float *out = malloc({out_size} * sizeof(float));
        if ({name}({args}, out) != 0) return 3;
        FILE *file = fopen(argv[{out_arg}], "wb");
        fwrite(out, sizeof(float), {out_size}, file);
        fclose(file);
        return 0;
    }}
""")


@pytest.mark.parametrize("name, args, attach", [("GMM", (24, 20, 36), None), ("C2D", (1, 3, 9, 9, 4, 3, 2, 1), "root")])
def test_shared_library_called_from_c(tmp_path, name, args, attach):
    """A C program links the saved library and computes what the reference computes."""
    task = get_task(name, *args)
    space = generate(analyze(task), "llvm")
    config = space.config(space.random_point(2)).to_dict()
    if attach:
        config["pad.attach"] = attach
    from space import Config
    kernel = build(task, space.schedule(space.point(Config.from_dict(config))))
    library, header = kernel.save(tmp_path, "flexkernel")
    assert library.exists() and "int flexkernel(const float *" in header.read_text()
    inputs = task.random_inputs(3)
    paths = []
    for index, array in enumerate(inputs):
        paths.append(tmp_path / f"in{index}.bin")
        array.tofile(paths[-1])
    loads = "\n    ".join(f"float *in{i} = load(argv[{i + 1}], {a.size});" for i, a in enumerate(inputs))
    out_size = task.outputs[0].size
    source = C_MAIN.format(name="flexkernel", loads=loads, out_size=out_size,
                           args=", ".join(f"in{i}" for i in range(len(inputs))), out_arg=len(inputs) + 1)
    (tmp_path / "main.c").write_text(source)
    program = tmp_path / "main"
    subprocess.run(["cc", "-O1", "-o", str(program), str(tmp_path / "main.c"), f"-I{tmp_path}", f"-L{tmp_path}",
                    "-lflexkernel", f"-Wl,-rpath,{tmp_path}"], check=True)
    out_path = tmp_path / "out.bin"
    subprocess.run([str(program), *map(str, paths), str(out_path)], check=True)
    result = np.fromfile(out_path, dtype="float32").reshape(task.outputs[0].shape)
    np.testing.assert_allclose(result, task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)


def test_register_tile_lives_in_registers():
    """Accumulating in a register tile stores the output once per tile and leaves no stack buffer
    behind; accumulating into the output itself never stores less (LLVM keeps it in registers
    too where it can prove the output's rows apart from the inputs)."""
    task = get_task("C2D", 1, 8, 6, 16, 8, 3, 1, 1)
    space = generate(analyze(task), "llvm")
    config = space.config(space.random_point(0)).to_dict()
    config.update({"O.split.k": (2, 1, 1, 4), "O.split.h": (6, 1, 1, 1), "O.split.w": (1, 1, 1, 16),
                   "O.split.rc": (2, 1, 4), "O.split.rh": (1, 1, 3), "O.split.rw": (1, 1, 3),
                   "O.unroll": 128, "O.order": 0, "O.fuse": 2,
                   "O.pack.pad": "none", "O.pack.W": "none", "pad.attach": "root"})
    if "O.vector" in config:   # the 8 channels fill an AVX2 vector: keep w vectorised
        config["O.vector"] = "w"
    # The tile is rows x width: one vector of the schedule's width per row, however many registers
    # the target needs for it (one AVX-512 register, two AVX2 ones), so the IR's vector type is
    # the width's, not the machine's.
    rows, width = config["O.split.k"][-1], config["O.split.w"][-1]
    vector_stores = {}
    for accumulate in ("registers", "memory"):
        config["O.accumulate"] = accumulate
        kernel = build(task, space.schedule(Config.from_dict(config)))
        inputs = task.random_inputs(0)
        np.testing.assert_allclose(kernel.run(*inputs)[0], task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)
        # Count in the convolution's segment only: how the padding segment before it stores its
        # 18-wide rows depends on the CPU's vector width.
        convolution = kernel.llvm_ir.split(f"define void @{kernel.compiled.segments[-1][0]}(")[-1]
        vector_stores[accumulate] = convolution.count(f"store <{width} x float>")
        if accumulate == "registers":
            assert "alloca" not in kernel.llvm_ir
    assert 0 < vector_stores["registers"] <= rows  # each row copied out once
    assert vector_stores["registers"] <= vector_stores["memory"]


@pytest.mark.parametrize("unroll", [128, 32])
def test_a_reductions_unrolled_steps_into_a_tile_of_over_half_the_registers_are_fenced(unroll):
    """Twelve AVX2 accumulators (2 x 3 pixels by 2 vectors of channels) of a 3 x 3 convolution whose
    filter steps are unrolled, by the schedule (an unroll budget of 128) or, left serial (32), by the
    code generator: without a fence between the steps LLVM keeps the inputs that recur at the next
    filter column live, and spilled 71 vectors in the multiply-add loop. A tile of half the registers
    or fewer, or accumulation in the output, is left alone."""
    target = get_target("llvm -mattr=-avx512f")   # 8 lanes and 16 registers, on an AVX2 or AVX-512 host
    task = get_task("C2D", 1, 16, 4, 24, 16, 3, 1, 1)
    space = generate(analyze(task), target)
    config = space.config(space.random_point(0)).to_dict()
    # O.vector "k": the channels take w's innermost factor (16) and w takes k's (3).
    config.update({"O.split.k": (6, 1, 1, 3), "O.split.h": (2, 1, 1, 2), "O.split.w": (2, 1, 1, 16),
                   "O.split.rc": (2, 1, 8), "O.split.rh": (1, 1, 3), "O.split.rw": (1, 1, 3), "O.unroll": unroll,
                   "O.accumulate": "registers", "O.vector": "k", "O.block.pad": "none", "O.pack.pad": "none",
                   "O.pack.W": "none", "pad.attach": "root"})
    inputs = task.random_inputs(0)
    fences = {}
    for rows, accumulate in ((2, "registers"), (1, "registers"), (2, "memory")):
        config.update({"O.split.h": (4 // rows, 1, 1, rows), "O.accumulate": accumulate})
        kernel = build(task, space.schedule(Config.from_dict(config)), target)
        np.testing.assert_allclose(kernel.run(*inputs)[0], task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)
        fences[rows, accumulate] = kernel.llvm_ir.count('asm sideeffect ""')
        if (rows, accumulate) == (2, "registers"):
            blocks = re.split(r"\n(?=\.LBB)", kernel.compiled.asm())
            loop = max(blocks, key=lambda block: block.count("vfmadd"))
            assert loop.count("vfmadd") >= 12 * 3
            assert not re.findall(r"%ymm\d+, -?\d*\(%rsp\)|\(%rsp\), %ymm", loop)
    assert fences[2, "registers"] > 0 and fences[1, "registers"] == 0 and fences[2, "memory"] == 0


@pytest.mark.parametrize("taps, stride, fenced", [(7, 2, True), (3, 1, False)])
def test_unrolled_filter_taps_whose_shared_inputs_would_not_fit_beside_the_tile_are_fenced(taps, stride, fenced):
    """Eight AVX2 accumulators (4 pixels by 2 vectors of channels, half the 16 registers) over a filter
    row unrolled tap by tap. At stride 2 over 7 taps, 9 of the input columns are read at two taps or
    more: merged, 8 + 9 values outgrow the registers (unfenced, the loop spilled 8 vectors), so the
    taps are fenced and the multiply-add loop keeps everything in registers. At stride 1 over 3 taps,
    4 columns are shared, which fit: no fence."""
    target = get_target("llvm -mattr=-avx512f")   # 8 lanes and 16 registers, on an AVX2 or AVX-512 host
    task = get_task("C2D", 1, 3, 16 * stride, 16 * stride, 16, taps, stride, taps // 2)
    space = generate(analyze(task), target)
    config = space.config(space.random_point(0)).to_dict()
    # O.vector "k": the channels take w's innermost factor (16) and w takes k's (4).
    config.update({"O.split.k": (4, 1, 1, 4), "O.split.h": (16, 1, 1, 1), "O.split.w": (1, 1, 1, 16),
                   "O.split.rc": (3, 1, 1), "O.split.rh": (taps, 1, 1), "O.split.rw": (1, 1, taps), "O.unroll": 128,
                   "O.accumulate": "registers", "O.vector": "k", "O.block.pad": "none", "O.pack.pad": "none",
                   "O.pack.W": "none", "pad.attach": "root"})
    kernel = build(task, space.schedule(Config.from_dict(config)), target)
    inputs = task.random_inputs(0)
    np.testing.assert_allclose(kernel.run(*inputs)[0], task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)
    assert kernel.llvm_ir.count('asm sideeffect ""') == (taps - 1 if fenced else 0)
    blocks = re.split(r"\n(?=\.LBB)", kernel.compiled.asm())
    loop = max(blocks, key=lambda block: block.count("vfmadd"))
    assert loop.count("vfmadd") >= 8 * taps
    assert not re.findall(r"%ymm\d+, -?\d*\(%rsp\)|\(%rsp\), %ymm", loop)


def test_a_blocked_interface_shows_in_the_signature_and_the_c_header(tmp_path):
    from codegen.export import header_text
    from flexsched.schedule import Layout, Schedule
    from flexsched.torch_ops import torch_op
    task = get_task("GMM", 16, 12, 32)
    kernel = build(task, Schedule((Layout("B", 1, 16, True),)))
    assert kernel.signature == ("A: float32[16, 12], B: float32[12, 2, 16] (blocked: logical [12, 32], "
                                "dim 1 by 16), O: float32[16, 32]")
    assert "B: float32[12, 2, 16], input, blocked: the logical [12, 32] array with dimension 1 split by 16" \
        in header_text(kernel, "gmm")
    inputs = task.random_inputs(0)
    np.testing.assert_allclose(kernel.run(*inputs)[0], task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="takes B blocked at its interface"):
        torch_op(kernel)


@pytest.fixture(scope="module")
def pointwise_conv():
    """A 1x1 convolution, whose rows and columns merge into one axis inside the kernel."""
    task = get_task("C2D", 1, 8, 6, 5, 4, 1, 1, 0)
    space = generate(analyze(task), "llvm")
    return task, build(task, space.schedule(space.random_point(2)))


def test_merged_axes_keep_the_callers_shapes_at_the_interface(pointwise_conv):
    task, kernel = pointwise_conv
    assert kernel.signature == "I: float32[1, 8, 6, 5], W: float32[4, 8, 1, 1], O: float32[1, 4, 6, 5]"
    inputs = task.random_inputs(1)
    expected = task.evaluate(*inputs)[0]
    (out,) = kernel.run(*inputs)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    written = torch.zeros(1, 4, 6, 5)
    kernel(*(torch.from_numpy(a) for a in inputs), written)   # in place, through a reshaped view
    np.testing.assert_allclose(written.numpy(), expected, rtol=1e-4, atol=1e-4)
    (emulated,) = kernel.emulate(*inputs)
    np.testing.assert_allclose(emulated, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arrays, message", [
    (lambda i, w, o: (i.reshape(1, 8, 30), w, o), r"argument 'I' has shape \(1, 8, 30\), expected \(1, 8, 6, 5\)"),
    (lambda i, w, o: (i, w, np.zeros((1, 4, 5, 6), np.float32).transpose(0, 1, 3, 2)),
     "argument 'O' is not C-contiguous"),
])
def test_a_merged_argument_of_the_wrong_shape_or_strides_is_refused_by_name(pointwise_conv, arrays, message):
    task, kernel = pointwise_conv
    i, w = task.random_inputs(1)
    with pytest.raises(ValueError, match=message):
        kernel(*arrays(i, w, np.zeros((1, 4, 6, 5), np.float32)))


def test_a_stride_two_convolutions_input_vectors_are_plain_loads_once_stored_in_phases():
    """Eight output pixels of a stride-2 convolution read sixteen input elements, every other one:
    with the padded input stored in two phases (the space's Deinterleave) the vector is one load, where
    it was a wide load and shuffles; the kernel matches the reference either way."""
    from flexsched.schedule import Deinterleave, Schedule
    target = get_target("llvm -mattr=-avx512f")   # 8 lanes, on an AVX2 or AVX-512 host
    task = get_task("C2D", 1, 16, 16, 16, 16, 3, 2, 1)
    space = generate(analyze(task), target)
    config = space.config(space.random_point(0)).to_dict()
    config.update({"O.split.k": (2, 1, 2, 4), "O.split.h": (4, 1, 1, 2), "O.split.w": (1, 1, 1, 8),
                   "O.split.rh": (1, 1, 3), "O.split.rw": (1, 1, 3), "O.accumulate": "registers", "O.vector": "w",
                   "O.pack.pad": "none", "O.pack.W": "none", "pad.attach": "root"})
    schedule = space.schedule(Config.from_dict(config))
    assert Deinterleave("pad", 3, 2) in schedule.steps
    inputs = task.random_inputs(0)
    shuffles = {}
    for phased, steps in ((True, schedule.steps), (False, [s for s in schedule.steps if not isinstance(s, Deinterleave)])):
        kernel = build(task, Schedule(tuple(steps)), target)
        np.testing.assert_allclose(kernel.run(*inputs)[0], task.evaluate(*inputs)[0], rtol=1e-4, atol=1e-4)
        blocks = re.split(r"\n(?=\.LBB)", kernel.compiled.asm())
        loop = max(blocks, key=lambda block: block.count("vfmadd"))
        assert loop.count("vfmadd") >= 8 * 3
        shuffles[phased] = re.findall(r"\b(?:vshuf|vperm|vunpck|vblend|vinsert|vextract|vgather|vpgather)\w*", loop)
    assert shuffles[True] == [] and shuffles[False]
