"""codegen.llvm_text: the IR it writes parses, verifies and computes what its builder calls say."""

import ctypes
import json
import math
import struct

import llvmlite.binding as llvm
import numpy as np
import pytest

from codegen import cpu_backend
from codegen import llvm_text as ir

I1, I32, I64, F32, F64, PTR = ir.IntType(1), ir.IntType(32), ir.IntType(64), ir.FloatType(), ir.DoubleType(), ir.PointerType()


def _parsed(module):
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    return parsed


def _constant_function(module, type_, value, name):
    """A function returning Constant(type_, value), to read the constant back through LLVM."""
    function = ir.Function(module, ir.FunctionType(type_, []), name=name)
    ir.IRBuilder(function.append_basic_block("entry")).ret(ir.Constant(type_, value))


@pytest.mark.parametrize("value", [0.1, -2.5, 1e-45, 3.4e38, 1e39, -math.inf, 0.0, -0.0])
def test_float_constants_are_the_float_they_round_to(value):
    module = ir.Module("constants")
    function = ir.Function(module, ir.FunctionType(F32, [I64]), name="f")
    ir.IRBuilder(function.append_basic_block("entry")).ret(ir.Constant(F32, value))
    got = _called(module, "f", 0, ctypes.c_float)
    expected = np.float32(value) if abs(value) < 3.5e38 else np.float32(math.copysign(math.inf, value))
    assert struct.pack("<f", got) == struct.pack("<f", expected)   # -0.0 told from 0.0


def test_integer_vector_pointer_and_zero_constants_parse():
    module = ir.Module("constants")
    _constant_function(module, I1, 1, "yes")
    _constant_function(module, I64, -7, "minus_seven")
    _constant_function(module, ir.VectorType(I32, 4), [0, 1, 2, 3], "iota")
    _constant_function(module, ir.VectorType(F32, 8), None, "zeros")
    _constant_function(module, PTR, None, "null")
    text = str(_parsed(module))
    assert "ret i1 true" in text and "ret i64 -7" in text and "<i32 0, i32 1, i32 2, i32 3>" in text
    assert "ret <8 x float> zeroinitializer" in text and "ret ptr null" in text


def test_a_pointer_constant_other_than_null_is_refused():
    with pytest.raises(ValueError, match="null"):
        ir.Constant(PTR, 8)


def test_names_given_twice_or_needing_quotes_stay_distinct_and_valid():
    module = ir.Module("names")
    function = ir.Function(module, ir.FunctionType(I64, [I64, I64]), name="f")
    function.args[0].name, function.args[1].name = "b+c.0", "x"
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    first = builder.add(function.args[0], function.args[1], name="x")
    second = builder.add(first, first, name="x")
    third = builder.mul(second, ir.Constant(I64, 3))
    builder.ret(third)
    assert len({function.args[1].ref, first.ref, second.ref, third.ref}) == 4
    assert '%"b+c.0"' in str(module)
    _parsed(module)


def test_a_counted_loop_with_a_phi_and_loop_metadata_runs():
    """sum of 0..n-1 in a loop kept rolled by its metadata, compiled and called."""
    module = ir.Module("loop")
    function = ir.Function(module, ir.FunctionType(I64, [I64]), name="triangle")
    entry = function.append_basic_block("entry")
    head, body, done = (function.append_basic_block(name) for name in ("head", "body", "done"))
    builder = ir.IRBuilder(entry)
    builder.branch(head)
    builder.position_at_end(head)
    counter = builder.phi(I64, name="i")
    total = builder.phi(I64, name="total")
    counter.add_incoming(ir.Constant(I64, 0), entry)
    total.add_incoming(ir.Constant(I64, 0), entry)
    builder.cbranch(builder.icmp_signed("<", counter, function.args[0]), body, done)
    builder.position_at_end(body)
    counter.add_incoming(builder.add(counter, ir.Constant(I64, 1), flags=("nsw",)), body)
    total.add_incoming(builder.add(total, counter), body)
    latch = builder.branch(head)
    latch.set_metadata("llvm.loop", module.loop_id(module.add_metadata(["llvm.loop.unroll.disable"])))
    builder.position_at_end(done)
    builder.ret(total)
    text = str(module)
    assert "!llvm.loop !1" in text and '!0 = !{!"llvm.loop.unroll.disable"}' in text
    assert _called(module, "triangle", 10) == 45


