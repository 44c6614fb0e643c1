"""HLS C++ of an FPGA design (Vitis HLS style), printed from the lowered loop IR.

The design's schedule is restated with caches (codegen.hls_schedule) and lowered by the same
lowering the CPU back end uses, so the on-chip buffers, their regions and the boundary guards
are the ones already checked there. Legalisation (codegen.legalize) spells out //, %, max and
min, and the C printer (codegen.cprint) prints the loops. This dialect of it adds what Vitis
HLS needs: m_axi interfaces, `pipeline` on the pipelined tile loop (and on the innermost loop
of each copy, for burst transfers), `unroll` on the PE loops, cyclic `array_partition` of
buffers by the PE lanes, and `dataflow` over each output tile's read / compute / write regions.
The pragmas are ignored by g++, so the same file runs as a C simulation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from analysis import analyze

from .cprint import C_TYPES, CPrinter, c_name
from .hls_schedule import hls_plan
from .ir import Allocate, For, walk_stmts
from .legalize import legalize
from .lower import lower

HELPERS = """\
#ifndef FLEXSCHED_HLS_HELPERS
#define FLEXSCHED_HLS_HELPERS
#include <cmath>
#include <cstdio>
#include <cstdlib>
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


def lower_hls(task, schedule, name=None, info=None):
    """(plan, state, Lowered) of a task under an FPGA schedule: the loop IR the HLS printer prints."""
    info = info or analyze(task)
    plan = hls_plan(info, schedule)
    state = plan.schedule.apply(info)
    lowered = lower(task, state, c_name(name or task.name.lower()))
    return plan, state, replace(lowered, func=legalize(lowered.func))  # //, %, max and min as C spells them


def emit_hls(task, schedule, name=None, info=None):
    """HlsSources of a task under an FPGA schedule (a point of an fpga space)."""
    info = info or analyze(task)
    name = c_name(name or task.name.lower())
    plan, state, lowered = lower_hls(task, schedule, name, info)
    printer = HlsPrinter(plan, state, info, len(lowered.inputs))
    return HlsSources(name, printer.kernel(lowered.func), _header(lowered), _testbench(lowered),
                      tuple((b.name, b.shape, b.dtype) for b in lowered.func.params[:len(lowered.inputs)]),
                      tuple((b.name, b.shape, b.dtype) for b in lowered.func.params[len(lowered.inputs):]
                            [:len(lowered.outputs)]))


def _signature(func, input_count):
    params = [f"{'const ' if i < input_count else ''}{C_TYPES[b.dtype]} *{c_name(b.name)}"
              for i, b in enumerate(func.params)]
    return f'extern "C" void {func.name}({", ".join(params)})'


def _header(lowered):
    guard = f"{lowered.func.name.upper()}_H"
    shapes = "\n".join(f"// {b.name}: {C_TYPES[b.dtype]}{list(b.shape)}"
                       + (" (workspace)" if b in lowered.workspaces else "") for b in lowered.func.params)
    signature = _signature(lowered.func, len(lowered.inputs))
    return f"#ifndef {guard}\n#define {guard}\n{shapes}\n{signature};\n#endif\n"


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


class HlsPrinter(CPrinter):
    """Vitis HLS C++: std:: math, long long indices, m_axi interfaces, static on-chip buffers
    with their partitions, and the pipeline / unroll / dataflow pragmas of the design."""

    dialect = "hls"

    def __init__(self, plan, state, info, input_count):
        super().__init__()
        self.input_count = input_count
        self.pipelined = {c_name(f"{stage}.{loop}"): ii for stage, loop, ii in plan.pipelined}
        self.partitions = {}
        for stage, dim, factor in plan.partitions:
            self.partitions.setdefault(c_name(stage), []).append((dim, factor))
        # The compute stage's accumulator tile is read and written by every PE lane at once.
        for node, compute, _ in plan.stages:
            lanes = {r[1]: r[3][-1] for r in state.stages[compute].relations if r[0] == "split"}
            for dim, loop in enumerate(info.node(node).spatial):
                if lanes.get(loop.name, 1) > 1:
                    self.partitions.setdefault(c_name(compute), []).append((dim, lanes[loop.name]))
        self._pipelines = set()  # ids of the loops printed with a pipeline pragma

    def begin(self, func):
        super().begin(func)
        self._pipelines = set()

    def kernel(self, func):
        """The kernel file: includes, then the function."""
        return "\n".join([HELPERS, f'#include "{func.name}.h"', "", self.function(func)])

    def math_function(self, func, dtype):
        return f"std::{func}"  # <cmath> overloads on the argument's type

    def signature(self, func):
        return _signature(func, self.input_count)

    def prologue(self, func, indent):
        lines = [f"#pragma HLS interface m_axi port={c_name(buffer.name)} offset=slave bundle=gmem{number}"
                 for number, buffer in enumerate(func.params)]
        return lines + ["#pragma HLS interface s_axilite port=return"]

    def loop_pragmas(self, loop, indent):
        inside_pipeline = any(id(outer) in self._pipelines for outer in self.loops)
        var, pragma = c_name(loop.var.name), None
        if loop.kind == "unrolled":
            pragma = "#pragma HLS unroll"
        elif var in self.pipelined and not inside_pipeline:
            pragma = f"#pragma HLS pipeline II={self.pipelined[var]}"
        elif not inside_pipeline and not self._loops_below(loop):
            pragma = "#pragma HLS pipeline II=1"   # a copy's innermost loop: one beat per cycle
        lines = []
        if isinstance(loop.body, Allocate):
            lines.append("#pragma HLS dataflow")  # the buffer's fill and its use overlap across iterations
        if pragma:
            lines.append(pragma)
            if "pipeline" in pragma:
                self._pipelines.add(id(loop))
        return lines

    def _loops_below(self, loop):
        """Whether a rolled loop, or a loop with its own pipeline, sits inside loop."""
        inner = [s for s in walk_stmts(loop.body) if isinstance(s, For)]
        return any(f.kind != "unrolled" or c_name(f.var.name) in self.pipelined for f in inner)

    def allocate(self, buffer, indent):
        var = c_name(buffer.name)
        # static: large tiles must not live on the C-simulation stack; HLS maps them to BRAM.
        lines = [f"{indent}static {self.type_name(buffer.dtype)} {var}{self.dims(buffer)};"]
        for dim, factor in self.partitions.get(var, []):
            if 1 < factor and dim < len(buffer.shape) and buffer.shape[dim] > 1:
                lines.append(f"#pragma HLS array_partition variable={var} cyclic "
                             f"factor={min(factor, buffer.shape[dim])} dim={dim + 1}")
        return lines
