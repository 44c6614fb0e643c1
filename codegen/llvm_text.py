"""LLVM IR written as text while it is built: the part of llvmlite.ir's builder API the CPU back end
uses, with each instruction a line of text rather than an object graph.

llvmlite.ir keeps every instruction as objects that point at their block and function, so a
module's tens of thousands of them are cycles the collector must find, and printing the module walks
them all again. On YOLO C1's candidates building, printing and collecting those objects took about
as long as LLVM's -O3 on the result; here a value is its type and its name, a block a list of lines.
The names, types and methods follow llvmlite.ir, so the emitter reads as it did.
"""

from __future__ import annotations

import contextlib
import struct

# ---------------------------------------------------------------- types


class Type:
    """An LLVM type, compared and hashed by its text."""

    __slots__ = ("text",)

    def __str__(self):
        return self.text

    def __eq__(self, other):
        return isinstance(other, Type) and other.text == self.text

    def __hash__(self):
        return hash(self.text)

    def __repr__(self):
        return f"<{type(self).__name__} {self.text}>"


class VoidType(Type):
    __slots__ = ()

    def __init__(self):
        self.text = "void"


class IntType(Type):
    __slots__ = ("width",)

    def __init__(self, width):
        self.width = width
        self.text = f"i{width}"


class FloatType(Type):
    __slots__ = ()

    def __init__(self):
        self.text = "float"


class DoubleType(Type):
    __slots__ = ()

    def __init__(self):
        self.text = "double"


class PointerType(Type):
    """An opaque pointer (`ptr`)."""

    __slots__ = ()

    def __init__(self):
        self.text = "ptr"


class _SequenceType(Type):
    """count elements of one type, written between the subclass's brackets (its constants too)."""

    __slots__ = ("element", "count")
    brackets = ""

    def __init__(self, element, count):
        self.element = element
        self.count = count
        self.text = f"{self.brackets[0]}{count} x {element.text}{self.brackets[1]}"


class VectorType(_SequenceType):
    __slots__ = ()
    brackets = "<>"


class ArrayType(_SequenceType):
    __slots__ = ()
    brackets = "[]"


class LiteralStructType(Type):
    __slots__ = ("elements",)

    def __init__(self, elements):
        self.elements = tuple(elements)
        self.text = "{" + ", ".join(element.text for element in self.elements) + "}"


class FunctionType(Type):
    __slots__ = ("return_type", "args")

    def __init__(self, return_type, args):
        self.return_type = return_type
        self.args = tuple(args)
        self.text = f"{return_type.text} ({', '.join(arg.text for arg in self.args)})"


_I1, _PTR = IntType(1), PointerType()

# ---------------------------------------------------------------- values


class Value:
    """A value: its type and how an operand refers to it (`ref`)."""

    __slots__ = ("type", "ref")

    def __init__(self, type_, ref):
        self.type = type_
        self.ref = ref

    @property
    def operand(self):
        return f"{self.type.text} {self.ref}"

    def __str__(self):
        return self.operand


class Constant(Value):
    """A constant of a type: an integer, a float, None (zero or null), or a vector's or array's list."""

    __slots__ = ("constant",)

    def __init__(self, type_, constant):
        super().__init__(type_, _constant_text(type_, constant))
        self.constant = constant


def _constant_text(type_, value):
    if isinstance(type_, _SequenceType):
        if value is None:
            return "zeroinitializer"
        element = type_.element
        items = ", ".join(f"{element.text} {_constant_text(element, item)}" for item in value)
        return f"{type_.brackets[0]}{items}{type_.brackets[1]}"
    if isinstance(type_, PointerType):
        if value is not None:
            raise ValueError(f"a pointer constant can only be null, not {value!r}")
        return "null"
    if isinstance(type_, IntType):
        number = 0 if value is None else int(value)
        return ("true" if number & 1 else "false") if type_.width == 1 else str(number)
    if isinstance(type_, (FloatType, DoubleType)):
        number = 0.0 if value is None else float(value)   # not `value or 0.0`: that loses -0.0
        if isinstance(type_, FloatType):   # LLVM wants a float's exact value, written as a double
            try:
                number = struct.unpack("<f", struct.pack("<f", number))[0]
            except OverflowError:          # past float's range: it rounds to infinity
                number = float("inf") if number > 0 else float("-inf")
        return "0x%016X" % struct.unpack("<Q", struct.pack("<d", number))[0]
    raise ValueError(f"no constants of type {type_}")


