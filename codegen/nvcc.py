"""CUDA C to PTX and machine code with NVIDIA's nvcc and ptxas; no GPU is needed.

Each compile returns the PTX of every kernel entry with the source line each instruction came
from (nvcc -lineinfo writes `.loc` directives), and what ptxas reports of each entry: registers,
spills, stack and static shared memory. nvcc starts slowly (about 0.3 s here), so several
independent sources compile as one translation unit, each behind a `#line` directive naming
it; a unit that fails is then compiled alone, so one bad source fails only itself. Every run of
nvcc or ptxas has a time limit (COMPILE_TIMEOUT_S unless the caller gives one), after which it and
the compilers it started are killed and the unit fails with a CudaCompileError.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass

from flexsched.errors import FlexschedError

COMPILE_TIMEOUT_S = 120.0
_ENTRY = re.compile(r"^\.(?:visible|weak)?\s*\.entry\s+(\w+)\s*\(", re.M)
_FILE = re.compile(r"^\s*\.file\s+(\d+)\s+\"([^\"]+)\"", re.M)
_PTXAS_FUNCTION = re.compile(r"Compiling entry function '(\w+)'")
_PTXAS_PROPERTIES = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")


class CudaCompileError(FlexschedError, RuntimeError):
    """nvcc or ptxas refused a source, or is not installed (one line, naming the unit)."""


@dataclass(frozen=True)
class Resources:
    """What ptxas reports for one kernel entry."""

    registers: int
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    stack_bytes: int = 0
    static_shared_bytes: int = 0
    barriers: int = 0


@dataclass(frozen=True)
class PtxKernel:
    """One entry of the PTX: its instructions as (opcode, source line) in program order; the line
    is the unit's own (0 where PTX names no line)."""

    name: str
    instructions: tuple
    resources: Resources


@dataclass(frozen=True)
class CompiledUnit:
    """One source's kernels, keyed by entry name, and its PTX (a whole module when it was
    compiled alone) and machine code (when asked for)."""

    kernels: dict
    arch: str
    seconds: float        # its share of the batch's compile time
    ptx: str = ""
    cubin: bytes | None = None


