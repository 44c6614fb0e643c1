"""C-family source of the loop IR: one printer, with what a dialect (HLS C++, CUDA C) spells
its own way as small methods it overrides.

The printer prints legalised IR as it stands: codegen.legalize owns the meaning of //, % and
NaN-propagating max/min, so the printer refuses them. Every compound expression is
parenthesised, so C's precedence never decides a meaning. A Select prints as `c ? a : b`, which
evaluates only the taken branch: lowering's padding selects rely on it to guard their loads.

Hooks (override in a dialect): type_name, literal, math_function, index_type, signature,
prologue, loop_prefix, loop_pragmas, bound_loop, flattened, allocate, barrier.
"""

from __future__ import annotations

import math
import re
import struct

from flexsched import dtypes
from flexsched.affine import interval
from flexsched.errors import FlexschedError
from flexsched.expr import (Binary, Call, Cast, Compare, Const, Intrinsic, IterVar, Load, Logical, Select,
                            children, format_expr, walk)

from .ir import Allocate, Barrier, Buffer, For, IfThenElse, Seq, Store, walk_stmts

C_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long", "bool": "bool"}
GPU_LOOP_KINDS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "vthread", "threadIdx.x", "threadIdx.y", "threadIdx.z")
INT_RANGES = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}
_INT_SUFFIX = {"int32": "", "int64": "LL"}
# C99 <math.h> names per dtype: CUDA's device functions have the same ones.
_C_MATH = {"float32": {"abs": "fabsf"}, "float64": {"abs": "fabs"},
           "int32": {"abs": "abs"}, "int64": {"abs": "llabs"}}
# Identifiers C and C++ reserve: an IR name equal to one gets a trailing underscore.
_KEYWORDS = frozenset("""auto bool break case char class const continue default delete do double else enum
extern false float for goto if inline int long new operator private public register restrict return short
signed sizeof static struct switch template this true typedef union unsigned void volatile while""".split())


class CPrintError(FlexschedError, ValueError):
    """Loop IR a C dialect cannot print (the message names the dialect and the node)."""


def c_name(name):
    """A C identifier for an IR name (dots and pluses become underscores)."""
    ident = re.sub(r"\W", "_", name)
    ident = ident if not ident[:1].isdigit() else f"_{ident}"
    return f"{ident}_" if ident in _KEYWORDS else ident


def indices_fit_int32(func):
    """Whether every buffer of func (arguments and scratch) has fewer than 2^31 elements and
    every loop fewer than 2^31 iterations: then in-bounds index arithmetic fits a C int."""
    limit = 2**31
    buffers = list(func.params) + [s.buffer for s in walk_stmts(func.body) if isinstance(s, Allocate)]
    loops = [s for s in walk_stmts(func.body) if isinstance(s, For)]
    return all(b.size < limit for b in buffers) and all(loop.extent < limit for loop in loops)


def _float32(value):
    """value rounded to the nearest float32, as numpy stores a float32 constant."""
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


