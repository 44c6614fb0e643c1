"""HLS C++ of an FPGA design (Vitis HLS style), printed from the lowered loop IR.

The design's schedule is restated with caches (codegen.hls_schedule) and lowered by the same
lowering the CPU back end uses, so the on-chip buffers, their regions and the boundary guards
are the ones already checked there. This printer adds what Vitis HLS needs: m_axi interfaces,
`pipeline` on the pipelined tile loop (and on the innermost loop of each copy, for burst
transfers), `unroll` on the PE loops, cyclic `array_partition` of buffers by the PE lanes, and
`dataflow` over each output tile's read / compute / write regions. The pragmas are ignored by
g++, so the same file runs as a C simulation.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

from analysis import analyze
from flexsched import dtypes
from flexsched.expr import Binary, Call, Cast, Compare, Const, IterVar, Load, Logical, Select

from .hls_schedule import hls_plan
from .ir import Allocate, For, IfThenElse, Seq, Store
from .lower import lower

C_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long", "bool": "bool"}

HELPERS = """\
#ifndef FLEXSCHED_HLS_HELPERS
#define FLEXSCHED_HLS_HELPERS
#include <cmath>
#include <cstdio>
#include <cstdlib>
// Python's floor division and modulo (the DSL's // and %); a zero divisor gives 0, as numpy.
template <typename T> static inline T fs_floordiv(T a, T b) {
  if (b == 0) return 0;
  T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> static inline T fs_floormod(T a, T b) {
  if (b == 0) return 0;
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline double fs_fmod(double a, double b) {
  double r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
// numpy's maximum / minimum: NaN wins.
template <typename T> static inline T fs_max(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> static inline T fs_min(T a, T b) { return (a != a || a < b) ? a : b; }
#endif
"""


@dataclass(frozen=True)
class HlsSources:
    """The files of one design: the kernel, its header and a C-simulation testbench."""

    name: str
    kernel: str       # <name>.cpp
    header: str       # <name>.h
    testbench: str    # <name>_tb.cpp: reads <dir>/<input>.bin, writes <dir>/<output>.out
    inputs: tuple     # (name, shape, dtype) in argument order
    outputs: tuple

    def files(self):
        return {f"{self.name}.cpp": self.kernel, f"{self.name}.h": self.header, f"{self.name}_tb.cpp": self.testbench}

    def write(self, directory):
        os.makedirs(directory, exist_ok=True)
        paths = []
        for file_name, text in self.files().items():
            path = os.path.join(directory, file_name)
            with open(path, "w") as out:
                out.write(text)
            paths.append(path)
        return paths


def c_name(name):
    """A C identifier for an IR name (dots and pluses become underscores)."""
    ident = re.sub(r"\W", "_", name)
    return ident if not ident[:1].isdigit() else f"_{ident}"


def emit_hls(task, schedule, name=None, info=None):
    """HlsSources of a task under an FPGA schedule (a point of an fpga space)."""
    info = info or analyze(task)
    plan = hls_plan(info, schedule)
    state = plan.schedule.apply(info)
    name = c_name(name or task.name.lower())
    lowered = lower(task, state, name)
    printer = _Printer(plan, state, info)
    return HlsSources(name, printer.kernel(lowered), _header(lowered), _testbench(lowered),
                      tuple((b.name, b.shape, b.dtype) for b in lowered.func.params[:len(lowered.inputs)]),
                      tuple((b.name, b.shape, b.dtype) for b in lowered.func.params[len(lowered.inputs):]
                            [:len(lowered.outputs)]))


def _signature(lowered):
    count = len(lowered.inputs)
    params = [f"{'const ' if i < count else ''}{C_TYPES[b.dtype]} *{c_name(b.name)}"
              for i, b in enumerate(lowered.func.params)]
    return f'extern "C" void {lowered.func.name}({", ".join(params)})'


def _header(lowered):
    guard = f"{lowered.func.name.upper()}_H"
    shapes = "\n".join(f"// {b.name}: {C_TYPES[b.dtype]}{list(b.shape)}"
                       + (" (workspace)" if b in lowered.workspaces else "") for b in lowered.func.params)
    return f"#ifndef {guard}\n#define {guard}\n{shapes}\n{_signature(lowered)};\n#endif\n"


def _testbench(lowered):
    """main(dir): inputs from <dir>/<name>.bin (raw, row-major), outputs to <dir>/<name>.out."""
    func, name = lowered.func, lowered.func.name
    lines = [f'#include "{name}.h"', "#include <cstdio>", "#include <cstdlib>", "#include <string>", "",
             f"int {name}_run(const char *dir) {{"]
    for index, buffer in enumerate(func.params):
        ctype, var = C_TYPES[buffer.dtype], c_name(buffer.name)
        lines.append(f"  {ctype} *{var} = ({ctype} *)calloc({buffer.size}, sizeof({ctype}));")
        if index < len(lowered.inputs):
            lines += [f'  {{ FILE *f = fopen((std::string(dir) + "/{buffer.name}.bin").c_str(), "rb");',
                      f'    if (!f || fread({var}, sizeof({ctype}), {buffer.size}, f) != {buffer.size}) '
                      f'{{ fprintf(stderr, "cannot read {buffer.name}.bin\\n"); return 1; }}',
                      "    fclose(f); }"]
    lines.append(f"  {name}({', '.join(c_name(b.name) for b in func.params)});")
    for buffer in func.params[len(lowered.inputs):len(lowered.inputs) + len(lowered.outputs)]:
        ctype, var = C_TYPES[buffer.dtype], c_name(buffer.name)
        lines += [f'  {{ FILE *f = fopen((std::string(dir) + "/{buffer.name}.out").c_str(), "wb");',
                  f'    if (!f) {{ fprintf(stderr, "cannot write {buffer.name}.out\\n"); return 1; }}',
                  f"    fwrite({var}, sizeof({ctype}), {buffer.size}, f); fclose(f); }}"]
    lines += [f"  free({c_name(b.name)});" for b in func.params]
    lines += ["  return 0;", "}", "", "#ifndef FLEXSCHED_NO_MAIN",
              "int main(int argc, char **argv) {",
              f'  if (argc != 2) {{ fprintf(stderr, "usage: %s DIR\\n", argv[0]); return 2; }}',
              f"  return {name}_run(argv[1]);", "}", "#endif", ""]
    return "\n".join(lines)


class _Printer:
    """Loop IR to C++ with HLS pragmas."""

    def __init__(self, plan, state, info):
        self.pipelined = {}
        for stage, loop, ii in plan.pipelined:
            self.pipelined[c_name(f"{c_name(stage)}.{loop.replace('+', '_')}")] = ii
        self.partitions = {}
        for stage, dim, factor in plan.partitions:
            self.partitions.setdefault(c_name(stage), []).append((dim, factor))
        # The compute stage's accumulator tile is read and written by every PE lane at once.
        for node, compute, _ in plan.stages:
            lanes = {r[1]: r[3][-1] for r in state.stages[compute].relations if r[0] == "split"}
            for dim, loop in enumerate(info.node(node).spatial):
                if lanes.get(loop.name, 1) > 1:
                    self.partitions.setdefault(c_name(compute), []).append((dim, lanes[loop.name]))

    def kernel(self, lowered):
        func = lowered.func
        lines = [HELPERS, f'#include "{func.name}.h"', "", f"{_signature(lowered)} {{"]
        for number, buffer in enumerate(func.params):
            lines.append(f"#pragma HLS interface m_axi port={c_name(buffer.name)} offset=slave "
                         f"bundle=gmem{number}")
        lines.append("#pragma HLS interface s_axilite port=return")
        lines += self.stmt(func.body, "  ", inside_pipeline=False)
        lines.append("}")
        return "\n".join(lines) + "\n"

    def stmt(self, stmt, indent, inside_pipeline):
        if isinstance(stmt, Seq):
            return [line for part in stmt.stmts for line in self.stmt(part, indent, inside_pipeline)]
        if isinstance(stmt, For):
            return self._for(stmt, indent, inside_pipeline)
        if isinstance(stmt, Store):
            return [f"{indent}{self._access(stmt.buffer, stmt.indices)} = {self.expr(stmt.value)};"]
        if isinstance(stmt, IfThenElse):
            lines = [f"{indent}if ({self.expr(stmt.cond)}) {{",
                     *self.stmt(stmt.then_body, indent + "  ", inside_pipeline)]
            if stmt.else_body is not None:
                lines += [f"{indent}}} else {{", *self.stmt(stmt.else_body, indent + "  ", inside_pipeline)]
            return lines + [f"{indent}}}"]
        if isinstance(stmt, Allocate):
            buffer, var = stmt.buffer, c_name(stmt.buffer.name)
            dims = "".join(f"[{extent}]" for extent in buffer.shape)
            # static: large tiles must not live on the C-simulation stack; HLS maps them to BRAM.
            lines = [f"{indent}static {C_TYPES[buffer.dtype]} {var}{dims};"]
            for dim, factor in self.partitions.get(var, []):
                if 1 < factor and dim < len(buffer.shape) and buffer.shape[dim] > 1:
                    lines.append(f"#pragma HLS array_partition variable={var} cyclic "
                                 f"factor={min(factor, buffer.shape[dim])} dim={dim + 1}")
            return lines + self.stmt(stmt.body, indent, inside_pipeline)
        raise TypeError(f"hls: cannot print statement {type(stmt).__name__}")

    def _for(self, loop, indent, inside_pipeline):
        var = c_name(loop.var.name)
        lines = [f"{indent}for (long long {var} = 0; {var} < {loop.extent}; ++{var}) {{"]
        pragma = None
        if loop.kind == "unrolled":
            pragma = "#pragma HLS unroll"
        elif var in self.pipelined and not inside_pipeline:
            pragma = f"#pragma HLS pipeline II={self.pipelined[var]}"
        elif not inside_pipeline and not _has_loop(loop.body, serial_only=True) and not self.pipelined_below(loop):
            pragma = "#pragma HLS pipeline II=1"   # a copy's innermost loop: one beat per cycle
        if isinstance(loop.body, Allocate):
            lines.append("#pragma HLS dataflow")  # the buffer's fill and its use overlap across iterations
        if pragma:
            lines.append(pragma)
        pipelined = inside_pipeline or (pragma is not None and "pipeline" in pragma)
        lines += self.stmt(loop.body, indent + "  ", pipelined)
        return lines + [f"{indent}}}"]

    def pipelined_below(self, loop):
        return any(c_name(f.var.name) in self.pipelined for f in _loops(loop.body))

    def _access(self, buffer, indices):
        if buffer.scope == "global":
            strides = [math.prod(buffer.shape[d + 1:]) for d in range(len(buffer.shape))]
            terms = [f"({self.expr(index)}) * {stride}" if stride != 1 else f"({self.expr(index)})"
                     for index, stride in zip(indices, strides)]
            return f"{c_name(buffer.name)}[{' + '.join(terms) or '0'}]"
        return c_name(buffer.name) + "".join(f"[{self.expr(index)}]" for index in indices)

    def expr(self, node):
        if isinstance(node, IterVar):
            return c_name(node.name)
        if isinstance(node, Const):
            return _literal(node)
        if isinstance(node, Load):
            return self._access(node.tensor, node.indices)
        if isinstance(node, Binary):
            return self._binary(node)
        if isinstance(node, Compare):
            return f"({self.expr(node.a)} {node.op} {self.expr(node.b)})"
        if isinstance(node, Logical):
            if node.op == "~":
                return f"(!{self.expr(node.a)})"
            return f"({self.expr(node.a)} {'&&' if node.op == '&' else '||'} {self.expr(node.b)})"
        if isinstance(node, Select):
            return (f"({self.expr(node.cond)} ? {self._as(node.true_value, node.dtype)} : "
                    f"{self._as(node.false_value, node.dtype)})")
        if isinstance(node, Call):
            ctype = C_TYPES[node.dtype]
            func = "std::abs" if node.func == "abs" else f"std::{node.func}"
            return f"{func}(({ctype})({self.expr(node.arg)}))"
        if isinstance(node, Cast):
            return f"(({C_TYPES[node.dtype]})({self.expr(node.value)}))"
        raise TypeError(f"hls: cannot print expression {type(node).__name__}")

    def _as(self, node, dtype):
        """An operand in dtype: cast only where C's own conversions would differ."""
        text = self.expr(node)
        return text if node.dtype == dtype else f"(({C_TYPES[dtype]})({text}))"

    def _binary(self, node):
        ctype = C_TYPES[node.dtype]
        a, b = self._as(node.a, node.dtype), self._as(node.b, node.dtype)
        if node.op in ("+", "-", "*", "/"):
            return f"({a} {node.op} {b})"
        if node.op in ("max", "min"):
            return f"fs_{node.op}<{ctype}>({a}, {b})"
        if dtypes.is_float(node.dtype):
            return f"({ctype})std::floor({a} / {b})" if node.op == "//" else f"({ctype})fs_fmod({a}, {b})"
        return f"fs_floordiv<{ctype}>({a}, {b})" if node.op == "//" else f"fs_floormod<{ctype}>({a}, {b})"


def _literal(const):
    value = const.value
    if const.dtype == "bool":
        return "true" if value else "false"
    if dtypes.is_float(const.dtype):
        suffix = "f" if const.dtype == "float32" else ""
        if math.isinf(value):
            return f"({'-' if value < 0 else ''}INFINITY)"
        if math.isnan(value):
            return "NAN"
        return f"{float(value)!r}{suffix}"
    return f"{int(value)}LL" if const.dtype == "int64" else str(int(value))


def _loops(stmt):
    """Every For inside a statement."""
    if isinstance(stmt, For):
        return [stmt, *_loops(stmt.body)]
    if isinstance(stmt, Seq):
        return [loop for part in stmt.stmts for loop in _loops(part)]
    if isinstance(stmt, IfThenElse):
        return _loops(stmt.then_body) + (_loops(stmt.else_body) if stmt.else_body is not None else [])
    if isinstance(stmt, Allocate):
        return _loops(stmt.body)
    return []


def _has_loop(stmt, serial_only=False):
    return any(not serial_only or loop.kind != "unrolled" for loop in _loops(stmt))