class Argument(Value):
    """A function parameter; its name may be set until the first instruction refers to it."""

    __slots__ = ("_function", "_name", "attributes")

    def __init__(self, function, type_, index):
        self._function = function
        self.attributes = []
        super().__init__(type_, "")
        self.name = f".{index + 1}"

    @property
    def name(self):
        return self._name

    @name.setter
    def name(self, name):
        self._name = self._function.scope.unique(name)
        self.ref = _local(self._name)

    def add_attribute(self, attribute):
        self.attributes.append(attribute)


class AllocaInstr(Value):
    """A stack slot: a pointer, its line written when the module is (its alignment may be set later)."""

    __slots__ = ("allocated", "align")

    def __init__(self, ref, allocated):
        super().__init__(_PTR, ref)
        self.allocated = allocated
        self.align = None

    def line(self):
        return f"{self.ref} = alloca {self.allocated.text}" + (f", align {self.align}" if self.align else "")


class PhiInstr(Value):
    """A phi node, its incoming values added as the blocks that give them are emitted."""

    __slots__ = ("incoming",)

    def __init__(self, type_, ref):
        super().__init__(type_, ref)
        self.incoming = []

    def add_incoming(self, value, block):
        self.incoming.append(f"[{value.ref}, {block.local}]")

    def line(self):
        return f"{self.ref} = phi {self.type.text} {', '.join(self.incoming)}"


class Terminator:
    """A block's last instruction, to which loop metadata may still be attached."""

    __slots__ = ("text", "metadata")

    def __init__(self, text):
        self.text = text
        self.metadata = ""

    def set_metadata(self, kind, node):
        self.metadata += f", !{kind} {node.ref}"

    def line(self):
        return self.text + self.metadata


class MDValue:
    """A numbered metadata node of a module."""

    __slots__ = ("ref",)

    def __init__(self, ref):
        self.ref = ref


# ---------------------------------------------------------------- names


class _Scope:
    """Names in one function (or of a module's globals), each made unique by a numeric suffix."""

    __slots__ = ("used", "counter")

    def __init__(self):
        self.used = {}
        self.counter = 0

    def unique(self, name):
        if not name:
            self.counter += 1
            name = f".{self.counter}"
        count = self.used.get(name)
        if count is None:
            self.used[name] = 0
            return name
        while True:
            count += 1
            candidate = f"{name}.{count}"
            if candidate not in self.used:
                self.used[name] = count
                self.used[candidate] = 0
                return candidate


def _quoted(name):
    return '"' + name.replace("\\", "\\5C").replace('"', "\\22") + '"'


def _local(name):
    return "%" + _quoted(name)


# ---------------------------------------------------------------- module, functions, blocks


class Module:
    """Globals, functions and metadata, written out by str()."""

    def __init__(self, name=""):
        self.name = name
        self.triple = ""
        self.data_layout = ""
        self.globals = {}     # name -> Function or GlobalVariable, in order of creation
        self.metadata = []    # lines of the numbered metadata nodes
        self.scope = _Scope()

    def add_metadata(self, operands):
        """A metadata node of strings (str) and nodes (MDValue)."""
        return self._node([_metadata_operand(operand) for operand in operands])

    def loop_id(self, *operands):
        """A loop ID: a node whose first operand is itself, as LLVM wants for !llvm.loop."""
        ref = f"!{len(self.metadata)}"
        return self._node([ref, *(_metadata_operand(operand) for operand in operands)], distinct=True)

    def _node(self, operands, distinct=False):
        ref = f"!{len(self.metadata)}"
        self.metadata.append(f"{ref} = {'distinct ' if distinct else ''}!{{{', '.join(operands)}}}")
        return MDValue(ref)

    def __str__(self):
        lines = [f"; ModuleID = {_quoted(self.name)}", f'target triple = "{self.triple}"',
                 f'target datalayout = "{self.data_layout}"', ""]
        lines += [str(item) for item in self.globals.values()]
        lines += self.metadata
        return "\n".join(lines) + "\n"


