"""CPUs as LLVM sees them: the host's name and features, feature strings, and the vector unit they give."""

# A feature string is LLVM's: comma-separated names, each "+" (on) or "-" (off). Ours are canonical:
# the features on, sorted, then those off, sorted, so a disabled feature comes last and wins over the
# ones that would imply it. llvmlite is imported only when the host is first asked about.

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

from .errors import FlexschedError

# x86's vector extensions build on each other: turning one off turns off those after it.
_LADDER = ("sse", "sse2", "sse3", "ssse3", "sse4.1", "sse4.2", "avx", "avx2", "avx512f")
# Extensions resting on one rung of the ladder besides the rungs above it.
_RESTS_ON = {"avx": ("fma", "f16c", "vaes", "vpclmulqdq", "avxvnni", "avxifma", "avxneconvert", "avxvnniint8",
                     "avxvnniint16", "gfni"),
             "avx512f": ("avx512", "avx10")}   # every avx512* extension, and AVX10, which includes AVX-512
# The widest vector ISA of well-known CPU names, for a target that is not this host (-mattr overrides it).
KNOWN_CPUS = {
    **dict.fromkeys(("x86-64", "x86-64-v2", "core2", "nehalem", "westmere", "btver2"), "sse4.2"),
    **dict.fromkeys(("x86-64-v3", "haswell", "broadwell", "skylake", "alderlake", "znver1", "znver2", "znver3"),
                    "avx2"),
    **dict.fromkeys(("x86-64-v4", "skylake-avx512", "cascadelake", "cooperlake", "icelake-server", "sapphirerapids",
                     "emeraldrapids", "graniterapids", "znver4", "znver5"), "avx512f"),
}

_KIB, _MIB = 2**10, 2**20


@dataclass(frozen=True)
class Caches:
    """A core's data caches: L1 and L2 (bytes and ways, per core) and the last level (bytes,
    shared by a core's group)."""

    l1: int
    l1_ways: int
    l2: int
    l2_ways: int
    l3: int


# From the vendors' specifications of well-known CPU names; server parts' L3 differs by model, so
# theirs is one typical figure. The static CPU model reads these for a target's CPU, never this host's.
KNOWN_CACHES = {
    "znver2": Caches(32 * _KIB, 8, 512 * _KIB, 8, 16 * _MIB),    # L3 per 4-core CCX
    "znver3": Caches(32 * _KIB, 8, 512 * _KIB, 8, 32 * _MIB),    # L3 per 8-core CCD
    "znver4": Caches(32 * _KIB, 8, 1 * _MIB, 8, 32 * _MIB),      # L3 per 8-core CCD
    "znver5": Caches(48 * _KIB, 12, 1 * _MIB, 16, 32 * _MIB),
    **dict.fromkeys(("haswell", "broadwell", "skylake", "x86-64-v3"), Caches(32 * _KIB, 8, 256 * _KIB, 4, 8 * _MIB)),
    "alderlake": Caches(48 * _KIB, 12, 1280 * _KIB, 10, 30 * _MIB),
    **dict.fromkeys(("skylake-avx512", "cascadelake", "cooperlake", "x86-64-v4"),
                    Caches(32 * _KIB, 8, 1 * _MIB, 16, 32 * _MIB)),
    "icelake-server": Caches(48 * _KIB, 12, 1280 * _KIB, 20, 48 * _MIB),
    **dict.fromkeys(("sapphirerapids", "emeraldrapids", "graniterapids"),
                    Caches(48 * _KIB, 12, 2 * _MIB, 16, 96 * _MIB)),
}
DEFAULT_CACHES = Caches(32 * _KIB, 8, 512 * _KIB, 8, 8 * _MIB)   # a modest x86-64 core, for CPUs not listed


class FeatureError(FlexschedError, ValueError):
    """A malformed -mattr list (the caller names the target)."""


@functools.cache
def host():
    """(CPU name, canonical feature string) of this machine, as LLVM names them."""
    import llvmlite.binding as llvm

    try:
        features = llvm.get_host_cpu_features().flatten()
    except RuntimeError:  # LLVM cannot tell on this platform: its generic features, whatever the name
        features = ""
    return llvm.get_host_cpu_name(), canonical(parse(features))


def parse(text):
    """{feature: on} of a feature string, later entries winning; FeatureError names a malformed entry."""
    features = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        if item[0] not in "+-" or len(item) < 2:
            raise FeatureError(f"feature '{item}' must start with + or -")
        features[item[1:]] = item[0] == "+"
    return features


def apply(features, changes):
    """features with changes applied; a feature turned off takes the extensions resting on it along."""
    result = {**features, **changes}
    for name, on in changes.items():
        if not on:
            for dependent in _dependents(name, result):
                result[dependent] = False
    return result


def _dependents(name, features):
    rungs = _LADDER[_LADDER.index(name) + 1:] if name in _LADDER else ()
    bases = (name, *rungs)
    prefixes = tuple(prefix for base in bases for prefix in _RESTS_ON.get(base, ()))
    return [other for other in features if other in rungs or (prefixes and other.startswith(prefixes))]


def canonical(features):
    """The canonical feature string of {feature: on}."""
    on = sorted(name for name, value in features.items() if value)
    off = sorted(name for name, value in features.items() if not value)
    return ",".join([f"+{name}" for name in on] + [f"-{name}" for name in off])


def enabled(text):
    """The features a (canonical) feature string turns on."""
    return {name for name, on in parse(text).items() if on}


def vector_unit(cpu, features):
    """(float32 lanes, vector registers) of the widest vector unit a CPU with these {feature: on} has."""
    widest = KNOWN_CPUS.get(cpu)
    implied = {} if widest is None else dict.fromkeys(_LADDER[:_LADDER.index(widest) + 1], True)
    on = {name for name, value in apply(implied, features).items() if value}
    if "avx512f" in on or any(name.startswith("avx10") for name in on):   # LLVM's avx10.N implies AVX-512
        return 16, 32   # zmm0-31
    if "avx2" in on or "avx" in on:
        return 8, 16    # ymm0-15
    return 4, 16        # xmm0-15 (x86-64 SSE), a safe guess elsewhere


def caches(cpu):
    """The Caches of a CPU by LLVM's name; DEFAULT_CACHES for one not listed."""
    return KNOWN_CACHES.get(cpu, DEFAULT_CACHES)


def digest(features):
    """A short, stable name for a feature string (records keep it instead of the whole string)."""
    return hashlib.sha256(features.encode()).hexdigest()[:16]
