"""The CPU roofs are measured on this host, and the best measured is kept across processes."""

import json

from codegen.roof import FMA_ITERATIONS, FmaOnEveryCore, Roof, fma_chains, fma_loop_ir, measured_cpu_roof, roof_for
from explore.side_by_side import Timed, time_side_by_side
from flexsched.cli import main
from flexsched.target import get_target


def test_the_measured_cpu_roofs_are_positive_and_finite():
    target = get_target("llvm")
    roof = measured_cpu_roof(target.cores, target.vector_lanes)
    assert 0 < roof.peak_gflops < 1e6 and 0 < roof.peak_gbps < 1e5


def test_the_kept_roof_is_the_best_ever_measured(tmp_path):
    kept = tmp_path / "roofs.json"
    first = roof_for("llvm", kept)
    data = json.loads(kept.read_text())
    (key,) = data
    data[key] = {"peak_gflops": first.peak_gflops * 10, "peak_gbps": 0.5, "source": "x"}
    kept.write_text(json.dumps(data))
    again = roof_for("llvm", kept)
    assert again.peak_gflops == first.peak_gflops * 10          # a higher kept figure wins
    assert again.peak_gbps == first.peak_gbps                     # a lower one is raised
    assert json.loads(kept.read_text())[key]["peak_gbps"] == first.peak_gbps


def test_a_corrupt_roof_file_is_measured_over(tmp_path):
    kept = tmp_path / "roofs.json"
    kept.write_text("{not json")
    assert isinstance(roof_for("llvm", kept), Roof)
    assert json.loads(kept.read_text())


def test_tune_reports_gb_per_second_and_the_binding_roof(capsys):
    assert main(["tune", "GMM", "256", "1", "256", "--trials", "3", "--json"]) == 0
    out = capsys.readouterr().out
    assert "roofline (measured):" in out and "GB/s: memory-bound" in out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["bound"] == "memory" and summary["best_gbps"] > 0
    assert summary["bytes"] == 4 * (256 + 256 + 256 * 256)


def _stack_accesses(lanes, chains):
    """Instructions of the FMA loop, compiled for the llvm target, that touch the stack (spills)."""
    import llvmlite.binding as llvm

    from codegen.cpu_backend import _target_machine, machine_of

    module = llvm.parse_assembly(fma_loop_ir(lanes, chains))
    assembly = _target_machine(machine_of(get_target("llvm"))).emit_assembly(module)
    return [line for line in assembly.splitlines() if "rsp" in line and not line.lstrip().startswith((".", "#"))]


def test_the_fma_roof_loop_keeps_every_chain_in_registers():
    target = get_target("llvm")
    chains = fma_chains(target.vector_registers)
    assert chains >= 8   # two FMA pipes of four cycles' latency need eight chains in flight
    assert _stack_accesses(target.vector_lanes, chains) == []
    # The check sees a spill: more chains than registers must go to the stack.
    assert _stack_accesses(target.vector_lanes, target.vector_registers + 2)


def test_the_fma_chains_leave_registers_for_the_loop():
    assert fma_chains(16) == 12 and fma_chains(32) == 16 and fma_chains(None) == 12


def test_the_fma_loop_on_every_core_times_beside_kernels_and_counts_its_work():
    target = get_target("llvm")
    with FmaOnEveryCore(2, target.vector_lanes, target.vector_registers) as run:
        assert run.flops == 2 * 2.0 * target.vector_lanes * fma_chains(target.vector_registers) * FMA_ITERATIONS
        rounds = time_side_by_side([Timed("FMA roof", run)], rounds=2, repeats=1)
        assert rounds.seconds("FMA roof") > 0
    # A call sized to a microsecond: a million loop passes take far longer on any CPU, so it is cut down.
    with FmaOnEveryCore(2, target.vector_lanes, target.vector_registers, seconds=1e-6) as short:
        assert 1 <= short.iterations < FMA_ITERATIONS / 100
        assert short.flops == 2 * 2.0 * target.vector_lanes * fma_chains(target.vector_registers) * short.iterations