def _metadata_operand(operand):
    if isinstance(operand, str):
        return "!" + _quoted(operand)
    return operand.ref


class GlobalVariable(Value):
    """A module-level variable; its value is a pointer to it."""

    def __init__(self, module, value_type, name):
        name = module.scope.unique(name)
        super().__init__(_PTR, "@" + _quoted(name))
        self.name = name
        self.value_type = value_type
        self.linkage = ""
        self.initializer = None
        self.align = None
        module.globals[name] = self

    def __str__(self):
        linkage = f"{self.linkage} " if self.linkage else ""
        initial = self.initializer.ref if self.initializer is not None else "zeroinitializer"
        return (f"{self.ref} = {linkage}global {self.value_type.text} {initial}"
                + (f", align {self.align}" if self.align else ""))


class _ReturnValue:
    """A function's return value: its attributes (noalias, ...) and alignment."""

    def __init__(self):
        self.attributes = _Attributes()


class Function(Value):
    """A function: a definition once it has blocks, a declaration otherwise."""

    def __init__(self, module, ftype, name):
        name = module.scope.unique(name)
        super().__init__(_PTR, "@" + _quoted(name))
        self.name = name
        self.function_type = ftype
        self.module = module
        self.linkage = ""
        self.attributes = _Attributes()
        self.return_value = _ReturnValue()
        self.scope = _Scope()
        self.args = tuple(Argument(self, arg_type, index) for index, arg_type in enumerate(ftype.args))
        self.blocks = []
        # Every value defined here, alive as long as the function: the emitter caches values by
        # id(), which a freed value would hand to the next one made (llvmlite's blocks held theirs).
        self.values = []
        module.globals[name] = self

    def keep(self, value):
        """value, held by the function for as long as the function lives."""
        self.values.append(value)
        return value

    def append_basic_block(self, name=""):
        block = Block(self, self.scope.unique(name))
        self.blocks.append(block)
        return block

    def __str__(self):
        ftype = self.function_type
        returned = ftype.return_type.text
        returned_attributes = self.return_value.attributes
        if returned_attributes.align:
            returned = f"align {returned_attributes.align} {returned}"
        returned = "".join(f"{attribute} " for attribute in returned_attributes) + returned
        attributes = "".join(f" {attribute}" for attribute in self.attributes)
        if not self.blocks:
            return f"declare {returned} {self.ref}({', '.join(arg.text for arg in ftype.args)}){attributes}\n"
        params = ", ".join(" ".join([arg.type.text, *arg.attributes, arg.ref]) for arg in self.args)
        linkage = f"{self.linkage} " if self.linkage else ""
        lines = [f"define {linkage}{returned} {self.ref}({params}){attributes}", "{"]
        for block in self.blocks:
            lines.append(f"{_quoted(block.name)}:")
            lines += ["  " + (line if isinstance(line, str) else line.line()) for line in block.lines]
        lines.append("}\n")
        return "\n".join(lines)


class _Attributes(list):
    """Attributes in the order added, each once; `align`, where set, is written apart."""

    align = None

    def add(self, attribute):
        if attribute not in self:
            self.append(attribute)


class Block:
    """A basic block: its name, and its instructions as lines (or objects that write their line)."""

    __slots__ = ("function", "name", "local", "ref", "lines", "terminator")

    def __init__(self, function, name):
        self.function = function
        self.name = name
        self.local = _local(name)    # as a phi names it
        self.ref = "label " + self.local
        self.lines = []
        self.terminator = None

    @property
    def is_terminated(self):
        return self.terminator is not None


# ---------------------------------------------------------------- the builder

_SIGNED = {"<": "slt", "<=": "sle", "==": "eq", "!=": "ne", ">": "sgt", ">=": "sge"}
_UNSIGNED = {"<": "ult", "<=": "ule", "==": "eq", "!=": "ne", ">": "ugt", ">=": "uge"}
_ORDERED = {"<": "olt", "<=": "ole", "==": "oeq", "!=": "one", ">": "ogt", ">=": "oge", "ord": "ord", "uno": "uno"}
_UNORDERED = {"<": "ult", "<=": "ule", "==": "ueq", "!=": "une", ">": "ugt", ">=": "uge", "ord": "ord", "uno": "uno"}


