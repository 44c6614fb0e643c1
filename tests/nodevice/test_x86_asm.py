"""Reading x86-64 assembly for the CPU model: loops and their trip counts, instruction classes and
the dependence chains a loop body carries (hand-written assembly, as LLVM lays it out)."""

import pytest

from codegen import x86_asm
from codegen.cpu_model import (FMA_LATENCY, MASKED_STORE_FORWARD_CYCLES, STORE_FORWARD_LATENCY, Core, chained_cycles,
                               dependence_chains)
from codegen.x86_instructions import classify
from flexsched.target import get_target


def only_loop(text):
    (function,) = x86_asm.parse(text).values()
    (loop,) = function.loops
    return function, loop


def test_a_counter_compared_with_a_constant():
    _, loop = only_loop("""
f:
\txorl\t%ecx, %ecx
.LBB0_1:
\tvfmadd231ps\t(%rdi,%rcx,4), %zmm1, %zmm0
\tincq\t%rcx
\tcmpq\t$32, %rcx
\tjne\t.LBB0_1
\tretq
""")
    assert loop.trips == 32


def test_a_counter_that_counts_up_to_zero_by_a_stride():
    _, loop = only_loop("""
f:
\tmovq\t$-4096, %r13
.LBB0_8:
\tvbroadcastss\t-20492(%rsi,%r13), %zmm21
\taddq\t$16, %r13
\tjne\t.LBB0_8
\tretq
""")
    assert loop.trips == 256


def test_a_latch_above_its_header_with_the_counter_spilled_to_the_stack():
    _, loop = only_loop("""
g:
\tmovq\t$0, -80(%rsp)
\tjmp\t.LBB1_3
.LBB1_2:
\tmovq\t-80(%rsp), %rdx
\tincq\t%rdx
\tmovq\t%rdx, -80(%rsp)
\tcmpq\t$4, %rdx
\tje\t.LBB1_4
.LBB1_3:
\tvaddps\t%zmm1, %zmm0, %zmm0
\tjmp\t.LBB1_2
.LBB1_4:
\tretq
""")
    assert loop.trips == 4 and len(loop.blocks) == 2


def test_a_two_trip_loop_on_a_flag():
    _, loop = only_loop("""
h:
\tmovb\t$1, %al
.LBB2_1:
\tvaddps\t%zmm1, %zmm0, %zmm0
\ttestb\t$1, %al
\tmovl\t$0, %eax
\tjne\t.LBB2_1
\tretq
""")
    assert loop.trips == 2


def test_bounds_in_registers_leave_the_count_unknown_and_loops_nest():
    function, outer = only_loop("""
seg_0:
\tcmpq\t%rsi, %rdi
\tjge\t.LBB0_4
.LBB0_1:
\txorl\t%eax, %eax
.LBB0_2:
\tvaddps\t%zmm1, %zmm0, %zmm0
\taddq\t$2, %rax
\tcmpq\t$32, %rax
\tjb\t.LBB0_2
\tincq\t%rdi
\tcmpq\t%rsi, %rdi
\tjne\t.LBB0_1
.LBB0_4:
\tmovabsq\t$free, %rax
\tjmpq\t*%rax
""")
    assert outer.trips is None          # a parallel loop's chunk: its bounds are the arguments
    (inner,) = outer.children
    assert inner.trips == 16
    assert function.calls == ((len(function.instructions) - 1, "free"),)


@pytest.mark.parametrize("line, kind, lanes, loads, stores, loaded", [
    ("vfmadd231ps %zmm1, %zmm2, %zmm3", "fma", 16, 0, 0, 0),
    ("vfmadd231ps (%rax){1to16}, %zmm2, %zmm3", "fma", 16, 1, 0, 4),
    ("vfmadd213ps %ymm1, %ymm2, %ymm3", "fma", 8, 0, 0, 0),
    ("vfmadd231ss %xmm1, %xmm2, %xmm3", "fma", 1, 0, 0, 0),
    ("vmovups 64(%rax), %zmm0 {%k1} {z}", "load_only", 0, 1, 0, 64),
    ("vmovups %zmm0, (%rax) {%k1}", "store_only", 0, 0, 1, 0),
    ("vbroadcastss (%rax,%rcx,4), %zmm0", "load_only", 0, 1, 0, 4),
    ("vbroadcastss %xmm0, %zmm1", "shuffle", 0, 0, 0, 0),
    ("vinsertps $16, 4(%rax), %xmm2, %xmm2", "shuffle", 0, 1, 0, 4),
    ("vgatherdps (%rax,%zmm1,4), %zmm0 {%k1}", "gather", 0, 16, 0, 64),
    ("vpermt2ps %zmm1, %zmm2, %zmm3", "shuffle", 0, 0, 0, 0),
    ("vaddps %zmm1, %zmm2, %zmm3", "fp", 0, 0, 0, 0),
    ("vpaddq %zmm1, %zmm2, %zmm3", "vector", 0, 0, 0, 0),
    ("addq $4, 24(%rsp)", "other", 0, 1, 1, 8),
])
def test_instruction_classes(line, kind, lanes, loads, stores, loaded):
    mnemonic, _, operands = line.partition(" ")
    cost = classify(x86_asm.Instruction(mnemonic, x86_asm._split_operands(operands)))
    assert (cost.kind, cost.lanes, cost.loads, cost.stores, cost.bytes_loaded) == (kind, lanes, loads, stores, loaded)