def test_vectors_selects_conversions_and_ifs_compute_what_they_say():
    """max(x, 0) lane by lane, as a sum of the lanes, cast and tested under if/else."""
    module = ir.Module("vectors")
    function = ir.Function(module, ir.FunctionType(I64, [I64]), name="f")
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    v4 = ir.VectorType(F32, 4)
    vector = ir.Constant(v4, [-1.5, 2.0, -3.0, 4.0])
    positive = builder.fcmp_ordered(">", vector, ir.Constant(v4, None))
    clipped = builder.select(positive, vector, ir.Constant(v4, None))
    picked = builder.shuffle_vector(clipped, ir.Constant(v4, None), ir.Constant(ir.VectorType(I32, 2), [1, 3]))
    total = builder.fadd(builder.extract_element(picked, ir.Constant(I32, 0)),
                         builder.extract_element(picked, ir.Constant(I32, 1)), flags=("contract",))
    as_int = builder.sext(builder.fptosi(total, I32), I64)
    slot = builder.alloca(ir.ArrayType(I64, 2), name="slot")
    slot.align = 64
    with builder.if_else(builder.icmp_signed("==", function.args[0], ir.Constant(I64, 0))) as (then, otherwise):
        with then:
            builder.store(as_int, slot, align=8)
        with otherwise:
            builder.store(builder.not_(as_int), slot, align=8)
    builder.ret(builder.load(slot, align=8, typ=I64))
    assert "align 64" in str(module)
    assert _called(module, "f", 0) == 6 and _called(module, "f", 1) == ~6


def test_declared_functions_and_inline_asm_are_called():
    module = ir.Module("calls")
    labs = ir.Function(module, ir.FunctionType(I64, [I64]), name="llabs")
    function = ir.Function(module, ir.FunctionType(I64, [I64]), name="f")
    function.attributes.add("nounwind")
    function.args[0].add_attribute("noundef")
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    builder.asm(ir.FunctionType(ir.VoidType(), []), "", "~{memory}", [], side_effect=True)
    builder.ret(builder.call(labs, [function.args[0]]))
    text = str(module)
    assert 'declare i64 @"llabs"(i64)' in text and 'asm sideeffect ""' in text
    assert _called(module, "f", -12) == 12


def _called(module, name, argument, returns=ctypes.c_int64):
    """The module's function `name`, compiled for this host and called on one i64."""
    engine = llvm.create_mcjit_compiler(_parsed(module), cpu_backend._target_machine())
    engine.finalize_object()
    return ctypes.CFUNCTYPE(returns, ctypes.c_int64)(engine.get_function_address(name))(argument)


def test_a_kernel_emits_the_same_ir_every_time():
    """The emitter caches values by id(): a value freed part way through a module would hand its id
    to the next one made, and a cache would then return the wrong value. A YOLO C8 schedule (memory
    accumulation, a blocked padded input, heap scratch) emitted different IR in half of its builds,
    some of it wrong, until the function held every value it defined."""
    from codegen.kernel import lower_for
    from flexsched.registry import get_task
    from flexsched.schedule import Schedule

    task = get_task("C2D", 1, 256, 28, 28, 512, 3, 1, 1, 1)
    schedule = Schedule.from_json(json.dumps(C8_SCHEDULE))
    _, lowered = lower_for(task, schedule, "llvm")
    machine = cpu_backend.cpus.host()
    texts = {cpu_backend._module_text(lowered.func, 3, False, machine)[0] for _ in range(6)}
    assert len(texts) == 1


C8_SCHEDULE = [
    {"kind": "split", "node": "pad", "loop": "c", "factors": [64, 4]},
    {"kind": "split", "node": "pad", "loop": "h", "factors": [30, 1]},
    {"kind": "split", "node": "pad", "loop": "w", "factors": [4, 8]},
    {"kind": "reorder", "node": "pad", "order": ["b", "c.0", "h.0", "w.0", "c.1", "h.1", "w.1"]},
    {"kind": "fuse", "node": "pad", "loops": ["b", "c.0"]},
    {"kind": "parallel", "node": "pad", "loop": "b+c.0"},
    {"kind": "vectorize", "node": "pad", "loop": "w.1"},
    {"kind": "cache_read", "tensor": "W", "scope": "local", "readers": ["O"]},
    {"kind": "split", "node": "O", "loop": "k", "factors": [32, 2, 8, 1]},
    {"kind": "split", "node": "O", "loop": "h", "factors": [1, 7, 2, 2]},
    {"kind": "split", "node": "O", "loop": "w", "factors": [1, 2, 2, 8]},
    {"kind": "split", "node": "O", "loop": "rc", "factors": [8, 16, 2]},
    {"kind": "split", "node": "O", "loop": "rh", "factors": [3, 1, 1]},
    {"kind": "split", "node": "O", "loop": "rw", "factors": [3, 1, 1]},
    {"kind": "reorder", "node": "O", "order": ["b", "k.0", "h.0", "w.0", "k.1", "h.1", "w.1", "rc.0", "rh.0", "rw.0",
                                              "rc.1", "rh.1", "rw.1", "k.2", "h.2", "w.2", "rc.2", "rh.2", "rw.2",
                                              "k.3", "h.3", "w.3"]},
    {"kind": "fuse", "node": "O", "loops": ["b", "k.0"]},
    {"kind": "parallel", "node": "O", "loop": "b+k.0"},
    {"kind": "vectorize", "node": "O", "loop": "w.3"},
    *({"kind": "unroll", "node": "O", "loop": loop} for loop in ("h.3", "k.3", "rw.2", "rh.2", "rc.2", "w.2", "h.2")),
    {"kind": "compute_at", "node": "W.local", "consumer": "O", "loop": "b+k.0"},
]