def _flags(flags):
    return "".join(f" {flag}" for flag in flags)


def _compared(type_):
    """The i1 type, or a vector of it, that comparing values of type_ gives."""
    return VectorType(_I1, type_.count) if isinstance(type_, VectorType) else _I1


def _label_suffix(name, suffix):
    """A block name derived from another, kept short as llvmlite keeps it (nested ifs would grow it)."""
    if len(name) > 50:
        name = name[:25] + ".." + name[-22:]
    return name + suffix


def _binary(opname):
    """An IRBuilder method for a two-operand instruction (its flags after the opcode)."""
    def emit(self, a, b, name="", flags=()):
        return self._define(a.type, name, f"{opname}{_flags(flags)} {a.type.text} {a.ref}, {b.ref}")
    emit.__name__ = opname
    return emit


def _cast(opname):
    """An IRBuilder method for a conversion to a type."""
    def emit(self, value, type_, name=""):
        return self._define(type_, name, f"{opname} {value.operand} to {type_.text}")
    emit.__name__ = opname
    return emit


class IRBuilder:
    """Appends instructions at the end of a block; each method returns the value it defines."""

    def __init__(self, block=None):
        self.block = block

    function = property(lambda self: self.block.function)

    def position_at_end(self, block):
        self.block = block

    def append_basic_block(self, name=""):
        return self.block.function.append_basic_block(name)

    def _insert(self, line):
        self.block.lines.append(line)

    def _define(self, type_, name, text):
        function = self.block.function
        ref = _local(function.scope.unique(name))
        self._insert(f"{ref} = {text}")
        return function.keep(Value(type_, ref))

    # arithmetic
    add, sub, mul, sdiv, srem = map(_binary, ("add", "sub", "mul", "sdiv", "srem"))
    and_, or_, xor = map(_binary, ("and", "or", "xor"))
    fadd, fsub, fmul, fdiv, frem = map(_binary, ("fadd", "fsub", "fmul", "fdiv", "frem"))

    def not_(self, value, name=""):
        type_ = value.type
        element = type_.element if isinstance(type_, VectorType) else type_
        ones = -1 if element.width > 1 else 1
        all_ones = Constant(type_, [ones] * type_.count) if isinstance(type_, VectorType) else Constant(type_, ones)
        return self.xor(value, all_ones, name=name)

    def _compare(self, table, opname, op, a, b, name, flags=()):
        return self._define(_compared(a.type), name, f"{opname}{_flags(flags)} {table[op]} {a.type.text} {a.ref}, {b.ref}")

    def icmp_signed(self, op, a, b, name=""):
        return self._compare(_SIGNED, "icmp", op, a, b, name)

    def icmp_unsigned(self, op, a, b, name=""):
        return self._compare(_UNSIGNED, "icmp", op, a, b, name)

    def fcmp_ordered(self, op, a, b, name="", flags=()):
        return self._compare(_ORDERED, "fcmp", op, a, b, name, flags)

    def fcmp_unordered(self, op, a, b, name="", flags=()):
        return self._compare(_UNORDERED, "fcmp", op, a, b, name, flags)

    def select(self, cond, a, b, name="", flags=()):
        return self._define(a.type, name, f"select{_flags(flags)} {cond.operand}, {a.operand}, {b.operand}")

    # conversions
    trunc, zext, sext, fptrunc, fpext = map(_cast, ("trunc", "zext", "sext", "fptrunc", "fpext"))
    fptosi, sitofp, uitofp = map(_cast, ("fptosi", "sitofp", "uitofp"))

    # memory
    def alloca(self, type_, name=""):
        slot = AllocaInstr(_local(self.block.function.scope.unique(name)), type_)
        self._insert(slot)
        return self.block.function.keep(slot)

    def load(self, ptr, name="", align=None, typ=None):
        aligned = f", align {align}" if align else ""
        return self._define(typ, name, f"load {typ.text}, {ptr.operand}{aligned}")

    def store(self, value, ptr, align=None):
        self._insert(f"store {value.operand}, {ptr.operand}" + (f", align {align}" if align else ""))

    def load_atomic(self, ptr, ordering, align, name="", typ=None):
        return self._define(typ, name, f"load atomic {typ.text}, {ptr.operand} {ordering}, align {align}")

    def atomic_rmw(self, op, ptr, value, ordering, name=""):
        return self._define(value.type, name, f"atomicrmw {op} {ptr.operand}, {value.operand} {ordering}")

    def cmpxchg(self, ptr, cmp, value, ordering, failordering, name=""):
        type_ = LiteralStructType([value.type, _I1])
        return self._define(type_, name, f"cmpxchg {ptr.operand}, {cmp.operand}, {value.operand} {ordering} {failordering}")

    def gep(self, ptr, indices, inbounds=False, name="", source_etype=None):
        kind = "getelementptr inbounds" if inbounds else "getelementptr"
        operands = ", ".join(index.operand for index in indices)
        return self._define(_PTR, name, f"{kind} {source_etype.text}, {ptr.operand}, {operands}")

    # vectors and aggregates
    def extract_element(self, vector, index, name=""):
        return self._define(vector.type.element, name, f"extractelement {vector.operand}, {index.operand}")

    def insert_element(self, vector, value, index, name=""):
        return self._define(vector.type, name, f"insertelement {vector.operand}, {value.operand}, {index.operand}")

    def shuffle_vector(self, a, b, mask, name=""):
        type_ = VectorType(a.type.element, mask.type.count)
        return self._define(type_, name, f"shufflevector {a.operand}, {b.operand}, {mask.operand}")

    def extract_value(self, aggregate, index, name=""):
        return self._define(aggregate.type.elements[index], name, f"extractvalue {aggregate.operand}, {index}")

    # calls
    def call(self, function, args, name=""):
        ftype = function.function_type
        text = f"call {ftype.return_type.text} {function.ref}({', '.join(arg.operand for arg in args)})"
        if isinstance(ftype.return_type, VoidType):
            self._insert(text)
            return None
        return self._define(ftype.return_type, name, text)

    def asm(self, ftype, asm, constraint, args, side_effect, name=""):
        effect = " sideeffect" if side_effect else ""
        text = (f"call {ftype.return_type.text} asm{effect} {_quoted(asm)}, {_quoted(constraint)}"
                f"({', '.join(arg.operand for arg in args)})")
        if isinstance(ftype.return_type, VoidType):
            self._insert(text)
            return None
        return self._define(ftype.return_type, name, text)

    # control flow
    def phi(self, type_, name=""):
        node = PhiInstr(type_, _local(self.block.function.scope.unique(name)))
        self._insert(node)
        return self.block.function.keep(node)

    def _terminate(self, text):
        terminator = Terminator(text)
        self._insert(terminator)
        self.block.terminator = terminator
        return terminator

    def branch(self, target):
        return self._terminate(f"br {target.ref}")

    def cbranch(self, cond, truebr, falsebr):
        return self._terminate(f"br {cond.operand}, {truebr.ref}, {falsebr.ref}")

    def ret_void(self):
        return self._terminate("ret void")

    def ret(self, value):
        return self._terminate(f"ret {value.operand}")

    @contextlib.contextmanager
    def _branch_helper(self, enter, leave):
        self.position_at_end(enter)
        yield leave
        if not self.block.is_terminated:
            self.branch(leave)

    @contextlib.contextmanager
    def if_then(self, pred):
        """Code emitted inside runs where pred holds; after, the builder is past the join."""
        name = self.block.name
        then, after = self.append_basic_block(_label_suffix(name, ".if")), self.append_basic_block(_label_suffix(name, ".endif"))
        self.cbranch(pred, then, after)
        with self._branch_helper(then, after):
            yield after
        self.position_at_end(after)

    @contextlib.contextmanager
    def if_else(self, pred):
        """(then, otherwise): two context managers for the two branches; after, the builder is past the join."""
        name = self.block.name
        then = self.append_basic_block(_label_suffix(name, ".if"))
        otherwise = self.append_basic_block(_label_suffix(name, ".else"))
        after = self.append_basic_block(_label_suffix(name, ".endif"))
        self.cbranch(pred, then, otherwise)
        yield self._branch_helper(then, after), self._branch_helper(otherwise, after)
        self.position_at_end(after)
