"""HLS C++ of searched designs, compiled with g++ and run as a C simulation, against the
reference evaluator: every library operator at a tiny shape, plus one defined here."""

import shutil
import subprocess

import numpy as np
import pytest

import flexsched as fs
from analysis import analyze
from codegen.hls import emit_hls
from explore.optimize import optimize
from flexsched import registry
from flexsched.registry import get_task, register_task
from space import generate

pytestmark = [pytest.mark.fpga,
              pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ for the C simulation")]

TINY = {
    "GMV": (8, 6), "GMM": (6, 5, 7), "BIL": (3, 4, 5, 3),
    "C1D": (1, 3, 10, 4, 3, 1, 1), "T1D": (1, 4, 8, 4, 3, 2, 1),
    "C2D": (1, 3, 7, 7, 4, 3, 1, 1), "T2D": (1, 3, 4, 4, 2, 3, 2, 1),
    "C3D": (1, 2, 4, 4, 4, 3, 3, 1, 1), "T3D": (1, 2, 3, 3, 3, 2, 3, 2, 1),
    "GRP": (1, 4, 5, 5, 4, 3, 1, 1, 2), "DEP": (1, 4, 5, 5, 2, 3, 1, 1),
    "DIL": (1, 3, 7, 7, 4, 3, 1, 2, 2), "BCM": (8, 8, 4), "SHO": (1, 4, 4, 9, 3),
}


def row_norm(N, M):
    """Rows scaled by their largest magnitude: two accelerators, a max reduction and a divide."""
    A = fs.placeholder((N, M), name="A")
    k = fs.reduce_axis(M, "k")
    S = fs.compute((N,), lambda i: fs.max(fs.abs(A[i, k]), axis=k), name="S")
    O = fs.compute((N, M), lambda i, j: A[i, j] / (S[i] + 1.0), name="O")
    return A, O


CASES = [(op, args) for op, args in TINY.items()] + [("FPGA_ROWNORM", (5, 6))]


def _designs():
    """(name, task, sources): a searched design per case, and one random design of GMM."""
    register_task("FPGA_ROWNORM")(row_norm)
    try:
        return _emit_all()
    finally:  # other tests list the registry: the user operator must not stay in it
        registry._REGISTRY.pop("FPGA_ROWNORM", None)


def _emit_all():
    result = []
    for op, args in CASES:
        task = get_task(op, *args)
        design = optimize(task, "fpga", trials=150, method="q", seed=1)
        result.append((op.lower(), task, emit_hls(task, design.schedule, name=op.lower())))
    task = get_task("GMM", 9, 7, 5)
    space = generate(analyze(task), "fpga")
    result.append(("gmm_random", task, emit_hls(task, space.schedule(space.random_point(3)), name="gmm_random")))
    return result


@pytest.fixture(scope="module")
def simulation(tmp_path_factory):
    """All designs in one C++ program (one g++ run for the lot), run once per design."""
    root = tmp_path_factory.mktemp("hls")
    designs = _designs()
    includes = []
    for name, task, sources in designs:
        sources.write(root)
        includes += [f'#include "{name}.cpp"', f'#include "{name}_tb.cpp"']
        data = root / name
        data.mkdir()
        for (tensor, _, dtype), array in zip(sources.inputs, task.random_inputs(seed=0)):
            array.astype(dtype).tofile(data / f"{tensor}.bin")
    dispatch = "\n".join(f'  if (name == "{name}") return {name}_run(argv[2]);' for name, _, _ in designs)
    (root / "all.cpp").write_text("#define FLEXSCHED_NO_MAIN\n#include <string>\n" + "\n".join(includes)
                                  + f"\nint main(int argc, char **argv) {{\n  std::string name = argv[1];\n"
                                  f"{dispatch}\n  return 3;\n}}\n")
    build = subprocess.run(["g++", "-O1", "-std=c++17", "-o", str(root / "csim"), str(root / "all.cpp")],
                           capture_output=True, text=True, cwd=root)
    assert build.returncode == 0, build.stderr[-3000:]
    return root, {name: (task, sources) for name, task, sources in designs}


@pytest.mark.parametrize("name", [op.lower() for op, _ in CASES] + ["gmm_random"])
def test_c_simulation_matches_the_reference(simulation, name):
    root, designs = simulation
    task, sources = designs[name]
    run = subprocess.run([str(root / "csim"), name, str(root / name)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    expected = task.evaluate(*task.random_inputs(seed=0))
    for (tensor, shape, dtype), reference in zip(sources.outputs, expected):
        got = np.fromfile(root / name / f"{tensor}.out", dtype=dtype).reshape(shape)
        np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-5, err_msg=f"{name}: output {tensor}")


def test_kernel_carries_the_design_pragmas(simulation):
    _, designs = simulation
    kernel = designs["c2d"][1].kernel
    for pragma in ("#pragma HLS interface m_axi", "#pragma HLS pipeline II=", "#pragma HLS dataflow",
                   "static float"):
        assert pragma in kernel, pragma
    assert "#pragma HLS unroll" in kernel or "#pragma HLS unroll" in designs["gmm"][1].kernel
    assert any("array_partition" in sources.kernel for _, sources in designs.values())
