"""LLVM IR emission for the CPU back end: loop IR -> an LLVM module (as text, codegen.llvm_text);
codegen.cpu_backend compiles it for this host.

Each top-level statement of a kernel is a segment, compiled to
`void seg_k(i64 begin, i64 end, ptr buffers)`, where buffers holds one pointer per
PrimFunc parameter. A segment whose outermost loop is parallel runs iterations
[begin, end) of that loop, and the host spreads contiguous chunks over a thread pool;
any other segment runs once with (0, 1). seg_k forwards the pointers to an internal
function that takes them as noalias parameters, which is what lets LLVM vectorise and
reorder freely; the compiled function refuses arguments whose memory overlaps a written one.

Vectorized loops become one body over <lanes x type> values when every lane provably
touches its own elements (codegen.vectorize); otherwise they run lane by lane (the builder's
fallbacks say which and why).
A vector whose lanes do not fill whole registers (14 lanes on an 8-lane machine) is padded
to whole registers: LLVM splits an odd width into pieces and shuffles between them. The extra
lanes compute but never touch memory: their loads and stores are masked, or land in the
padding that local buffers carry at the end of each row.
"""

from __future__ import annotations

import contextlib
import functools
import numbers

import numpy as np

from codegen import llvm_text as ir
from codegen.ir import Allocate, Barrier, CodegenError, For, IfThenElse, LOOP_KINDS, Seq, Store, walk_stmts
from codegen.kept_scratch import KeptScratch
from codegen.register_pressure import shared_load_registers
from codegen.vectorize import (MAX_VECTOR_LANES, access_indices, check_indices, flat_stride, mentions, padded_lanes,
                               row_pitch, stored_value, vectorize_blocker)
from flexsched import affine, dtypes
from flexsched.expr import Binary, Call, Cast, Compare, Const, Intrinsic, IterVar, Load, Logical, Select, walk

CPU_LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled")
GPU_LOOP_KINDS = tuple(kind for kind in LOOP_KINDS if kind not in CPU_LOOP_KINDS)
MAX_FENCED_STEPS = 9          # a 3 x 3 filter's taps; longer loops LLVM keeps rolled or unrolls in part
MAX_STACK_BYTES = 16 * 1024     # larger scratch buffers come from the heap, kept from call to call
# Scratch buffers start on a cache line, so with rows pitched to whole vectors no vector access
# of a local tile or packed panel straddles two lines (one 64-byte line holds an AVX-512 vector).
SCRATCH_ALIGN = 64

_I1, _I32, _I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
_PTR = ir.PointerType()
_SCALAR_TYPES = {"float32": ir.FloatType(), "float64": ir.DoubleType(),
                 "int32": _I32, "int64": _I64, "bool": _I1}
_DTYPE_OF_TYPE = {"float": "float32", "double": "float64", "i32": "int32", "i64": "int64", "i1": "bool"}
_ITEM_SIZES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}
_BITS = {"float32": 32, "float64": 64, "int32": 32, "int64": 64, "bool": 1}
# Strides up to this load their whole span (stride times the vector) and shuffle; wider ones
# load lane by lane, since most of the span would be wasted.
_MAX_SHUFFLED_STRIDE = 4
_FLOAT_MATH = ("exp", "log", "sqrt")
_CONTRACT = ("contract",)   # lets a multiply feeding an add fuse to an FMA, and nothing more
_INDEX_TYPES = ("int32", "int64")
_NO_WRAP = ("nsw",)        # a loop counter stays below its end: it never wraps


def _within_single_loops(stmt):
    """(the statement inside any one-iteration loops around it, their variables): a copy made by the
    schedule keeps such loops (a 1 x 1 weight's r and s), where a transposed copy's two loops must meet."""
    single = []
    while isinstance(stmt, For) and stmt.extent == 1 and stmt.kind in ("serial", "unrolled"):
        single.append(stmt.var)
        stmt = stmt.body
    return stmt, single


def emitted_once(begin, end):
    """Whether a counted loop from begin to end is emitted as its body with the counter at begin: splits
    by 1 make many one-iteration loops (and a copy of one whole transposed tile another), and kept as
    loops each costs every LLVM loop pass its time until folded."""
    return isinstance(begin, ir.Constant) and isinstance(end, ir.Constant) and end.constant - begin.constant == 1


def _serial_nest(loop):
    """(the perfect nest of serial loops from `loop` down, the statement inside it, the variables of
    the one-iteration loops met on the way): a 3 x 3 weight's copy runs c, r and s around its
    vectorised loop, one run of memory that a transposed copy may take as a single loop."""
    nest, single = [loop], []
    stmt, skipped = _within_single_loops(loop.body)
    single += skipped
    while loop.kind == "serial" and isinstance(stmt, For) and stmt.kind == "serial":
        nest.append(stmt)
        stmt, skipped = _within_single_loops(stmt.body)
        single += skipped
    return nest, stmt, single