def body(*lines):
    return [x86_asm.Instruction(m, x86_asm._split_operands(o)) for m, _, o in (line.partition(" ") for line in lines)]


def test_an_accumulator_carries_its_fmas_into_the_next_pass():
    one = body(*["vfmadd231ps (%rax){1to16}, %zmm1, %zmm0"] * 4)
    four = body(*[f"vfmadd231ps (%rax){{1to16}}, %zmm1, %zmm{r}" for r in range(4)])
    assert dependence_chains(one) == (4 * FMA_LATENCY, 0)
    assert dependence_chains(four) == (FMA_LATENCY, 0)
    assert dependence_chains(one, fma_latency=5) == (20, 0)   # a core whose FMA takes 5 cycles


@pytest.mark.parametrize("cpu, latency", [("znver2", 5), ("haswell", 5), ("znver3", 4), ("skylake", 4),
                                          ("znver4", 4)])
def test_a_targets_fma_latency_is_its_cpus(cpu, latency):
    assert Core.of(get_target(f"llvm -mcpu={cpu}")).fma_latency == latency


def test_an_accumulator_passed_between_registers_is_still_one_chain():
    rotating = body("vmovups (%rdx), %zmm1", "vfmadd132ps (%r13){1to16}, %zmm0, %zmm1",
                    "vmovups 64(%rdx), %zmm0", "vfmadd132ps 4(%r13){1to16}, %zmm1, %zmm0")
    assert dependence_chains(rotating)[0] == 2 * FMA_LATENCY


def test_a_load_of_what_a_masked_store_wrote_waits():
    through_memory = body("vmovups (%rdi), %zmm1 {%k1} {z}", "vfmadd231ps %zmm2, %zmm3, %zmm1",
                          "vmovups %zmm1, (%rdi) {%k1}")
    streaming = body("vmovups (%rdi), %zmm1 {%k1} {z}", "vfmadd231ps %zmm2, %zmm3, %zmm1",
                     "vmovups %zmm1, (%rdi) {%k1}", "addq $64, %rdi")
    reread = body("vmovups %zmm1, (%rdi) {%k1}", "vmovups (%rdi), %zmm2 {%k1} {z}", "addq $64, %rdi")
    # the same address every pass: a chain through memory, and a wait for the masked store
    assert dependence_chains(through_memory) == (STORE_FORWARD_LATENCY + FMA_LATENCY, MASKED_STORE_FORWARD_CYCLES)
    assert dependence_chains(streaming) == (0, 0)   # each pass reads what no store of the last one wrote
    assert dependence_chains(reread) == (0, MASKED_STORE_FORWARD_CYCLES)   # within a pass it still waits


def test_chains_as_long_as_the_pipe_work_cost_more_than_either():
    # 8 FMA chains on two pipes with a latency of 4: both bounds say 4 cycles a pass, and such
    # loops run at about 0.89 of the pipes' rate; 16 chains run at the pipes' rate.
    assert chained_cycles(4.0, 4.0) == pytest.approx(4.0 / 0.89, rel=0.01)
    assert chained_cycles(8.0, 4.0) == pytest.approx(8.0, rel=0.01)
    assert chained_cycles(2.0, 4.0) == pytest.approx(4.0, rel=0.01)


def test_a_data_objects_label_is_not_a_function():
    """A module's global (kept scratch slots) is a column-0 label with directives and no instructions."""
    functions = x86_asm.parse("""
f:
\txorl\t%eax, %eax
\tretq
\t.local\tscratch_slots_0
\t.comm\tscratch_slots_0,128,64
scratch_slots_1:
\t.zero\t128
""")
    assert list(functions) == ["f"]
