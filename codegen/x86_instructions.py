"""x86-64 instructions as the static CPU model prices them: each one's class (FMA, other float
arithmetic, vector ALU, shuffle, gather, divide, call, other), the vector width it works on, and
the loads and stores it makes with their bytes (AT&T syntax, as LLVM prints it)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_REGISTER_BITS = {"zmm": 512, "ymm": 256, "xmm": 128}
_SHUFFLES = ("vperm", "vshuf", "vunpck", "vinsert", "vextract", "vpshuf", "valign", "vpalignr", "vmovlhps",
             "vmovhlps", "vexpand", "vcompress", "vpexpand", "vpcompress", "vpinsr", "vpextr", "vmovshdup",
             "vmovsldup", "vmovddup")
_BROADCASTS = ("vbroadcast", "vpbroadcast")
_MOVES = ("mov", "vmov", "vpmov", "push")
_FLOAT_SUFFIXES = ("ps", "pd", "ss", "sd")
_DIVIDES = ("vdiv", "vsqrt", "div", "idiv", "vrcp", "vrsqrt")


@dataclass(frozen=True)
class Cost:
    """What one instruction asks of the core: its class, vector bits, loads and stores (with bytes),
    and whether it is a call (and to what)."""

    kind: str          # fma, fp, divide, vector, shuffle, gather, load_only, store_only, call, other
    bits: int          # widest vector register it names (64 for a scalar)
    loads: int
    stores: int
    bytes_loaded: int
    bytes_stored: int
    lanes: int         # float lanes of an FMA (16 for a zmm FMA on float32), else 0


def vector_bits(instruction):
    """The widest vector register an instruction names (64 where it names none)."""
    widest = 64
    for operand in instruction.operands:
        for prefix, bits in _REGISTER_BITS.items():
            if f"%{prefix}" in operand:
                widest = max(widest, bits)
    return widest


def _is_memory(operand):
    return "(" in operand and not operand.startswith("$")


def _scalar(mnemonic):
    return mnemonic.rstrip("xyz").endswith(("ss", "sd")) or mnemonic in ("vmovd", "vmovq")


def _element_bits(mnemonic):
    return 64 if mnemonic.rstrip("xyz").endswith(("pd", "sd", "q")) else 32


# The model asks each instruction's cost several times (its block's pipes, its dependence chains,
# its loads and stores), and a kernel repeats the same instruction text across unrolled tiles.
@functools.lru_cache(maxsize=1 << 16)
def classify(instruction):
    """The Cost of one instruction."""
    mnemonic = instruction.mnemonic
    operands = instruction.operands
    bits = vector_bits(instruction)
    if mnemonic.startswith(("lea", "nop", "j", "ret", "vzeroupper", "prefetch", "pop", "push")):
        kind = "call" if mnemonic.startswith("jmp") and operands and operands[0].startswith("*") else "other"
        return Cost(kind, bits, 0, int(mnemonic.startswith("push")), 0, 8 * mnemonic.startswith("push"), 0)
    if mnemonic.startswith("call"):
        return Cost("call", bits, 0, 0, 0, 0, 0)
    memory_bytes = _memory_bytes(instruction, bits)
    destination_memory = bool(operands) and _is_memory(operands[-1]) and not mnemonic.startswith(("cmp", "test"))
    source_memory = any(_is_memory(o) for o in operands[:-1]) or (
        destination_memory and not mnemonic.startswith(_MOVES + ("vextract", "vpextr")))
    loads, stores = int(source_memory), int(destination_memory)
    if mnemonic.startswith(("vgather", "vpgather")):   # one load per element: vgatherqps, vgatherdps, ...
        lanes = bits // (64 if mnemonic.rstrip("xyz")[-3:] in ("qps", "qpd", "dpd", "qd", "qq") else 32)
        return Cost("gather", bits, lanes, 0, lanes * 4, 0, 0)
    if mnemonic.startswith(("vfmadd", "vfmsub", "vfnmadd", "vfnmsub")):
        lanes = 1 if _scalar(mnemonic) else bits // _element_bits(mnemonic)
        return Cost("fma", bits, loads, 0, memory_bytes * loads, 0, lanes)
    if mnemonic.startswith(_DIVIDES):
        kind = "divide"
    elif mnemonic.startswith(_BROADCASTS):
        kind = "load_only" if source_memory else "shuffle"
    elif mnemonic.startswith(_SHUFFLES):
        kind = "shuffle"
    elif mnemonic.startswith(_MOVES) or mnemonic.startswith(("vmaskmov", "vpmaskmov")):
        kind = "store_only" if stores else ("load_only" if loads else "other")
    elif mnemonic.startswith("v") and mnemonic.rstrip("xyz").endswith(_FLOAT_SUFFIXES) and not mnemonic.startswith("vp"):
        kind = "fp"
    elif mnemonic.startswith("v"):
        kind = "vector"
    else:
        kind = "other"
    return Cost(kind, bits, loads, stores, memory_bytes * loads, memory_bytes * stores, 0)


def _memory_bytes(instruction, bits):
    """Bytes one memory operand of the instruction moves."""
    mnemonic = instruction.mnemonic
    if "{1to" in "".join(instruction.operands) or mnemonic.startswith(_BROADCASTS) or _scalar(mnemonic):
        return _element_bits(mnemonic) // 8
    if bits > 64:
        if mnemonic.startswith(("vinsertps", "vpinsr", "vpextr", "vextractps")):
            return 4
        if mnemonic.startswith(("vinsert", "vextract")):   # vinsertf64x4: four 64-bit elements
            lanes = re.search(r"(\d+)x(\d+)$", mnemonic)
            return int(lanes.group(1)) * int(lanes.group(2)) // 8 if lanes else 16
        return bits // 8
    suffix = mnemonic[-1]
    return {"b": 1, "w": 2, "l": 4, "q": 8}.get(suffix, 8)
