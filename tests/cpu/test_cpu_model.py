"""The static CPU model (codegen.cpu_model) on kernels compiled to x86 assembly: nothing runs."""

import io
import json
import platform

import numpy as np
import pytest

import flexsched
from codegen import cpu_model
from codegen.cpu_model import estimate
from codegen.evaluators import CpuModelEvaluator
from codegen.vectorize import padded_lanes
from explore.optimize import space_for
from explore.records import load_records
from flexsched import cpus
from flexsched.cli import main
from flexsched.registry import get_task
from flexsched.schedule import Schedule
from flexsched.target import get_target

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="the CPU model reads x86-64 assembly")


def tiled(size, lanes, parallel=False):
    """GMM: a 4 x lanes register tile (i unrolled, j one vector), the reduction outside it."""
    steps = [{"kind": "split", "node": "O", "loop": "i", "factors": [size // 4, 4]},
             {"kind": "split", "node": "O", "loop": "j", "factors": [size // lanes, lanes]},
             {"kind": "reorder", "node": "O", "order": ["i.0", "j.0", "rk", "i.1", "j.1"]},
             {"kind": "unroll", "node": "O", "loop": "i.1"},
             {"kind": "vectorize", "node": "O", "loop": "j.1"}]
    if parallel:
        steps.append({"kind": "parallel", "node": "O", "loop": "i.0"})
    return Schedule.from_json(json.dumps(steps))


@pytest.mark.parametrize("name", ["llvm", "llvm -mattr=-avx512f"])
def test_fmas_are_counted_at_the_targets_vector_width(name):
    target = get_target(name).with_(cores=1)
    lanes = target.vector_lanes
    predicted = estimate(get_task("GMM", 64, 64, 64), tiled(64, lanes), target)
    (segment,) = predicted.segments
    # every multiply-add of the 64^3 product is one lane of one FMA, `lanes` lanes to an FMA
    assert segment.instructions["fma"] == 64 ** 3 // lanes
    assert segment.fma_lanes == 64 ** 3
    assert segment.unresolved_loops == 0 and predicted.to_dict()["unresolved_loops"] == 0
    # A, B and O (48 KiB) stay in L2 from one call to the next, and in L1 too where the core's holds 48 KiB
    assert segment.bytes["l2"] == 0
    assert (segment.bytes["l1"] > 0) == (3 * 64 * 64 * 4 > cpus.caches(target.cpu).l1)


def test_a_parallel_loop_shares_its_iterations_among_the_cores():
    target = get_target("llvm").with_(cores=2)
    lanes = target.vector_lanes
    (segment,) = estimate(get_task("GMM", 64, 64, 64), tiled(64, lanes, parallel=True), target).segments
    assert segment.parallel_extent == 16
    assert segment.calls == 4                                   # 8 chunks of 2 iterations, 4 a core
    assert segment.instructions["fma"] == 64 ** 3 // lanes // 2   # the busiest core does half


def test_the_loop_ir_says_the_multiply_adds_the_busiest_core_does():
    target = get_target("llvm").with_(cores=2)
    lanes = target.vector_lanes
    (serial,) = estimate(get_task("GMM", 64, 64, 64), tiled(64, lanes), target.with_(cores=1)).segments
    (parallel,) = estimate(get_task("GMM", 64, 64, 64), tiled(64, lanes, parallel=True), target).segments
    assert serial.multiply_adds == serial.fma_lanes == 64 ** 3
    assert parallel.multiply_adds == parallel.fma_lanes == 64 ** 3 // 2


@pytest.mark.parametrize("name", ["llvm", "llvm -mattr=-avx512f"])
@pytest.mark.parametrize("columns_of, taken_of", [
    (lambda lanes: 2 * lanes - 2, lambda lanes: 2 * lanes),
    (lambda lanes: lanes // 2, lambda lanes: lanes // 2),
    (lambda lanes: 3, lambda lanes: 4),
], ids=["two-lanes-short-of-two-vectors", "half-a-vector", "three-columns"])
def test_a_vectorised_loop_is_priced_in_the_lanes_its_vectors_take(name, columns_of, taken_of):
    """An FMA takes its pipe for every lane, masked or not: two lanes short of two vectors take two
    whole ones, half a vector a register half as wide, 3 columns one of 4 lanes. The multiply-adds the
    model prices are those lanes, as the FMAs in the assembly are."""
    target = get_target(name).with_(cores=1)
    lanes = target.vector_lanes
    columns, taken = columns_of(lanes), taken_of(lanes)
    steps = [{"kind": "split", "node": "O", "loop": "i", "factors": [16, 4]},
             {"kind": "reorder", "node": "O", "order": ["i.0", "rk", "i.1", "j"]},
             {"kind": "unroll", "node": "O", "loop": "i.1"},
             {"kind": "vectorize", "node": "O", "loop": "j"}]
    (segment,) = estimate(get_task("GMM", 64, 64, columns), Schedule.from_json(json.dumps(steps)), target).segments
    assert segment.multiply_adds == 64 * 64 * taken == padded_lanes(columns, lanes) * 64 * 64
    assert segment.fma_lanes == segment.multiply_adds


def test_fma_loops_whose_trip_counts_miscount_the_work_are_priced_for_the_work():
    """Where the assembly's loops line up wrongly with the IR's, the FMA bodies' cycles are scaled to
    the loop IR's multiply-adds: twice the FMAs counted, half their cycles kept; the rest as counted."""
    tally = cpu_model._Tally()
    tally.fma_lanes, tally.fma_cycles, tally.total_cycles = 2000.0, 100.0, 130.0
    assert cpu_model._recounted_fma_cycles(tally, 1000.0) == -50.0
    assert cpu_model._recounted_fma_cycles(tally, 2000.0) == 0.0
    assert cpu_model._recounted_fma_cycles(tally, 0.0) == 0.0     # no multiply-add in the IR: as counted
    tally.fma_lanes = 0.0
    assert cpu_model._recounted_fma_cycles(tally, 1000.0) == 0.0  # no FMA in the assembly: as counted


def test_a_tiled_vector_schedule_is_predicted_faster_than_the_naive_nest():
    target = get_target("llvm")
    task = get_task("GMM", 256, 256, 256)
    naive = estimate(task, None, target)
    fast = estimate(task, tiled(256, target.vector_lanes, parallel=True), target)
    assert fast.seconds * 4 < naive.seconds
    assert naive.to_dict()["segments"][0]["instructions"].get("fma", 0) > fast.segments[0].instructions["fma"]


def test_a_schedule_that_does_not_lower_is_a_failed_evaluation():
    bad = json.dumps([{"kind": "split", "node": "O", "loop": "nowhere", "factors": [2, 2]}])
    with CpuModelEvaluator("llvm") as evaluator:
        failed = evaluator.estimate(get_task("GMM", 16, 16, 16), bad)
        ok = evaluator.estimate(get_task("GMM", 16, 16, 16), Schedule())
    assert failed.status == "build_error" and "nowhere" in failed.error
    assert ok.ok and ok.seconds > 0 and ok.details["segments"]


def test_workers_price_side_by_side_in_the_callers_order():
    task = get_task("GMM", 32, 32, 32)
    space = space_for(task, get_target("llvm"))
    rng = np.random.default_rng(4)
    points = [space.random_point(rng) for _ in range(5)]
    with CpuModelEvaluator("llvm") as one, CpuModelEvaluator("llvm", workers=2) as two:
        assert one.batch_size == 1 and two.batch_size == 4
        alone, side_by_side = one.evaluate(task, space, points), two.evaluate(task, space, points)
    assert [e.status for e in alone] == [e.status for e in side_by_side]
    assert [e.seconds for e in alone] == pytest.approx([e.seconds for e in side_by_side])


def test_tune_starts_from_the_models_best_of_a_pool():
    out = io.StringIO()
    assert main(["-q", "tune", "GMM", "32", "32", "32", "--trials", "5", "--start-pool", "12", "--json"], out=out) == 0
    assert "first starts: the static model's best of 12 random points" in out.getvalue()
    assert json.loads(out.getvalue().splitlines()[-1])["trials"] == 5   # priced points are not trials


def test_optimize_with_the_model_records_modelled_points(tmp_path):
    log = tmp_path / "gmm.jsonl"
    result = flexsched.optimize(("GMM", 64, 64, 64), evaluator="model", trials=3, log=str(log), build_kernel=False)
    assert result.judged_by == "modelled"
    assert result.history.num_ok == 3
    records = load_records(log)
    assert len(records) == 3 and all(record.judged_by == "modelled" for record in records)


def test_the_cli_tunes_with_the_model_and_says_so():
    out = io.StringIO()
    assert main(["-q", "tune", "GMM", "64", "64", "64", "--target", "llvm", "--evaluator", "model", "--trials", "2",
                 "--json"], out=out) == 0
    text = out.getvalue()
    assert "predicted by the static CPU model" in text
    assert "roofline (predicted)" in text
    assert "predicted:" in text and "seg_0:" in text
    assert json.loads(text.splitlines()[-1])["predicted"] is True


@pytest.mark.parametrize("name", ["llvm", "llvm -mattr=-avx512f"])
def test_a_versioned_tiles_guarded_copy_counts_only_where_it_runs(name):
    """6-row tiles over 256 rows as 2 x 22 x 6 (264): the copy without bounds tests runs at 42 tiles
    of 44, the guarded one at 2; counted as running every time, the guarded copy made the model
    see 1.7 times the multiply-adds."""
    steps = [{"kind": "cache_write", "node": "O", "scope": "local"},
             {"kind": "split", "node": "O", "loop": "i", "factors": [2, 1, 22, 6]},
             {"kind": "split", "node": "O", "loop": "j", "factors": [4, 1, 4, 16]},
             {"kind": "split", "node": "O.local", "loop": "rk", "factors": [64, 4, 1]},
             {"kind": "reorder", "node": "O", "order": ["i.0", "j.0", "i.1", "j.1", "i.2", "j.2", "i.3", "j.3"]},
             {"kind": "vectorize", "node": "O", "loop": "j.3"}, {"kind": "unroll", "node": "O", "loop": "i.3"},
             {"kind": "reorder", "node": "O.local", "order": ["rk.0", "rk.1", "rk.2", "i", "j"]},
             {"kind": "compute_at", "node": "O.local", "consumer": "O", "loop": "j.2"},
             {"kind": "vectorize", "node": "O.local", "loop": "j"}, {"kind": "unroll", "node": "O.local", "loop": "i"},
             {"kind": "unroll", "node": "O.local", "loop": "rk.1"}]
    target = get_target(name).with_(cores=1)
    (segment,) = estimate(get_task("GMM", 256, 256, 256), Schedule.from_json(json.dumps(steps)), target).segments
    assert segment.unresolved_loops == 0
    assert segment.fma_lanes == pytest.approx(256 ** 3, rel=0.05)


def test_kept_heap_scratch_is_priced_as_one_allocation_each_way():
    """A chunk's heap scratch comes from the module's take_scratch and goes back through give_scratch
    (which LLVM may clone under a longer name): each call is priced as one allocation, not walked."""
    from codegen import cpu_backend, x86_asm
    from codegen.ir import Allocate, Buffer, For, PrimFunc, Store, loop_var, seq
    from codegen.kept_scratch import GIVE_SCRATCH, TAKE_SCRATCH
    from flexsched.expr import Load

    A, O, T = Buffer("A", (4, 5000), "float32", "global"), Buffer("O", (4, 5000), "float32", "global"), \
        Buffer("T", (5000,), "float32", "local")
    i, j = loop_var("i", 4), loop_var("j", 5000)
    fill = For(j, 5000, "serial", Store(T, (j,), Load(A, (i, j), "float32") * 2.0))
    use = For(j, 5000, "serial", Store(O, (i, j), Load(T, (4999 - j,), "float32")))
    func = PrimFunc("scratch_priced", (A, O), For(i, 4, "parallel", Allocate(T, seq(fill, use))))
    code = cpu_backend.assembly(func, target=get_target("llvm"))
    functions = x86_asm.parse(code.text)
    callees = {callee for function in functions.values() for _, callee in function.calls}
    helpers = sorted(callee for callee in callees if callee.startswith((TAKE_SCRATCH, GIVE_SCRATCH)))
    assert len(helpers) == 2, callees
    for helper in helpers:
        assert cpu_model._call_cycles(helper, None, 0, functions, {}, None, {}, 1.0) == cpu_model.ALLOCATION_CYCLES
    assert cpu_model.estimate_assembly(code, cpu_model.Core.of(get_target("llvm"))).seconds > 0