class CPrinter:
    """Loop IR (legalised) to C-family source; a dialect subclass overrides the hooks."""

    dialect = "C"          # names the dialect in errors
    indent_unit = "  "

    def __init__(self):
        self.index_dtype = "int64"
        self.loops = []    # the For statements around the one being printed, outermost first
        self._narrow_memo = {}

    # ------------------------------------------------------------------ kernel

    def function(self, func):
        """The kernel's definition: signature, prologue and body."""
        self.begin(func)
        unit = self.indent_unit
        lines = [f"{self.signature(func)} {{", *self.prologue(func, unit), *self.stmt(func.body, unit), "}"]
        return "\n".join(lines) + "\n"

    def begin(self, func):
        """Reset per-kernel state: the index type is decided once per kernel."""
        index = self.index_type(func)
        if index not in INT_RANGES:
            raise CPrintError(f"{self.dialect}: index type must be int32 or int64, got {index!r}")
        self.index_dtype = index
        self.loops = []
        self._narrow_memo = {}

    # ------------------------------------------------------------------ hooks

    def type_name(self, dtype):
        """The C type of a dtype."""
        try:
            return C_TYPES[dtype]
        except KeyError:
            raise CPrintError(f"{self.dialect}: no C type for dtype {dtype!r}") from None

    def literal(self, value, dtype):
        """A constant of dtype; negative ones parenthesised, so they are atoms."""
        if dtype == "bool":
            return "true" if value else "false"
        if dtypes.is_float(dtype):
            value = float(value) if dtype == "float64" else _float32(float(value))
            if math.isnan(value):
                return "NAN"
            if math.isinf(value):
                return "INFINITY" if value > 0 else "(-INFINITY)"
            text = repr(value) + ("f" if dtype == "float32" else "")
            return f"({text})" if value < 0 or text.startswith("-") else text
        value, suffix = int(value), _INT_SUFFIX[dtype]
        low, high = INT_RANGES[dtype]
        if not low <= value <= high:
            raise CPrintError(f"{self.dialect}: constant {value} does not fit {dtype}")
        if value == low:  # -2147483648 would be the negation of a wider literal
            return f"({low + 1}{suffix} - 1)"
        return f"({value}{suffix})" if value < 0 else f"{value}{suffix}"

    def math_function(self, func, dtype):
        """The name of a math function (a Call's, or intrinsic floor / fmod) on dtype."""
        name = _C_MATH.get(dtype, {}).get(func, func)
        return name + "f" if dtype == "float32" and func != "abs" else name

    def index_type(self, func):
        """The dtype int64 index arithmetic is printed in (loop variables are declared in it);
        a dialect may answer "int32" where indices_fit_int32(func) holds."""
        return "int64"

    def signature(self, func):
        """The kernel's C signature, without the brace."""
        params = ", ".join(f"{self.type_name(b.dtype)} *{c_name(b.name)}" for b in func.params)
        return f"void {c_name(func.name)}({params})"

    def prologue(self, func, indent):
        """Lines at the top of the kernel body (interfaces, thread indices)."""
        return []

    def loop_prefix(self, loop, indent):
        """Lines just before a loop's header (CUDA: #pragma unroll)."""
        return []

    def loop_pragmas(self, loop, indent):
        """Lines first in a loop's body (Vitis HLS: pipeline, unroll, dataflow)."""
        return []

    def bound_loop(self, loop, indent):
        """A loop bound to a GPU axis (blockIdx, threadIdx, vthread)."""
        raise CPrintError(f"{self.dialect}: loop '{loop.var.name}' is bound to {loop.kind}, "
                          f"which this dialect has no axis for")

    def flattened(self, buffer):
        """Whether a buffer is addressed as one row-major array (else as a C array of its shape)."""
        return buffer.scope == "global"

    def allocate(self, buffer, indent):
        """The declaration of scratch memory."""
        return [f"{indent}{self.type_name(buffer.dtype)} {c_name(buffer.name)}{self.dims(buffer)};"]

    def barrier(self, indent):
        """A block-wide barrier."""
        raise CPrintError(f"{self.dialect}: a barrier has no meaning here (no thread blocks)")

    # ------------------------------------------------------------------ statements

    def stmt(self, stmt, indent):
        """Lines of a statement."""
        if isinstance(stmt, Seq):
            return [line for part in stmt.stmts for line in self.stmt(part, indent)]
        if isinstance(stmt, For):
            return self.bound_loop(stmt, indent) if stmt.kind in GPU_LOOP_KINDS else self.loop(stmt, indent)
        if isinstance(stmt, Store):
            return [f"{indent}{self.access(stmt.buffer, stmt.indices)} = {self.expr(stmt.value, bare=True)};"]
        if isinstance(stmt, IfThenElse):
            lines = [f"{indent}if ({self.expr(stmt.cond, bare=True)}) {{",
                     *self.stmt(stmt.then_body, indent + self.indent_unit)]
            if stmt.else_body is not None:
                lines += [f"{indent}}} else {{", *self.stmt(stmt.else_body, indent + self.indent_unit)]
            return lines + [f"{indent}}}"]
        if isinstance(stmt, Allocate):
            return self.allocate(stmt.buffer, indent) + self.stmt(stmt.body, indent)
        if isinstance(stmt, Barrier):
            return self.barrier(indent)
        raise CPrintError(f"{self.dialect}: cannot print statement {type(stmt).__name__}")

    def loop(self, loop, indent):
        """A counted loop: prefix lines, header, pragmas, body."""
        var, ctype = c_name(loop.var.name), self.type_name(self.index_dtype)
        return [*self.loop_prefix(loop, indent),
                f"{indent}for ({ctype} {var} = 0; {var} < {loop.extent}; ++{var}) {{",
                *self.loop_pragmas(loop, indent + self.indent_unit),
                *self.inside(loop, indent + self.indent_unit),
                f"{indent}}}"]

    def inside(self, loop, indent):
        """The body of a loop, printed with the loop on the stack of enclosing loops."""
        self.loops.append(loop)
        try:
            return self.stmt(loop.body, indent)
        finally:
            self.loops.pop()

    # ------------------------------------------------------------------ buffers

    def dims(self, buffer):
        """The bracketed extents of a buffer's declaration."""
        if self.flattened(buffer):
            return f"[{buffer.size}]"
        return "".join(f"[{extent}]" for extent in buffer.shape)

    def access(self, buffer, indices):
        """An element of a buffer: row-major flattened or a multi-dimensional array access."""
        if not isinstance(buffer, Buffer):
            raise CPrintError(f"{self.dialect}: load of '{getattr(buffer, 'name', buffer)}' has no buffer")
        if len(indices) != buffer.ndim:
            raise CPrintError(f"{self.dialect}: buffer '{buffer.name}' has {buffer.ndim} dimensions, "
                              f"accessed with {len(indices)} indices")
        name = c_name(buffer.name)
        if not self.flattened(buffer):
            return name + "".join(f"[{self.expr(index, bare=True)}]" for index in indices)
        terms = []
        for dim, index in enumerate(indices):
            stride = math.prod(buffer.shape[dim + 1:])
            text = self._as(index, self._widest(index), bare=True)
            terms.append(f"({text}) * {stride}" if stride != 1 else f"({text})")
        return f"{name}[{' + '.join(terms) or '0'}]"

    def _widest(self, index):
        """The type a flattened index term is computed in: never narrower than the index type."""
        printed = self.printed_dtype(index)
        return self.index_dtype if printed == "int32" else printed

    # ------------------------------------------------------------------ expressions

    def expr(self, node, bare=False):
        """C text of an expression; a compound one is parenthesised unless bare."""
        text, compound = self._expr(node)
        return f"({text})" if compound and not bare else text

    def printed_dtype(self, node):
        """The dtype the text of node has in C: int64 index arithmetic may be narrowed."""
        if node.dtype == "int64" and self.index_dtype != "int64" and self._narrow(node):
            return self.index_dtype
        return node.dtype

    def _expr(self, node):
        """(text, compound) of an expression."""
        if isinstance(node, IterVar):
            return c_name(node.name), False
        if isinstance(node, Const):
            return self.literal(node.value, self.printed_dtype(node)), False
        if isinstance(node, Load):
            return self.access(node.tensor, node.indices), False
        if isinstance(node, Binary):
            if node.op not in ("+", "-", "*", "/"):
                raise CPrintError(f"{self.dialect}: operator '{node.op}' in '{format_expr(node)}' was not "
                                  f"legalised (print codegen.legalize.legalize(func))")
            dtype = self.printed_dtype(node)
            return f"{self._as(node.a, dtype)} {node.op} {self._as(node.b, dtype)}", True
        if isinstance(node, Compare):
            return f"{self.expr(node.a)} {node.op} {self.expr(node.b)}", True
        if isinstance(node, Logical):
            if node.op == "~":
                return f"!{self.expr(node.a)}", True
            return f"{self.expr(node.a)} {'&&' if node.op == '&' else '||'} {self.expr(node.b)}", True
        if isinstance(node, Select):
            dtype = self.printed_dtype(node)
            return (f"{self.expr(node.cond)} ? {self._as(node.true_value, dtype)} : "
                    f"{self._as(node.false_value, dtype)}"), True
        if isinstance(node, Call):
            return f"{self.math_function(node.func, node.dtype)}({self._as(node.arg, node.dtype, bare=True)})", False
        if isinstance(node, Cast):
            return f"({self.type_name(node.dtype)}){self.expr(node.value)}", True
        if isinstance(node, Intrinsic):
            return self._intrinsic(node)
        raise CPrintError(f"{self.dialect}: cannot print expression {type(node).__name__}")

    def _intrinsic(self, node):
        if node.func in ("tdiv", "tmod"):  # legalisation kept the divisor away from 0 and -1
            dtype = self.printed_dtype(node)
            a, b = (self._as(arg, dtype) for arg in node.args)
            return f"{a} {'/' if node.func == 'tdiv' else '%'} {b}", True
        if node.func in ("floor", "fmod"):
            args = ", ".join(self._as(arg, node.dtype, bare=True) for arg in node.args)
            return f"{self.math_function(node.func, node.dtype)}({args})", False
        raise CPrintError(f"{self.dialect}: unknown intrinsic {node.func!r}")

    def _as(self, node, dtype, bare=False):
        """An operand in dtype: a constant printed in it, another cast where it differs."""
        if self.printed_dtype(node) == dtype:
            return self.expr(node, bare)
        if isinstance(node, Const) and node.dtype != "bool":
            return self.literal(_float32(node.value) if node.dtype == "float32" else node.value, dtype)
        text = f"({self.type_name(dtype)}){self.expr(node)}"
        return text if bare else f"({text})"

    def _narrow(self, node):
        """Whether an integer expression is index arithmetic (loop variables and constants, no
        loads) whose every intermediate value fits the index type."""
        hit = self._narrow_memo.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        result = self._narrow_uncached(node)
        self._narrow_memo[id(node)] = (node, result)  # holding node keeps its id unique
        return result

    def _narrow_uncached(self, node):
        if not dtypes.is_int(node.dtype):
            return False
        if isinstance(node, IterVar):
            return True  # declared in the index type
        if isinstance(node, Const):
            return self._fits((node.value, node.value))
        if isinstance(node, Cast):
            return dtypes.is_int(node.value.dtype) and self._narrow(node.value)
        if isinstance(node, Select):
            if any(isinstance(part, Load) for part in walk(node.cond)):
                return False
            operands = (node.true_value, node.false_value)
        elif (isinstance(node, Binary) and node.op in ("+", "-", "*")
              or isinstance(node, Intrinsic) and node.func in ("tdiv", "tmod")):
            operands = children(node)
        else:
            return False
        return all(self._narrow(operand) for operand in operands) and self._fits(interval(node))

    def _fits(self, bounds):
        low, high = INT_RANGES[self.index_dtype]
        return bounds is not None and low <= bounds[0] and bounds[1] <= high
