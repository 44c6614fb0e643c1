"""Heap scratch kept from call to call: each allocation site of an LLVM module keeps, in a few
lock-free slots, the buffers that parallel chunks give back, for the chunks of later calls.

Allocated and freed on every call, a chunk's large scratch touched fresh pages whenever the
allocator had unmapped the freed block (glibc does for blocks past its mmap threshold, which it
raises only after such a free, and always past 32 MiB): with the threshold held at its default, a
searched YOLO C6 kernel (a 2 MB padded slab per chunk) ran 4x slower, 10,824 page faults a call.
Kept, later calls fault in nothing whatever the allocator's state.

take_scratch(slots, bytes) looks at each slot and takes a kept buffer with an atomic exchange, or
allocates one and zeroes it; give_scratch(slots, buffer) puts it into an empty slot with a compare-and-swap, or
frees it when every slot is full. Both stay out of line: the kernel keeps no copy of their loops,
and take_scratch's noalias return keeps two scratch buffers apart in LLVM's eyes, as malloc's did.
release_scratch() frees every kept buffer; the host calls it before it drops the code.

Zeroed, because a vector's lanes past a row's end are computed though never stored: freed memory
holds pointers, whose high halves read as denormal floats, and each operation on one is a microcode
assist. A YOLO C11 schedule whose 28-pixel tiles end in such lanes ran 9 GFLOPS on dirty memory
and 211 on zeroed (AVX-512), and which it got depended on what the process had freed before.
"""

from __future__ import annotations

from codegen import llvm_text as ir

# Buffers each allocation site keeps: more than the chunks that run at once on most hosts (one per
# pool thread); a chunk that finds every slot empty allocates its own.
SCRATCH_SLOTS = 16
TAKE_SCRATCH, GIVE_SCRATCH, RELEASE_SCRATCH = "take_scratch", "give_scratch", "release_scratch"

_I64 = ir.IntType(64)
_PTR = ir.PointerType()
_NULL = ir.Constant(_PTR, None)


class KeptScratch:
    """The kept-scratch sites of one module and the functions that take, give back and free."""

    def __init__(self, module_builder, align):
        self.mb = module_builder
        self.align = align      # each buffer starts on a multiple of this many bytes
        self.sites = []         # each allocation site's slots
        self._take = self._give = None

    def take(self, builder, nbytes, name):
        """(the new site's slots, its buffer of nbytes), taken at the builder's position."""
        if self._take is None:
            self._take, self._give = self._take_function(), self._give_function()
        slots = ir.GlobalVariable(self.mb.module, ir.ArrayType(_PTR, SCRATCH_SLOTS),
                                  name=f"scratch_slots_{len(self.sites)}")
        slots.linkage = "internal"
        slots.initializer = ir.Constant(slots.value_type, None)
        slots.align = 64
        self.sites.append(slots)
        return slots, builder.call(self._take, [slots, ir.Constant(_I64, nbytes)], name=name)

    def give(self, builder, slots, buffer):
        """Give a buffer that take() returned back to its site, at the builder's position."""
        builder.call(self._give, [slots, buffer])

    def emit_release(self):
        """void release_scratch(): frees every buffer the module's sites keep."""
        release = ir.Function(self.mb.module, ir.FunctionType(ir.VoidType(), []), name=RELEASE_SCRATCH)
        release.attributes.add("nounwind")
        builder = self.mb.ir_builder(release.append_basic_block("entry"))
        if self.sites:
            free = self.mb.declare("free", ir.VoidType(), [_PTR])

            def free_kept(builder, slot, following):
                builder.call(free, [builder.atomic_rmw("xchg", slot, _NULL, "acquire")])
                builder.branch(following)

            for slots in self.sites:
                _each_slot(builder, slots, free_kept, lambda builder: None)
        builder.ret_void()

    def _helper(self, name, return_type, arg_types):
        function = ir.Function(self.mb.module, ir.FunctionType(return_type, arg_types), name=name)
        function.linkage = "internal"
        function.attributes.add("noinline")
        function.attributes.add("nounwind")
        return function, self.mb.ir_builder(function.append_basic_block("entry"))

    def _take_function(self):
        take, builder = self._helper(TAKE_SCRATCH, _PTR, [_PTR, _I64])
        take.return_value.attributes.add("noalias")
        take.return_value.attributes.align = self.align
        slots, nbytes = take.args
        aligned_alloc = self.mb.declare("aligned_alloc", _PTR, [_I64, _I64])

        def take_kept(builder, slot, following):
            kept = builder.load_atomic(slot, "monotonic", 8, typ=_PTR)   # a plain look: no locked instruction
            grab = builder.function.append_basic_block("grab")
            builder.cbranch(builder.icmp_unsigned("!=", kept, _NULL), grab, following)
            builder.position_at_end(grab)
            taken = builder.atomic_rmw("xchg", slot, _NULL, "acquire")
            found = builder.function.append_basic_block("found")
            builder.cbranch(builder.icmp_unsigned("!=", taken, _NULL), found, following)   # another chunk took it
            builder.position_at_end(found)
            builder.ret(taken)

        memset = self.mb.declare("memset", _PTR, [_PTR, ir.IntType(32), _I64])

        def allocate(builder):
            fresh = builder.call(aligned_alloc, [ir.Constant(_I64, self.align), nbytes])
            builder.call(memset, [fresh, ir.Constant(ir.IntType(32), 0), nbytes])
            builder.ret(fresh)

        _each_slot(builder, slots, take_kept, allocate)
        return take

    def _give_function(self):
        give, builder = self._helper(GIVE_SCRATCH, ir.VoidType(), [_PTR, _PTR])
        slots, buffer = give.args
        free = self.mb.declare("free", ir.VoidType(), [_PTR])

        def keep(builder, slot, following):
            kept = builder.load_atomic(slot, "monotonic", 8, typ=_PTR)
            empty = builder.function.append_basic_block("empty")
            builder.cbranch(builder.icmp_unsigned("==", kept, _NULL), empty, following)
            builder.position_at_end(empty)
            swapped = builder.cmpxchg(slot, _NULL, buffer, "release", "monotonic")
            stored = builder.function.append_basic_block("stored")
            builder.cbranch(builder.extract_value(swapped, 1), stored, following)   # another chunk filled it
            builder.position_at_end(stored)
            builder.ret_void()

        def free_it(builder):   # every slot full: more chunks ran at once than are kept
            builder.call(free, [buffer])
            builder.ret_void()

        _each_slot(builder, slots, keep, free_it)
        return give


def _each_slot(builder, slots, visit, after):
    """Emit `for i < SCRATCH_SLOTS: visit(builder, &slots[i], next)`, then after(builder) once past
    the last; visit branches to `next` for the following slot (or returns)."""
    function = builder.function
    loop, following, done = (function.append_basic_block(name) for name in ("slot", "next", "none_left"))
    start = builder.block
    builder.branch(loop)
    builder.position_at_end(loop)
    index = builder.phi(_I64, name="i")
    index.add_incoming(ir.Constant(_I64, 0), start)
    slot = builder.gep(slots, [index], inbounds=True, source_etype=_PTR)
    visit(builder, slot, following)
    builder.position_at_end(following)
    step = builder.add(index, ir.Constant(_I64, 1), flags=("nsw",))
    index.add_incoming(step, following)
    builder.cbranch(builder.icmp_unsigned("==", step, ir.Constant(_I64, SCRATCH_SLOTS)), done, loop)
    builder.position_at_end(done)
    after(builder)