def _transposed(builder, rows):
    """The columns of N vectors of N lanes (N a power of two): log2(N) rounds of interleaving row k
    with row k + N/2, low halves then high halves, transpose the square."""
    count = len(rows)
    half = count // 2
    low = ir.Constant(ir.VectorType(_I32, count), [i // 2 + (count if i % 2 else 0) for i in range(count)])
    high = ir.Constant(ir.VectorType(_I32, count), [half + i // 2 + (count if i % 2 else 0) for i in range(count)])
    for _ in range(count.bit_length() - 1):
        interleaved = []
        for k in range(half):
            interleaved += [builder.shuffle_vector(rows[k], rows[k + half], low),
                            builder.shuffle_vector(rows[k], rows[k + half], high)]
        rows = interleaved
    return rows


# ---------------------------------------------------------------- types

def _llvm_type(dtype, lanes=None):
    """The LLVM type of a dtype, as a vector when lanes is given."""
    scalar = _SCALAR_TYPES[dtype]
    return scalar if lanes is None else ir.VectorType(scalar, lanes)


def _lanes(value):
    """How many lanes a value has, None for a scalar."""
    return value.type.count if isinstance(value.type, ir.VectorType) else None


def _dtype_of(value):
    """The dtype of a scalar value or of each lane of a vector."""
    element = value.type.element if isinstance(value.type, ir.VectorType) else value.type
    return _DTYPE_OF_TYPE[str(element)]


def _intrinsic_suffix(type_):
    """The overload suffix LLVM names intrinsics by (f32, v8f64, ...)."""
    if isinstance(type_, ir.VectorType):
        return f"v{type_.count}{_intrinsic_suffix(type_.element)}"
    return {"float": "f32", "double": "f64"}[str(type_)]


@functools.lru_cache(maxsize=4096)
def _int64(number):
    """An i64 constant, one object per number: index arithmetic asks for the same few again and again."""
    return ir.Constant(_I64, number)


def _folded(name, a, b, bits):
    """a `name` b on integer constants, as LLVM computes it on `bits`-bit two's complement values
    (truncating division); None for a division by zero, which is left to the instruction."""
    if name in ("sdiv", "srem"):
        if b == 0:
            return None
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        result = quotient if name == "sdiv" else a - quotient * b
    else:
        result = {"add": a + b, "sub": a - b, "mul": a * b}[name]
    half = 1 << (bits - 1)
    return (result + half) % (1 << bits) - half if bits > 1 else result & 1


def _operand_key(value):
    """A value's identity for reuse: constants by their value (integers) or text, instructions by identity."""
    if not isinstance(value, ir.Constant):
        return id(value)
    if isinstance(value.type, ir.IntType):
        return value.type.width, value.constant
    return str(value)


def _linear_plan(expr):
    """expr as ([(atom, coefficient)], constant): see _linear_atoms."""
    atoms = {}
    constant = _linear_atoms(expr, 1, atoms)
    return [(atom, factor) for atom, factor in atoms.values() if factor], constant


def _linear_atoms(expr, scale, atoms):
    """Adds scale * expr to atoms ({id(atom): (atom, coefficient)}) down its sums and products by
    integer constants; returns the constant part."""
    if isinstance(expr, Cast) and expr.dtype in _INDEX_TYPES and expr.value.dtype in _INDEX_TYPES:
        return _linear_atoms(expr.value, scale, atoms)
    if isinstance(expr, Binary) and expr.op in ("+", "-"):
        constant = _linear_atoms(expr.a, scale, atoms)
        return constant + _linear_atoms(expr.b, scale if expr.op == "+" else -scale, atoms)
    if isinstance(expr, Binary) and expr.op == "*":
        for factor, other in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(factor, Const) and type(factor.value) is int:
                return _linear_atoms(other, scale * factor.value, atoms)
    if isinstance(expr, Const) and type(expr.value) is int:
        return scale * expr.value
    _, coefficient = atoms.get(id(expr), (expr, 0))
    atoms[id(expr)] = (expr, coefficient + scale)
    return 0


_VECTOR_CONSTANTS = {}
_MAX_VECTOR_CONSTANTS = 4096


def _vector_constant(element, values):
    """The constant vector of `values`, one object per process: a lane mask's or index vector's
    text is written once, not at every use (printing them afresh once took a third of an emission)."""
    key = (str(element), repr(tuple(values)))   # repr tells -0.0 from 0.0
    constant = _VECTOR_CONSTANTS.get(key)
    if constant is None:
        if len(_VECTOR_CONSTANTS) >= _MAX_VECTOR_CONSTANTS:
            _VECTOR_CONSTANTS.clear()
        zero = all(repr(value) in ("0", "0.0") for value in values)   # printed as one word, not per lane
        constant = _VECTOR_CONSTANTS[key] = ir.Constant(ir.VectorType(element, len(values)), None if zero else list(values))
    return constant


def _constant_like(value, number):
    """number as a constant of value's type (splatted over its lanes)."""
    lanes = _lanes(value)
    element = _llvm_type(_dtype_of(value))
    return ir.Constant(element, number) if lanes is None else _vector_constant(element, [number] * lanes)


# ---------------------------------------------------------------- analysis of the loop IR

def segments(body):
    """The top-level statements of a kernel body, which run one after another."""
    return list(body.stmts) if isinstance(body, Seq) else [body]


def _fills(stmt):
    """Whether stmt only stores constants (a reduction's initial value), in loops: such a loop stays
    rolled. LLVM unrolled a YOLO C7 output's zeroing nest into 12,560 stores, and its instruction
    schedulers then spent 3.5 s on those blocks (a candidate whose other loops took 0.1 s)."""
    return all(isinstance(part, (For, Seq)) or isinstance(part, Store) and isinstance(part.value, Const)
               for part in walk_stmts(stmt))


def _outlined_loop(segment):
    """The parallel loop a segment spreads over threads, looking through its scratch allocations."""
    stmt = segment
    while isinstance(stmt, Allocate):
        stmt = stmt.body
    return stmt if isinstance(stmt, For) and stmt.kind == "parallel" else None


def check_loops(body):
    """Fail early, naming the loop, on loops a CPU cannot run."""
    for stmt in walk_stmts(body):
        if not isinstance(stmt, For):
            continue
        name = stmt.var.name
        if stmt.kind in GPU_LOOP_KINDS:
            raise CodegenError(f"loop '{name}' is bound to {stmt.kind}: the llvm back end runs no GPU kernels")
        if stmt.kind not in CPU_LOOP_KINDS:
            raise CodegenError(f"loop '{name}' has unknown kind {stmt.kind!r}; expected one of {', '.join(LOOP_KINDS)}")
        if not isinstance(stmt.extent, numbers.Integral) or stmt.extent < 0:
            raise CodegenError(f"loop '{name}' has extent {stmt.extent!r}; expected a non-negative int")


def written_buffers(body):
    """The buffers some Store writes (their arguments must be writable and not shared)."""
    return {stmt.buffer for stmt in walk_stmts(body) if isinstance(stmt, Store)}


# ---------------------------------------------------------------- LLVM module

class InstructionLimitReached(CodegenError):
    """A ModuleBuilder's module grew past its instruction limit part way through: the instructions
    and the stores laid out when it stopped."""

    def __init__(self, instructions, stores):
        super().__init__(f"{instructions} instructions after {stores} stores")
        self.instructions = instructions
        self.stores = stores


class _CountingIRBuilder(ir.IRBuilder):
    """An IRBuilder that adds each instruction it inserts to its ModuleBuilder's count (the module
    is measured as it grows, without summing its blocks)."""

    def __init__(self, block, module_builder):
        super().__init__(block)
        self._module_builder = module_builder

    def _insert(self, instr):
        self._module_builder.instruction_count += 1
        super()._insert(instr)


class ModuleBuilder:
    """The LLVM module of one PrimFunc: a body function and an entry point per segment.

    With an instruction_limit, build() raises InstructionLimitReached as soon as the module is
    found past it: a module that cannot be kept is not emitted whole only to be thrown away. The
    module is counted when half its remaining budget may be spent at the instructions per store
    so far (at least LIMIT_CHECK_STORES stores apart), so a module that fits is counted a few times."""

    LIMIT_CHECK_STORES = 8

    def __init__(self, func, triple, data_layout, register_lanes, instruction_limit=None, vector_registers=16):
        self.func = func
        self.register_lanes = register_lanes   # 32-bit lanes of the host's vector registers
        self.vector_registers = vector_registers
        self.instruction_limit = instruction_limit
        self.stores = 0         # stores laid out so far
        self.instruction_count = 0
        # Each unrolled loop emitted whole: [instructions, times emitted] (what rolling it would save).
        self.unrolled_costs = {}
        self._next_count = self.LIMIT_CHECK_STORES
        self.module = ir.Module(name=signature(func))
        self.module.triple = triple
        self.module.data_layout = data_layout
        self.segments = []      # (symbol, extent of its parallel loop or None)
        self.fallbacks = {}     # vectorized loops that ran lane by lane, and why (ordered, no repeats)
        self.scratch = KeptScratch(self, SCRATCH_ALIGN)   # heap scratch buffers kept between calls

    def build(self):
        """Emit every segment; return the module."""
        for index, segment in enumerate(segments(self.func.body)):
            loop = _outlined_loop(segment)
            body = self._body_function(index)
            _FunctionEmitter(self, body, loop).emit(segment)
            self._entry_function(index, body)
            self.segments.append((f"seg_{index}", None if loop is None else loop.extent))
        self.scratch.emit_release()
        return self.module

    def rolled_loop_id(self):
        """A new loop ID (self-referencing, as LLVM wants it) that turns LLVM's unrolling off."""
        return self.module.loop_id(self.module.add_metadata(["llvm.loop.unroll.disable"]))

    def instructions(self):
        """Instructions in the module so far."""
        return self.instruction_count

    def ir_builder(self, block):
        """An IRBuilder at the end of block whose instructions this module counts."""
        return _CountingIRBuilder(block, self)

    def note_unrolled(self, loop, instructions):
        """Count one whole emission of an unrolled loop, which took `instructions`."""
        cost = self.unrolled_costs.setdefault(loop, [0, 0])
        cost[0] += instructions
        cost[1] += 1

    def count_store(self):
        """Note one more store laid out; InstructionLimitReached if the module is past its limit."""
        self.stores += 1
        if self.instruction_limit is None or self.stores < self._next_count:
            return
        instructions = self.instructions()
        if instructions > self.instruction_limit:
            raise InstructionLimitReached(instructions, self.stores)
        stores_left = (self.instruction_limit - instructions) * self.stores // max(1, instructions)
        self._next_count = self.stores + max(self.LIMIT_CHECK_STORES, stores_left // 2)

    def declare(self, name, return_type, arg_types):
        """A function of the C library or an LLVM intrinsic, declared once."""
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(return_type, arg_types), name=name)

    def _body_function(self, index):
        """The segment's code, taking each buffer as a noalias pointer parameter."""
        params = self.func.params
        signature = ir.FunctionType(ir.VoidType(), [_I64, _I64] + [_PTR] * len(params))
        function = ir.Function(self.module, signature, name=f"seg_{index}_body")
        function.linkage = "internal"
        function.attributes.add("nounwind")
        function.args[0].name, function.args[1].name = "begin", "end"
        for arg, buffer in zip(function.args[2:], params):
            arg.name = buffer.name
            arg.add_attribute("noalias")
        return function

    def _entry_function(self, index, body):
        """seg_k(begin, end, buffers): unpacks the pointer table the host passes and calls the body."""
        signature = ir.FunctionType(ir.VoidType(), [_I64, _I64, _PTR])
        function = ir.Function(self.module, signature, name=f"seg_{index}")
        function.attributes.add("nounwind")
        begin, end, table = function.args
        begin.name, end.name, table.name = "begin", "end", "buffers"
        builder = self.ir_builder(function.append_basic_block("entry"))
        pointers = []
        for position, buffer in enumerate(self.func.params):
            slot = builder.gep(table, [_int64(position)], inbounds=True, source_etype=_PTR)
            pointers.append(builder.load(slot, name=buffer.name, align=8, typ=_PTR))
        builder.call(body, [begin, end, *pointers])
        builder.ret_void()


def signature(func):
    """The kernel's name and parameters, which name the module so that the IR text identifies them."""
    params = ", ".join(f"{b.name}: {b.dtype}{list(b.shape)}" for b in func.params)
    return f"{func.name}({params})"


class _FunctionEmitter:
    """Emits one segment's statements and expressions into its body function."""

    def __init__(self, module_builder, function, outlined_loop):
        self.mb = module_builder
        self.outlined_loop = outlined_loop
        self.entry = module_builder.ir_builder(function.append_basic_block("entry"))   # allocations only
        self.body_block = function.append_basic_block("body")
        self.builder = module_builder.ir_builder(self.body_block)
        begin, end, *pointers = function.args
        self.bounds = (begin, end)
        self.pointers = dict(zip(module_builder.func.params, pointers))
        self.env = {}           # id(loop variable) -> its value
        self.vector = None      # (variable, lanes) while emitting the one body of a vectorized loop
        self.live_lanes = None  # lanes of the loop itself when self.vector is padded beyond them
        self.lane_guard = None  # <lanes x i1>: the conditions around a statement of a vector body
        self.shapes = {}        # local buffer -> its shape with padded rows
        self.in_index = 0       # > 0 while emitting a tensor index: its integer math cannot overflow
        self.sums = {}          # (block, terms) -> a flat index's variable part emitted there
        self.integers = {}      # (block, operation, operands) -> an integer instruction emitted there
        self.answers = {}       # (question, ids of its objects) -> (the objects, the answer): see _once
        self.heap = []          # (site's slots, buffer) of heap scratch, given back on return
        # Values of the expression nodes emitted since the last statement boundary or rebinding,
        # by identity: legalisation reuses one operand in a condition and in the branches it
        # selects between, which then need no guard of their own.
        self.values = {}

    def emit(self, segment):
        """The whole body function: the segment, then giving heap scratch back, then return."""
        self.stmt(segment)
        for slots, pointer in self.heap:
            self.mb.scratch.give(self.builder, slots, pointer)
        self.builder.ret_void()
        self.entry.branch(self.body_block)

    # ------------------------------------------------------------ statements

    def stmt(self, stmt):
        """Emit one statement at the builder's position."""
        self.values.clear()   # a value computed in one block need not dominate the next statement
        if isinstance(stmt, Seq):
            for part in stmt.stmts:
                self.stmt(part)
        elif isinstance(stmt, For):
            self._for(stmt)
        elif isinstance(stmt, Store):
            self._store(stmt)
        elif isinstance(stmt, IfThenElse):
            self._if(stmt)
        elif isinstance(stmt, Allocate):
            self._allocate(stmt)
        elif isinstance(stmt, Barrier):
            pass    # one CPU thread runs a whole block in order, so there is nobody to wait for
        else:
            raise CodegenError(f"not a statement: {stmt!r}")

    def _for(self, loop):
        if loop.kind != "unrolled":   # the outlined loop is parallel, never unrolled
            self._loop(loop)
            return
        started = self.mb.instruction_count
        self._loop(loop)
        self.mb.note_unrolled(loop, self.mb.instruction_count - started)

    def _loop(self, loop):
        if loop is self.outlined_loop:
            self._serial_loop(loop.var, *self.bounds, loop.body)
        elif loop.kind == "vectorized":
            self._vectorized(loop)
        elif self._transposed_copy(loop):
            pass
        elif loop.kind == "unrolled" or self._fenced_taps(loop):
            self._unrolled(loop)
        else:
            self._serial_loop(loop.var, _int64(0), _int64(loop.extent), loop.body, rolled=_fills(loop.body))

    def _serial_loop(self, var, begin, end, body, rolled=False):
        """A counted loop; the counter is a phi, so no stack slot is needed."""
        def emit(counter):
            with self._bound(var, counter):
                self.stmt(body)
        self._counted_loop(var.name, begin, end, emit, rolled)

    def _counted_loop(self, name, begin, end, emit, rolled=False):
        """A loop counting from begin to end; emit(counter) emits its body. A rolled loop tells LLVM
        not to unroll it."""
        if emitted_once(begin, end):
            emit(begin)
            return
        builder = self.builder
        preheader = builder.block
        head = builder.append_basic_block(f"{name}.head")
        loop_body = builder.append_basic_block(f"{name}.body")
        exit_block = builder.append_basic_block(f"{name}.exit")
        builder.branch(head)
        builder.position_at_end(head)
        counter = builder.phi(_I64, name=name)
        counter.add_incoming(begin, preheader)
        builder.cbranch(builder.icmp_signed("<", counter, end), loop_body, exit_block)
        builder.position_at_end(loop_body)
        emit(counter)
        counter.add_incoming(builder.add(counter, _int64(1), flags=_NO_WRAP), builder.block)
        latch = builder.branch(head)
        if rolled:
            latch.set_metadata("llvm.loop", self.mb.rolled_loop_id())
        builder.position_at_end(exit_block)

    # ------------------------------------------------------------ transposed copies

    def _transposed_copy(self, loop):
        """Emit a copy nest that transposes, as tiles through registers; False where it is none.

        The nest is a serial or unrolled loop around a vectorized one (through any one-iteration
        loops between them, _within_single_loops) whose body copies an element,
        one side contiguous along the outer loop and the other along the inner one: a layout
        conversion (codegen.layout), or a register tile vectorised along another axis than the
        output's contiguous one, copied out. The outer loop may be a perfect nest of serial loops
        that walk one run of memory on both sides (_serial_nest, _copy_run). Lane by lane, each
        vector would be gathered from (or scattered to) as many cache lines as it has lanes; instead
        an N x N tile is loaded as N vectors along the source's contiguous loop, transposed by
        shuffles and stored as N vectors along the target's. Outer iterations past the last whole
        tile run as before."""
        tile = self._transpose_tile(loop)
        if tile is None:
            return False
        nest, inner, single, width, source_along_outer = tile
        with contextlib.ExitStack() as stack:
            for var in single:   # a one-iteration loop between the two indexes 0
                stack.enter_context(self._bound(var, _int64(0)))
            self._transposed_tiles(nest, inner, width, source_along_outer)
        return True

    def _transposed_tiles(self, nest, inner, width, source_along_outer):
        """The tiles of _transposed_copy, then the outer iterations past the last whole one."""
        loop = nest[0]
        store = inner.body
        source, source_indices = store.value.tensor, access_indices(store.value)
        target, target_indices = store.buffer, access_indices(store)
        extent = int(np.prod([outer.extent for outer in nest], dtype=np.int64))
        tiles = extent // width
        element = _llvm_type(target.dtype)
        steps_of = {buffer: self._copy_run(buffer, indices, nest)
                    for buffer, indices in ((source, source_indices), (target, target_indices))}

        def element_at(buffer, indices, outer, inner_value):
            # The run's start, then `outer` of its steps along it (one loop's steps where the nest is one).
            with contextlib.ExitStack() as stack:
                for outer_loop in nest:
                    stack.enter_context(self._bound(outer_loop.var, _int64(0)))
                stack.enter_context(self._bound(inner.var, inner_value))
                flat = self._flat_index(buffer, indices)
            flat = self.builder.add(flat, self.builder.mul(outer, _int64(steps_of[buffer]), flags=_NO_WRAP),
                                    flags=_NO_WRAP)
            return self._address(buffer, self._pointer_of(buffer), flat)

        def corner(base, column, outer_step, inner_step):
            return self.builder.add(base, _int64(outer_step), flags=_NO_WRAP), _int64(column + inner_step)

        def emit(base):
            # Vector j is loaded at step j across the source's contiguous loop; transposed vector i
            # is stored at step i across the target's.
            for column in range(0, inner.extent, width):
                rows = []
                for j in range(width):
                    steps = (0, j) if source_along_outer else (j, 0)
                    rows.append(self.builder.load(element_at(source, source_indices, *corner(base, column, *steps)),
                                                  align=_ITEM_SIZES[source.dtype], typ=ir.VectorType(element, width)))
                for i, vector in enumerate(_transposed(self.builder, rows)):
                    self.mb.count_store()
                    steps = (i, 0) if source_along_outer else (0, i)
                    self.builder.store(vector, element_at(target, target_indices, *corner(base, column, *steps)),
                                       align=_ITEM_SIZES[target.dtype])

        if loop.kind == "unrolled":
            for tile_index in range(tiles):
                emit(_int64(tile_index * width))
            for step in range(tiles * width, loop.extent):
                with self._bound(loop.var, _int64(step)):
                    self.stmt(inner)
            return
        self._counted_loop(f"{loop.var.name}.tile", _int64(0), _int64(tiles),
                           lambda counter: emit(self.builder.mul(counter, _int64(width), flags=_NO_WRAP)))
        if extent % width:   # a nest of one loop (_transpose_tile)
            self._serial_loop(loop.var, _int64(tiles * width), _int64(loop.extent), inner)

    def _copy_run(self, buffer, indices, nest):
        """Elements between a buffer's accesses at neighbouring steps of a nest's innermost loop, where
        each loop of the nest steps as far as a whole run of the loop inside it (so the nest walks one
        run of memory); None where it does not."""
        strides = [flat_stride(buffer, indices, outer.var, self.shapes.get(buffer)) for outer in nest]
        if None in strides:
            return None
        if any(strides[i] != strides[i + 1] * nest[i + 1].extent for i in range(len(nest) - 1)):
            return None
        return strides[-1]

    def _transpose_tile(self, loop):
        """(the loops taken as the outer one, the vectorized loop, the one-iteration loops between,
        N, whether the source is contiguous along the outer loops) of the square tiles a loop's copy nest transposes by (N a power of two
        of at least 4 lanes, at most a register, dividing the inner loop), or None where it is no
        such copy."""
        if self.vector is not None or self.lane_guard is not None or loop.kind not in ("serial", "unrolled"):
            return None
        nest, inner, single = _serial_nest(loop)
        if not (isinstance(inner, For) and inner.kind == "vectorized" and isinstance(inner.body, Store)):
            return None
        store = inner.body
        load = store.value
        if not isinstance(load, Load) or load.dtype != store.buffer.dtype or store.buffer.dtype not in _ITEM_SIZES:
            return None
        strides = {}
        for name, buffer, indices in (("source", load.tensor, access_indices(load)),
                                      ("target", store.buffer, access_indices(store))):
            strides[name] = (self._copy_run(buffer, indices, nest),
                             flat_stride(buffer, indices, inner.var, self.shapes.get(buffer)))
        if None in strides["source"] + strides["target"]:
            return None
        # The source contiguous along one loop, the target along the other, and neither along both.
        (source_outer, source_inner), (target_outer, target_inner) = strides["source"], strides["target"]
        if source_outer == 1 and target_inner == 1 and 1 not in (source_inner, target_outer):
            source_along_outer = True
        elif source_inner == 1 and target_outer == 1 and 1 not in (source_outer, target_inner):
            source_along_outer = False
        else:
            return None
        extent = int(np.prod([outer.extent for outer in nest], dtype=np.int64))
        width = self.mb.register_lanes
        while width >= 4 and (inner.extent % width or extent < width or (len(nest) > 1 and extent % width)):
            width //= 2
        return (nest, inner, single, width, source_along_outer) if width >= 4 else None

    def _unrolled(self, loop):
        fenced = self._reads_to_fence(loop) if loop.extent > 1 else None
        for step in range(loop.extent):
            if fenced and step:
                self._compiler_fence(fenced)
            with self._bound(loop.var, _int64(step)):
                self.stmt(loop.body)

    def _fenced_taps(self, loop):
        """Whether a short serial reduction loop around a large register tile is unrolled here, fenced,
        rather than by LLVM: unrolled by LLVM (as it does a filter's 3 taps), its steps' shared input
        loads merge and spill the tile. The steps count those of the serial loops inside it, which are
        unrolled so too. A tile under guards (the partial copy of a versioned tile) runs seldom and is
        left to LLVM, to keep the code small."""
        if loop.extent > MAX_FENCED_STEPS:   # most loops: no need to look inside
            return False
        inside = list(walk_stmts(loop.body))
        steps = loop.extent * int(np.prod([stmt.extent for stmt in inside if isinstance(stmt, For)
                                           and stmt.kind == "serial"], dtype=np.int64))
        return (steps <= MAX_FENCED_STEPS and not any(isinstance(stmt, IfThenElse) for stmt in inside)
                and self._reads_to_fence(loop) is not None)

    def _reads_to_fence(self, loop):
        """The buffers read by a reduction's unrolled steps into a register tile that the loads they
        share would spill, or None where the loop is no such thing. LLVM merges the loads that recur
        from one step to the next (a 3 x 3 convolution reads most inputs again at the next filter
        column) and keeps them live. A tile of more accumulators than half the vector registers is
        fenced: with 12 accumulators of 16 registers a small convolution's tile spilled 71 vectors
        (YOLO C4's and GMM's 12-accumulator tiles, whose steps LLVM did not merge so, ran as fast
        fenced as not). So are the schedule's unrolled steps whose shared loads, merged, would not
        fit beside the accumulators (codegen.register_pressure): YOLO C1's 16-accumulator tiles over
        2 x 8 and 4 x 4 pixels (AVX-512, stride 2: 24-28 shared columns) spilled 34-39 vectors.
        Other tiles are left alone: the merged loads fit beside them, and fenced, an 8-accumulator
        C6 tile ran 4-7% slower."""
        stores = [stmt for stmt in walk_stmts(loop.body) if isinstance(stmt, Store)]
        if not stores or not all(isinstance(self.pointers.get(store.buffer), ir.AllocaInstr)
                                 and not any(self._mentions(index, loop.var) for index in access_indices(store))
                                 for store in stores):
            return None
        written = {store.buffer: None for store in stores}
        accumulators = sum(map(self._registers_held, written))
        if accumulators <= self.mb.vector_registers // 2 and not (
                loop.kind == "unrolled" and accumulators + self._once(self._shared_loads, loop)
                > self.mb.vector_registers):
            return None
        read = {node.tensor: None for store in stores for node in walk(store.value) if isinstance(node, Load)}
        return [buffer for buffer in read if buffer not in written]

    def _shared_loads(self, loop):
        """The vector registers the loads that several of the loop's steps read would hold, merged; the
        tile's own accumulators are not counted (they are held already)."""
        written = {stmt.buffer for stmt in walk_stmts(loop.body) if isinstance(stmt, Store)}
        return shared_load_registers(loop, self.mb.register_lanes, skip=written)

    def _registers_held(self, buffer):
        """The vector registers a scratch buffer fills: its rows, each in whole registers."""
        if not buffer.shape:
            return 1
        rows = int(np.prod(buffer.shape[:-1], dtype=np.int64))
        return rows * -(-buffer.shape[-1] // self.mb.register_lanes)

    def _compiler_fence(self, buffers):
        """An empty assembly statement given the buffers' addresses, which may read and write memory:
        their loads are neither merged nor moved across it. The register tile's scratch is not
        given, and its address never escapes, so its accumulators stay in registers."""
        pointers = [self._pointer_of(buffer) for buffer in buffers]
        constraints = ",".join(["r"] * len(pointers) + ["~{memory}"])
        self.builder.asm(ir.FunctionType(ir.VoidType(), [_PTR] * len(pointers)), "", constraints, pointers,
                         side_effect=True)

    def _vectorized(self, loop):
        reason = self._once(vectorize_blocker, loop)
        if reason is None:
            with self._vector_mode(loop.var, padded_lanes(loop.extent, self.mb.register_lanes), loop.extent):
                self.stmt(loop.body)
            return
        how = "unrolled lane by lane" if loop.extent <= MAX_VECTOR_LANES else "as a serial loop"
        self.mb.fallbacks[f"vectorized loop '{loop.var.name}' runs {how}: {reason}"] = None
        if loop.extent <= MAX_VECTOR_LANES:
            self._unrolled(loop)
        else:
            self._serial_loop(loop.var, _int64(0), _int64(loop.extent), loop.body)

    def _if(self, stmt):
        cond = self.expr(stmt.cond)
        if _lanes(cond) is not None:
            self._masked_if(stmt, cond)
            return
        if stmt.else_body is None:
            with self.builder.if_then(cond):
                self.stmt(stmt.then_body)
            return
        with self.builder.if_else(cond) as (then, otherwise):
            with then:
                self.stmt(stmt.then_body)
            with otherwise:
                self.stmt(stmt.else_body)

    def _allocate(self, stmt):
        """Scratch for the body, taken once per call of this function (so once per thread chunk):
        on the stack, or from the heap buffers the site keeps."""
        buffer = stmt.buffer
        shape = (*buffer.shape[:-1], row_pitch(buffer.shape[-1], self.mb.register_lanes)) if buffer.shape else buffer.shape
        self.shapes[buffer] = shape
        size = int(np.prod(shape, dtype=np.int64))
        nbytes = size * _ITEM_SIZES[buffer.dtype]
        if nbytes <= MAX_STACK_BYTES:
            pointer = self.entry.alloca(ir.ArrayType(_llvm_type(buffer.dtype), size), name=buffer.name)
            pointer.align = SCRATCH_ALIGN
            self._zero(pointer, nbytes)
        else:
            rounded = -(-nbytes // SCRATCH_ALIGN) * SCRATCH_ALIGN   # C11 wants a multiple of the alignment
            slots, pointer = self.mb.scratch.take(self.entry, rounded, buffer.name)
            self.heap.append((slots, pointer))
        previous = self.pointers.get(buffer)
        self.pointers[buffer] = pointer
        self.stmt(stmt.body)
        if previous is None:
            del self.pointers[buffer]
        else:
            self.pointers[buffer] = previous

    def _zero(self, pointer, nbytes):
        """Zero a stack buffer where it is made: a vector's lanes past a row's end are computed though
        never stored, and stale stack there (pointers' high halves read as denormal floats) would make
        each such operation a slow microcode assist. LLVM drops the zeroing where stores cover it."""
        memset = self.mb.declare("llvm.memset.p0.i64", ir.VoidType(), [_PTR, ir.IntType(8), _I64, _I1])
        self.entry.call(memset, [pointer, ir.Constant(ir.IntType(8), 0), _int64(nbytes), ir.Constant(_I1, 0)])

    def _store(self, store):
        self.mb.count_store()
        buffer = store.buffer
        check_indices(buffer, access_indices(store))
        pointer = self._pointer_of(buffer)
        value = self._convert(self.expr(stored_value(store)), buffer.dtype)
        align = _ITEM_SIZES[buffer.dtype]
        if self.vector is None:
            flat = self._flat_index(buffer, access_indices(store))
            self.builder.store(value, self._address(buffer, pointer, flat), align=align)
            return
        var, lanes = self.vector
        stride = self._flat_stride(buffer, access_indices(store), var)  # non-zero: see the blocker
        base = self._lane_zero_index(buffer, access_indices(store))
        if stride == 1:
            value = self._broadcast(value, lanes)
            address = self._address(buffer, pointer, base, inbounds=False)
            if self.lane_guard is None and self._lanes_stay_in_row(buffer, access_indices(store), writes=True):
                self.builder.store(value, address, align=align)
            elif self._span_inside(buffer, access_indices(store)):
                # A blend, not a masked store: lanes off keep their old value, and a register
                # tile stays plain loads and stores, which LLVM can keep in registers.
                old = self.builder.load(address, align=align, typ=value.type)
                self.builder.store(self.builder.select(self._live_mask(lanes), value, old), address, align=align)
            else:
                self._masked_store(buffer, pointer, base, value)
            return
        for lane in range(self.live_lanes or lanes):
            with self._if_lane(lane):
                flat = self.builder.add(base, _int64(lane * stride))
                self.builder.store(self._lane(value, lane), self._address(buffer, pointer, flat), align=align)

    @contextlib.contextmanager
    def _if_lane(self, lane):
        """Inside, code runs only when the lane's conditions hold (always outside a masked branch)."""
        if self.lane_guard is None:
            yield
            return
        with self.builder.if_then(self.builder.extract_element(self.lane_guard, ir.Constant(_I32, lane))):
            yield

    # ------------------------------------------------------------ scopes

    @contextlib.contextmanager
    def _bound(self, var, value):
        """var has value inside the block (loop variables may be rebound by unrolling)."""
        key = id(var)
        previous = self.env.get(key)
        self.env[key] = value
        self.values.clear()
        try:
            yield
        finally:
            self.values.clear()
            if previous is None:
                del self.env[key]
            else:
                self.env[key] = previous

    @contextlib.contextmanager
    def _vector_mode(self, var, lanes, live_lanes):
        """Inside, var is the vector <0, 1, ..., lanes-1> and expressions may be vectors; lanes
        from live_lanes on are padding."""
        lane_numbers = _vector_constant(_I64, range(lanes))
        outer = self.vector, self.live_lanes, self.lane_guard
        self.vector, self.live_lanes = (var, lanes), (live_lanes if live_lanes < lanes else None)
        self.lane_guard = None
        try:
            with self._bound(var, lane_numbers):
                yield
        finally:
            self.vector, self.live_lanes, self.lane_guard = outer

    def _once(self, question, *objects):
        """question(*objects), asked once per emitter for the same objects: an unrolled tile asks
        again in every copy. The cache holds the objects, so their ids are not reused while it
        lives (access_indices makes a fresh expression of a plain int index at every call)."""
        key = (question, *map(id, objects))
        known = self.answers.get(key)
        if known is None:
            known = self.answers[key] = (objects, question(*objects))
        return known[1]

    def _stride(self, index, var):
        """affine.stride(index, var), once per expression."""
        return self._once(affine.stride, index, var)

    def _mentions(self, index, var):
        """mentions(index, var), once per expression."""
        return self._once(mentions, index, var)

    def _flat_stride(self, buffer, indices, var):
        """codegen.vectorize.flat_stride of an access, with the local buffer's padded rows."""
        return flat_stride(buffer, indices, var, self.shapes.get(buffer), self._stride)

    def _lanes_stay_in_row(self, buffer, indices, writes=False):
        """Whether every lane of a contiguous access, padding included, lies in memory it may touch:
        always without padding; with it, only along the padded rows of a local buffer. A write's
        padding lanes must moreover land past the row's last element: inside the row they would
        clobber elements other iterations own (a 28-lane loop over half of a 56-element row)."""
        if self.live_lanes is None:
            return True
        var, lanes = self.vector
        shape = self.shapes.get(buffer)
        if shape is None or self._stride(indices[-1], var) != 1 or \
                any(self._mentions(index, var) for index in indices[:-1]):
            return False
        if shape[-1] - buffer.shape[-1] < lanes - self.live_lanes:
            return False
        if not writes:
            return True
        first_lane = affine.interval(indices[-1], {var.name: (0, 0)})
        return first_lane is not None and first_lane[0] + self.live_lanes >= buffer.shape[-1]

    def _plain_load_is_safe(self, buffer, indices):
        """Whether a contiguous vector load may read all its lanes, off and padded ones included."""
        unmasked = self.lane_guard is None and self._lanes_stay_in_row(buffer, indices)
        return unmasked or self._span_inside(buffer, indices)

    def _span_inside(self, buffer, indices):
        """Whether every lane of a local buffer's access, off and padded ones included, lies in its
        (row-padded) memory for every value of the loops around it: then a plain vector access is safe."""
        shape = self.shapes.get(buffer)
        if shape is None:
            return False
        var, lanes = self.vector
        for index, extent in zip(indices, shape):
            span = affine.interval(index, {var.name: (0, lanes - 1)})
            if span is None or span[0] < 0 or span[1] >= extent:
                return False
        return True

    def _live_mask(self, lanes):
        """<lanes x i1>: true on the lanes of the loop itself whose conditions hold."""
        live = self.live_lanes or lanes
        mask = _vector_constant(_I1, [int(lane < live) for lane in range(lanes)])
        return mask if self.lane_guard is None else self.builder.and_(mask, self.lane_guard)

    def _lane_zero_index(self, buffer, indices, guarded=False):
        """The flat index lane 0 accesses (a scalar): the indices with the vector variable at 0."""
        var, lanes = self.vector
        self.vector = None
        try:
            with self._bound(var, _int64(0)):
                return self._flat_index(buffer, indices, guarded)
        finally:
            self.vector = (var, lanes)

    def _size(self, buffer):
        """Elements the buffer's memory holds (local rows are padded)."""
        shape = self.shapes.get(buffer)
        return buffer.size if shape is None else int(np.prod(shape, dtype=np.int64))

    def _pointer_of(self, buffer):
        pointer = self.pointers.get(buffer)
        if pointer is None:
            raise CodegenError(f"buffer '{buffer.name}' is neither a parameter of '{self.mb.func.name}' "
                               f"nor allocated around its use")
        return pointer

    def _masked_if(self, stmt, cond):
        """A condition that varies over the lanes of a vector body: both branches run on every
        lane, their loads and stores masked to the lanes the condition picks."""
        outer = self.lane_guard
        branches = [(stmt.then_body, cond)]
        if stmt.else_body is not None:
            branches.append((stmt.else_body, self.builder.not_(cond)))
        try:
            for body, picked in branches:
                self.lane_guard = picked if outer is None else self.builder.and_(outer, picked)
                self.stmt(body)
        finally:
            self.lane_guard = outer

    # ------------------------------------------------------------ memory access

    def _flat_index(self, buffer, indices, guarded=False):
        """The row-major element offset of indices, in i64 (a vector when it varies over lanes).

        Emitted as one sum of terms and a constant: the loops an unrolled tile binds to constants
        fold into the constant, and the sum of the others is shared by every access of the tile in
        the same block, so a tile's loads cost an add each instead of a multiply-add per dimension
        (fewer instructions to emit and for LLVM to simplify)."""
        check_indices(buffer, indices)
        terms, offset = {}, 0
        self.in_index += 1
        try:
            scale = 1
            for index, extent in reversed(list(zip(indices, self.shapes.get(buffer, buffer.shape)))):
                offset += self._linear_terms(index, scale, terms, guarded)
                scale *= extent
            flat = self._sum_of_terms(tuple(terms.values()))
            if flat is None:
                return _int64(offset)
            return flat if offset == 0 else self._int_op(self.builder.add, flat, _int64(offset))
        finally:
            self.in_index -= 1

    def _linear_terms(self, expr, scale, terms, guarded):
        """Adds scale * expr to terms ({id(value): (value, coefficient)}) as far as it is a sum of
        constant multiples; returns the constant part."""
        atoms, constant = self._once(_linear_plan, expr)
        constant *= scale
        for atom, factor in atoms:
            value = self._convert(self.expr(atom, guarded), "int64")
            if isinstance(value, ir.Constant) and isinstance(value.type, ir.IntType):
                constant += scale * factor * value.constant
                continue
            _, coefficient = terms.get(id(value), (value, 0))
            if coefficient + scale * factor:
                terms[id(value)] = (value, coefficient + scale * factor)
            else:
                del terms[id(value)]
        return constant

    def _sum_of_terms(self, terms):
        """sum(coefficient * value) of ((value, coefficient), ...), or None when empty; a sum already
        emitted in this block is reused (it dominates everything after it there)."""
        if not terms:
            return None
        key = (self.builder.block, tuple((id(value), coefficient) for value, coefficient in terms))
        total = self.sums.get(key)
        if total is None:
            for value, coefficient in sorted(terms, key=lambda term: _lanes(term[0]) is not None):
                term = value if coefficient == 1 else self._int_op(self.builder.mul, value, _int64(coefficient))
                total = term if total is None else self._int_op(self.builder.add, total, term)
            self.sums[key] = total
        return total

    def _address(self, buffer, pointer, flat, inbounds=True):
        element = _llvm_type(buffer.dtype)
        return self.builder.gep(pointer, [flat], inbounds=inbounds, source_etype=element)

    def _clamp(self, flat, size):
        """flat forced into [0, size - 1]: a guarded load may compute an index its select discards."""
        builder = self.builder
        low = builder.select(builder.icmp_signed("<", flat, _int64(0)), _int64(0), flat)
        return builder.select(builder.icmp_signed(">", low, _int64(size - 1)), _int64(size - 1), low)

    def _scalar_load(self, buffer, pointer, flat, guarded):
        if guarded:
            flat = self._clamp(flat, self._size(buffer))
        address = self._address(buffer, pointer, flat)
        return self.builder.load(address, align=_ITEM_SIZES[buffer.dtype], typ=_llvm_type(buffer.dtype))

    def _vector_load(self, buffer, pointer, indices, guarded):
        """A load whose index varies over the lanes: contiguous, broadcast, or lane by lane."""
        var, lanes = self.vector
        live = self.live_lanes or lanes
        stride = self._flat_stride(buffer, indices, var)
        if stride == 1 and (guarded or not self._plain_load_is_safe(buffer, indices)):
            base = self._lane_zero_index(buffer, indices, guarded)
            return self._masked_load(buffer, pointer, base, lanes, guarded)
        guarded = guarded or self.lane_guard is not None   # lanes masked off may point anywhere
        if stride is None:
            flat = self._flat_index(buffer, indices, guarded)
            return self._gather(buffer, pointer, [self._lane(flat, lane) for lane in range(live)], guarded, lanes)
        base = self._lane_zero_index(buffer, indices, guarded)
        if stride == 0:
            return self._scalar_load(buffer, pointer, base, guarded)
        if stride == 1:
            address = self._address(buffer, pointer, base)
            return self.builder.load(address, align=_ITEM_SIZES[buffer.dtype], typ=_llvm_type(buffer.dtype, lanes))
        if 2 <= stride <= _MAX_SHUFFLED_STRIDE and buffer.dtype in _ITEM_SIZES:
            return self._strided_load(buffer, pointer, base, stride, lanes, guarded)
        flats = [self.builder.add(base, _int64(lane * stride)) for lane in range(live)]
        return self._gather(buffer, pointer, flats, guarded, lanes)

    def _strided_load(self, buffer, pointer, base, stride, lanes, guarded):
        """Every stride-th element from base (a strided convolution's input row): one masked load
        of the span that touches only the wanted elements, then a shuffle that picks them out,
        in place of one scalar load per lane."""
        span = lanes * stride
        live = self.live_lanes or lanes
        wanted = _vector_constant(_I1, [int(i % stride == 0 and i // stride < live) for i in range(span)])
        loaded = self._masked_span(buffer, pointer, base, wanted, guarded)
        picks = _vector_constant(_I32, [lane * stride for lane in range(lanes)])
        return self.builder.shuffle_vector(loaded, ir.Constant(loaded.type, None), picks)

    def _gather(self, buffer, pointer, flats, guarded, lanes):
        """A vector of lanes loaded one by one from flats; padding lanes past them hold zero (a
        harmless divisor, where undefined lanes would make a division undefined)."""
        vector = ir.Constant(_llvm_type(buffer.dtype, lanes), None)
        for lane, flat in enumerate(flats):
            value = self._scalar_load(buffer, pointer, flat, guarded)
            vector = self.builder.insert_element(vector, value, ir.Constant(_I32, lane))
        return vector

    def _masked_load(self, buffer, pointer, base, lanes, guarded):
        """A contiguous load that touches only the live lanes, and under a select only those inside
        the buffer (zero elsewhere).

        Under a select, lanes at the border may point outside the buffer; clamping them one by
        one would be a gather, while a masked load stays one instruction (vmaskmov on AVX2).
        """
        return self._masked_span(buffer, pointer, base, self._live_mask(lanes), guarded)

    def _masked_span(self, buffer, pointer, base, mask, guarded):
        """The elements from base on where mask is set, and under a select only those inside the
        buffer; zero elsewhere (like _gather's padding lanes)."""
        builder = self.builder
        count = mask.type.count
        if guarded:
            element = builder.add(self._broadcast(base, count),
                                  _vector_constant(_I64, range(count)))
            inside = builder.and_(builder.icmp_signed(">=", element, _constant_like(element, 0)),
                                  builder.icmp_signed("<", element, _constant_like(element, self._size(buffer))))
            mask = builder.and_(inside, mask)
        vector_type = _llvm_type(buffer.dtype, count)
        masked_load = self.mb.declare(f"llvm.masked.load.{self._vector_suffix(buffer, count)}.p0", vector_type,
                                      [_PTR, _I32, ir.VectorType(_I1, count), vector_type])
        address = self._address(buffer, pointer, base, inbounds=False)   # lane 0 itself may lie outside
        alignment = ir.Constant(_I32, _ITEM_SIZES[buffer.dtype])
        return builder.call(masked_load, [address, alignment, mask, ir.Constant(vector_type, None)])

    def _masked_store(self, buffer, pointer, base, value):
        """A contiguous store of the live lanes only."""
        lanes = _lanes(value)
        masked_store = self.mb.declare(f"llvm.masked.store.{self._vector_suffix(buffer, lanes)}.p0", ir.VoidType(),
                                       [value.type, _PTR, _I32, ir.VectorType(_I1, lanes)])
        address = self._address(buffer, pointer, base, inbounds=False)   # lane 0 itself may be masked off
        self.builder.call(masked_store, [value, address, ir.Constant(_I32, _ITEM_SIZES[buffer.dtype]),
                                         self._live_mask(lanes)])

    @staticmethod
    def _vector_suffix(buffer, lanes):
        return f"v{lanes}{'f' if dtypes.is_float(buffer.dtype) else 'i'}{_BITS[buffer.dtype]}"

    # ------------------------------------------------------------ vectors

    def _broadcast(self, value, lanes):
        """value over all lanes (a vector stays as it is)."""
        if _lanes(value) is not None:
            return value
        vector_type = ir.VectorType(value.type, lanes)
        if isinstance(value, ir.Constant):
            return _vector_constant(value.type, [value.constant] * lanes)
        single = self.builder.insert_element(ir.Constant(vector_type, None), value, ir.Constant(_I32, 0))
        return self.builder.shuffle_vector(single, ir.Constant(vector_type, None),
                                           ir.Constant(ir.VectorType(_I32, lanes), None))

    def _unify(self, a, b):
        """a and b with the same shape: a scalar beside a vector is broadcast."""
        lanes_a, lanes_b = _lanes(a), _lanes(b)
        if lanes_a == lanes_b:
            return a, b
        if lanes_a is None:
            return self._broadcast(a, lanes_b), b
        return a, self._broadcast(b, lanes_a)

    def _lane(self, value, lane):
        if _lanes(value) is None:
            return value
        return self.builder.extract_element(value, ir.Constant(_I32, lane))

    def _per_lane(self, value, scalar_op):
        """scalar_op applied to value, one lane at a time when it is a vector."""
        lanes = _lanes(value)
        if lanes is None:
            return scalar_op(value)
        results = [scalar_op(self._lane(value, lane)) for lane in range(lanes)]
        vector = ir.Constant(ir.VectorType(results[0].type, lanes), None)
        for lane, result in enumerate(results):
            vector = self.builder.insert_element(vector, result, ir.Constant(_I32, lane))
        return vector

    def _int_op(self, op, a, b):
        return self._integer(op.__name__, a, b, self._index_flags())

    def _integer(self, name, a, b, flags=()):
        """The integer operation `name` (add, sub, mul, sdiv, srem) of a and b: folded where both
        are constants, and emitted once per block for the same operands (an unrolled tile
        computes the same index parts again and again)."""
        a, b = self._unify(a, b)
        if isinstance(a, ir.Constant) and isinstance(b, ir.Constant) and isinstance(a.type, ir.IntType):
            folded = _folded(name, a.constant, b.constant, a.type.width)
            if folded is not None:
                return ir.Constant(a.type, folded)
        key = (self.builder.block, name, _operand_key(a), _operand_key(b), flags)
        value = self.integers.get(key)
        if value is None:
            emit = getattr(self.builder, name)
            value = emit(a, b, flags=flags) if flags else emit(a, b)
            self.integers[key] = value
        return value

    def _index_flags(self):
        # Index math stays within a tensor's extents (checked when defined), so it cannot wrap;
        # saying so lets alias analysis tell neighbouring rows apart and keep accumulators in
        # registers. Value arithmetic keeps numpy's wrapping semantics.
        return _NO_WRAP if self.in_index else ()

    # ------------------------------------------------------------ expressions

    def expr(self, expr, guarded=False):
        """The value of expr: a scalar, or a vector where it varies over the lanes of a vectorized loop.

        guarded: expr sits in a branch of a select, so its loads may compute indices that are
        only valid when the branch is taken.
        """
        known = self.values.get(id(expr))
        if known is not None and known[0] is expr:
            return known[1]
        handler = self._HANDLERS.get(type(expr))
        if handler is None:
            raise CodegenError(f"the llvm back end cannot emit {type(expr).__name__} '{expr}' "
                               f"(reductions must be lowered to loops first)")
        value = handler(self, expr, guarded)
        self.values[id(expr)] = (expr, value)
        return value

    def _var(self, var, guarded):
        value = self.env.get(id(var))
        if value is None:
            raise CodegenError(f"loop variable '{var.name}' is used outside its loop")
        return value

    def _const(self, const, guarded):
        if const.dtype == dtypes.BOOL:
            return ir.Constant(_I1, int(bool(const.value)))
        number = float(const.value) if dtypes.is_float(const.dtype) else int(const.value)
        return ir.Constant(_llvm_type(const.dtype), number)

    def _load(self, load, guarded):
        buffer = load.tensor
        check_indices(buffer, access_indices(load))
        pointer = self._pointer_of(buffer)
        if self.vector is not None and any(self._mentions(index, self.vector[0]) for index in access_indices(load)):
            return self._vector_load(buffer, pointer, access_indices(load), guarded)
        # Under a lane mask every lane may be off, and with them the condition that kept the index valid.
        guarded = guarded or self.lane_guard is not None
        flat = self._flat_index(buffer, access_indices(load), guarded)
        return self._scalar_load(buffer, pointer, flat, guarded)

    def _binary(self, binary, guarded):
        a = self._convert(self.expr(binary.a, guarded), binary.dtype)
        b = self._convert(self.expr(binary.b, guarded), binary.dtype)
        a, b = self._unify(a, b)
        builder = self.builder
        if dtypes.is_float(binary.dtype) and binary.op in ("+", "-", "*", "/"):
            emit = {"+": builder.fadd, "-": builder.fsub, "*": builder.fmul, "/": builder.fdiv}[binary.op]
            return emit(a, b, flags=_CONTRACT)
        if dtypes.is_int(binary.dtype) and binary.op in ("+", "-", "*"):
            return self._integer({"+": "add", "-": "sub", "*": "mul"}[binary.op], a, b, self._index_flags())
        raise CodegenError(f"operator {binary.op!r} on {binary.dtype} reached the llvm back end unlegalised "
                           f"(codegen.legalize spells out //, %, max and min)")

    def _intrinsic_op(self, intrinsic, guarded):
        args = [self._convert(self.expr(arg, guarded), intrinsic.dtype) for arg in intrinsic.args]
        builder = self.builder
        if intrinsic.func in ("tdiv", "tmod"):
            return self._integer("sdiv" if intrinsic.func == "tdiv" else "srem", *args)
        if intrinsic.func == "fmod":
            return builder.frem(*self._unify(*args))
        if intrinsic.func == "floor":
            return self._intrinsic("llvm.floor", args[0])
        raise CodegenError(f"unknown intrinsic {intrinsic.func!r}")

    def _compare(self, compare, guarded):
        dtype = dtypes.promote(compare.a.dtype, compare.b.dtype)
        a = self._convert(self.expr(compare.a, guarded), dtype)
        b = self._convert(self.expr(compare.b, guarded), dtype)
        a, b = self._unify(a, b)
        if dtypes.is_float(dtype):
            if compare.op == "!=":
                return self.builder.fcmp_unordered("!=", a, b)    # as numpy: NaN != x holds
            return self.builder.fcmp_ordered(compare.op, a, b)
        if dtype == dtypes.BOOL:
            return self.builder.icmp_unsigned(compare.op, a, b)
        return self.builder.icmp_signed(compare.op, a, b)

    def _logical(self, logical, guarded):
        a = self.expr(logical.a, guarded)
        if logical.op == "~":
            return self.builder.not_(a)
        a, b = self._unify(a, self.expr(logical.b, guarded))
        return self.builder.and_(a, b) if logical.op == "&" else self.builder.or_(a, b)

    def _select(self, select, guarded):
        cond = self.expr(select.cond, guarded)
        when_true = self._convert(self.expr(select.true_value, True), select.dtype)
        when_false = self._convert(self.expr(select.false_value, True), select.dtype)
        when_true, when_false = self._unify(when_true, when_false)
        lanes = _lanes(cond)
        if lanes is not None:
            when_true, when_false = self._broadcast(when_true, lanes), self._broadcast(when_false, lanes)
        return self.builder.select(cond, when_true, when_false)

    def _call(self, call, guarded):
        arg = self._convert(self.expr(call.arg, guarded), call.dtype)
        if call.func in _FLOAT_MATH:
            return self._intrinsic(f"llvm.{call.func}", arg)
        if call.func == "abs" and dtypes.is_float(call.dtype):
            return self._intrinsic("llvm.fabs", arg)
        if call.func == "abs":
            negative = self.builder.icmp_signed("<", arg, _constant_like(arg, 0))
            return self.builder.select(negative, self.builder.sub(_constant_like(arg, 0), arg), arg)
        if call.func == "tanh":
            element = _llvm_type(call.dtype)
            tanh = self.mb.declare("tanhf" if call.dtype == "float32" else "tanh", element, [element])
            return self._per_lane(arg, lambda lane: self.builder.call(tanh, [lane]))
        raise CodegenError(f"unknown math function {call.func!r}")

    def _intrinsic(self, name, arg):
        """An LLVM math intrinsic on a float scalar or vector (the back end picks libm or instructions)."""
        function = self.mb.declare(f"{name}.{_intrinsic_suffix(arg.type)}", arg.type, [arg.type])
        return self.builder.call(function, [arg])

    def _cast(self, cast, guarded):
        return self._convert(self.expr(cast.value, guarded), cast.dtype)

    def _convert(self, value, dtype):
        """value as dtype (lane by lane for vectors), as numpy's astype does."""
        source = _dtype_of(value)
        if source == dtype:
            return value
        if dtype == dtypes.BOOL:
            raise CodegenError(f"cannot convert {source} to bool: compare with zero instead")
        target = _llvm_type(dtype, _lanes(value))
        builder = self.builder
        if source == dtypes.BOOL:
            return builder.uitofp(value, target) if dtypes.is_float(dtype) else builder.zext(value, target)
        if dtypes.is_float(source) and dtypes.is_float(dtype):
            return builder.fpext(value, target) if _BITS[dtype] > _BITS[source] else builder.fptrunc(value, target)
        if dtypes.is_float(source):
            return builder.fptosi(value, target)
        if dtypes.is_float(dtype):
            return builder.sitofp(value, target)
        return builder.sext(value, target) if _BITS[dtype] > _BITS[source] else builder.trunc(value, target)

    _HANDLERS = {IterVar: _var, Const: _const, Load: _load, Binary: _binary, Compare: _compare,
                 Logical: _logical, Select: _select, Call: _call, Cast: _cast, Intrinsic: _intrinsic_op}