def find_nvcc():
    """The nvcc executable: on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin; None if absent."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.access(os.path.join(root, "bin", "nvcc"), os.X_OK):
            return os.path.join(root, "bin", "nvcc")
    return None


def _ptxas(nvcc):
    sibling = os.path.join(os.path.dirname(nvcc), "ptxas")
    return sibling if os.access(sibling, os.X_OK) else shutil.which("ptxas")


def compile_units(sources, arch="sm_90", timeout_s=COMPILE_TIMEOUT_S, keep_machine_code=False):
    """A CompiledUnit or a CudaCompileError for each CUDA source, compiled together (machine code
    is kept for a source compiled alone, if asked for)."""
    nvcc = find_nvcc()
    if nvcc is None:
        error = CudaCompileError("nvcc not found (install the CUDA toolkit or set CUDA_HOME)")
        return [error for _ in sources]
    sources = list(sources)
    started = time.perf_counter()
    try:
        kernels, ptx, cubin = _compile_together(nvcc, sources, arch, timeout_s)
    except CudaCompileError as err:
        if len(sources) == 1:
            return [err]
        return [result for source in sources for result in compile_units([source], arch, timeout_s)]
    share = (time.perf_counter() - started) / max(1, len(sources))
    if len(sources) == 1:
        return [CompiledUnit(kernels.get(0, {}), arch, share, ptx, cubin if keep_machine_code else None)]
    return [CompiledUnit(kernels.get(unit, {}), arch, share, _entries_text(ptx, kernels.get(unit, {})))
            for unit in range(len(sources))]


def _entries_text(ptx, kernels):
    """The PTX text of some entries (each from its .entry line to the next)."""
    starts = [match.start() for match in _ENTRY.finditer(ptx)] + [len(ptx)]
    parts = [ptx[begin:end] for begin, end in zip(starts, starts[1:]) if _ENTRY.match(ptx[begin:end]).group(1) in kernels]
    return "".join(parts)


def _compile_together(nvcc, sources, arch, timeout_s):
    """({unit number: {entry name: PtxKernel}}, PTX text, cubin bytes or None) of the sources as
    one translation unit."""
    with tempfile.TemporaryDirectory(prefix="flexsched-nvcc-") as directory:
        source_path = os.path.join(directory, "units.cu")
        with open(source_path, "w") as out:
            for unit, source in enumerate(sources):
                out.write(f'#line 1 "unit{unit}.cu"\n{source}\n')
        ptx_path = os.path.join(directory, "units.ptx")
        _run([nvcc, f"-arch={arch}", "-ptx", "-lineinfo", "-o", ptx_path, source_path], "nvcc", timeout_s)
        with open(ptx_path) as ptx_file:
            ptx = ptx_file.read()
        ptxas = _ptxas(nvcc)
        report, cubin = "", None
        if ptxas is not None:
            cubin_path = os.path.join(directory, "units.cubin")
            report = _run([ptxas, f"-arch={arch}", "-v", "-o", cubin_path, ptx_path], "ptxas", timeout_s)
            with open(cubin_path, "rb") as cubin_file:
                cubin = cubin_file.read()
    resources = parse_ptxas_report(report)
    return _kernels_by_unit(ptx, resources), ptx, cubin


def _run(command, tool, timeout_s):
    """The command's stderr and stdout; CudaCompileError with its first error line on failure, or
    when it outlives timeout_s."""
    # nvcc runs cicc and ptxas as children of its own: started in a session of its own, a timeout
    # kills them all, where killing nvcc alone would leave them running.
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise CudaCompileError(f"{tool} took longer than {timeout_s:.0f} s") from None
    output = stderr + stdout
    if process.returncode != 0:
        lines = [line for line in output.splitlines() if "error" in line.lower()] or output.splitlines() or ["?"]
        first = re.sub(r"unit\d+\.cu\((\d+)\)", r"line \1", lines[0].strip())
        raise CudaCompileError(f"{tool} failed: {first}")
    return output


def parse_ptxas_report(text):
    """{entry name: Resources} from `ptxas -v` output."""
    result, current, properties = {}, None, (0, 0, 0)
    for line in text.splitlines():
        function = _PTXAS_FUNCTION.search(line)
        if function:
            current, properties = function.group(1), (0, 0, 0)
            continue
        found = _PTXAS_PROPERTIES.search(line)
        if found:
            properties = tuple(int(group) for group in found.groups())
            continue
        used = _PTXAS_USED.search(line)
        if used and current is not None:
            registers, barriers, shared = (int(group or 0) for group in used.groups())
            stack, spill_stores, spill_loads = properties
            result[current] = Resources(registers, spill_stores, spill_loads, stack, shared, barriers)
            current = None
    return result


def _kernels_by_unit(ptx, resources):
    """Each entry's instructions with their unit's source lines, grouped by unit."""
    files = {number: name for number, name in _FILE.findall(ptx)}
    units = {}
    starts = [match.start() for match in _ENTRY.finditer(ptx)] + [len(ptx)]
    for begin, end in zip(starts, starts[1:]):
        text = ptx[begin:end]
        name = _ENTRY.match(text).group(1)
        unit, instructions = None, []
        line = 0
        for raw in text.splitlines():
            stripped = raw.strip()
            if stripped.startswith(".loc"):
                _, file_number, line_text, *_ = stripped.split()
                file_name = os.path.basename(files.get(file_number, ""))
                if file_name.startswith("unit") and unit is None:
                    unit = int(file_name[4:].split(".")[0])
                line = int(line_text)
                continue
            opcode = _opcode(stripped)
            if opcode:
                instructions.append((opcode, line))
        units.setdefault(unit if unit is not None else 0, {})[name] = PtxKernel(
            name, tuple(instructions), resources.get(name, Resources(0)))
    return units


def _opcode(line):
    """The opcode of a PTX instruction line (predicate and operands dropped), '' for others."""
    if not line or line.startswith(("//", ".", "{", "}", ")")) or line.endswith(":"):
        return ""
    if line.startswith("@"):
        line = line.split(None, 1)[1] if " " in line else ""
    opcode = line.split(None, 1)[0].rstrip(";")
    return opcode if opcode and opcode[0].isalpha() else ""
