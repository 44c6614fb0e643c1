"""Lanes: the threads (or loop iterations) an interpreted statement runs for at once, and the
memory they address.

Entering a blockIdx or threadIdx loop replicates every current lane `extent` times; a loop
variable is then a scalar where every lane agrees and an int64 array of one value per lane
otherwise. Each lane knows its block, its thread, and the lane it descends from at every lane
level (one level per replication), which picks its instance of a scratch buffer: shared buffers
have one per block, local buffers one per lane of the level that allocated them.

Every access goes through element_keys (bounds) and touch (race and speculation bookkeeping).
"""

from __future__ import annotations

import numpy as np

from flexsched import dtypes
from flexsched.errors import FlexschedError

from .races import PhaseLog

BLOCK_LOOPS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_LOOPS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
# Global-memory identities are block * _THREAD_SPAN + thread: blocks never exceed 2**39 here.
_THREAD_SPAN = 1 << 24


class InterpretError(FlexschedError, RuntimeError):
    """A kernel that does something a compiled kernel would get wrong: bad arguments, an access
    out of bounds or out of scope, a data race, a barrier only part of a block reaches."""


class Machine:
    """State of one run: the buffers in scope and the launches done."""

    def __init__(self, check):
        self.check = check     # look for races and divergent barriers
        self.mem = {}          # id(Buffer) -> Storage, for buffers in scope
        self.launches = []     # LaunchReports
        self._gathered = {}

    def gather(self, value, picked):
        """value[picked] for a lane array (a scalar as it is), the same array object again for
        the same two arrays: a subset taken again on the same positions (splitter) gives the lane
        arrays it gave before, and expressions memoised over them stay valid."""
        if not isinstance(value, np.ndarray):
            return value
        key = (id(value), id(picked))
        known = self._gathered.get(key)
        if known is not None and known[0] is value and known[1] is picked:
            return known[2]
        if len(self._gathered) >= 4096:  # keeps the arrays it names alive, so no id is reused
            self._gathered.clear()
        result = value[picked]
        self._gathered[key] = (value, picked, result)
        return result


class Launch:
    """Bookkeeping of one GPU launch."""

    def __init__(self, written):
        self.written = written   # ids of the buffers the launch stores to: only they can race
        self.logs = {}           # id(Buffer) -> PhaseLog of a global buffer
        self.blocks = 1
        self.threads = 1
        self.barriers = 0


class Lanes:
    """The active lanes of a statement."""

    __slots__ = ("machine", "n", "vars", "block", "thread", "levels", "sizes", "block_level", "thread_level",
                 "block_stride", "thread_stride", "launch", "speculations")

    @classmethod
    def root(cls, machine):
        """The one lane a kernel starts with."""
        lanes = cls()
        lanes.machine, lanes.n = machine, 1
        lanes.vars = {}                                # id(IterVar) -> value
        lanes.block = lanes.thread = np.int64(0)       # CUDA's linear block and thread ids
        lanes.levels = (np.int64(0),)                  # per level: the lane's ancestor there
        lanes.sizes = (1,)                             # per level: how many lanes it made
        lanes.block_level = 0                          # the level whose lanes are blocks
        lanes.thread_level = 0                         # the level of the innermost thread loop
        lanes.block_stride = lanes.thread_stride = 1   # blocks in the grid, threads in a block
        lanes.launch = None
        lanes.speculations = ()                        # sequential loops run as lanes, outermost first
        return lanes

    def _copy(self):
        new = Lanes()
        for name in Lanes.__slots__:
            setattr(new, name, getattr(self, name))
        return new

    def subset(self, picked):
        """The lanes at positions `picked` (an index array)."""
        gather = self.machine.gather
        new = self._copy()
        new.n = len(picked)
        new.vars = {key: gather(value, picked) for key, value in self.vars.items()}
        new.block, new.thread = gather(self.block, picked), gather(self.thread, picked)
        new.levels = tuple(gather(level, picked) for level in self.levels)
        return new

    def expand(self, var, extent, kind):
        """Each lane replicated `extent` times, var bound to the replica's number."""
        count = self.n * extent
        parent = np.repeat(np.arange(self.n), extent)
        offset = np.tile(np.arange(extent, dtype=np.int64), self.n)
        new = self._copy()
        new.n = count
        new.vars = {key: _gather(value, parent) for key, value in self.vars.items()}
        new.vars[id(var)] = offset
        new.levels = tuple(_gather(level, parent) for level in self.levels) + (np.arange(count, dtype=np.int64),)
        new.sizes = self.sizes + (count,)
        new.block, new.thread = _gather(self.block, parent), _gather(self.thread, parent)
        # Linear ids as CUDA numbers them: x fastest. Sequential loops run as lanes add a level only.
        if kind in BLOCK_LOOPS:
            new.block = new.block + self.block_stride * offset
            new.block_stride = self.block_stride * extent
            new.block_level = len(new.levels) - 1
        elif kind in THREAD_LOOPS:
            new.thread = new.thread + self.thread_stride * offset
            new.thread_stride = self.thread_stride * extent
            new.thread_level = len(new.levels) - 1
        return new

    def per_lane(self, value):
        """value as one entry per lane."""
        return np.broadcast_to(value, (self.n,))

    def where(self, lane):
        """Where a lane runs, for messages: '' outside GPU launches."""
        if self.launch is None:
            return ""
        return f" in block {int(self.per_lane(self.block)[lane])}, thread {int(self.per_lane(self.thread)[lane])}"


def _gather(value, picked):
    return value[picked] if isinstance(value, np.ndarray) else value


def splitter():
    """A function giving the positions where a per-lane condition holds and where it does not:
    the same position arrays again for a condition of the same value (a guard on an inner loop's
    variable takes a few values over and over), so subsets and what is memoised over them are
    reused."""
    seen = {}

    def split(mask):
        key = mask.tobytes()
        positions = seen.get(key)
        if positions is None:
            if len(seen) >= 16:
                seen.clear()
            positions = seen[key] = (np.flatnonzero(mask), np.flatnonzero(~mask))
        return positions
    return split


# ---------------------------------------------------------------- memory

class Storage:
    """The memory of one buffer: instances of buffer.size elements, flat. Global buffers have
    one instance, shared buffers one per block, local buffers one per lane."""

    __slots__ = ("buffer", "data", "level", "log", "strides")

    def __init__(self, buffer, data, level, log=None):
        self.buffer = buffer
        self.data = data
        self.level = level     # the lane level whose lanes own the instances; None for global
        self.log = log         # shared memory's PhaseLog (global ones live in the launch)
        strides, stride = [], 1
        for extent in reversed(buffer.shape):
            strides.append(stride)
            stride *= extent
        self.strides = tuple(reversed(strides))


def allocate(buffer, lanes):
    """Fresh scratch memory for buffer, as an Allocate running on these lanes makes it."""
    shared = buffer.scope == "shared"
    level = lanes.block_level if shared else len(lanes.levels) - 1
    size = lanes.sizes[level] * buffer.size
    # A read of memory nobody wrote that reaches an output shows up as a wrong answer.
    poison = np.nan if dtypes.is_float(buffer.dtype) else np.iinfo(buffer.dtype).min
    log = PhaseLog(size) if shared and lanes.launch is not None and lanes.machine.check else None
    return Storage(buffer, np.full(size, poison, dtype=buffer.dtype), level, log)


def storage_lookup(buffer):
    """A function of the lanes giving buffer's storage in scope."""
    key = id(buffer)

    def lookup(lanes):
        storage = lanes.machine.mem.get(key)
        if storage is None:
            same_name = any(other.buffer.name == buffer.name for other in lanes.machine.mem.values())
            hint = " (a different Buffer object of that name is in scope)" if same_name else ""
            raise InterpretError(f"buffer '{buffer.name}' is used where it is neither a parameter nor allocated{hint}")
        return storage
    return lookup


def element_keys(storage, lanes, indices, action):
    """Positions in storage.data of the indexed element, per lane; raises when out of bounds."""
    buffer = storage.buffer
    if len(indices) != len(buffer.shape):
        raise InterpretError(f"{action} buffer '{buffer.name}' with {len(indices)} indices, "
                             f"it has {len(buffer.shape)} dimensions")
    flat = 0
    for index, extent, stride in zip(indices, buffer.shape, storage.strides):
        if np.ndim(index):
            if (index < 0).any() or (index >= extent).any():
                raise InterpretError(_out_of_bounds(buffer, lanes, indices, action))
        elif not 0 <= index < extent:
            raise InterpretError(_out_of_bounds(buffer, lanes, indices, action))
        flat = flat + index * stride
    if storage.level is not None:
        flat = flat + lanes.levels[storage.level] * buffer.size
    return flat


def _out_of_bounds(buffer, lanes, indices, action):
    bad = np.zeros(lanes.n, dtype=bool)
    for index, extent in zip(indices, buffer.shape):
        bad |= (lanes.per_lane(index) < 0) | (lanes.per_lane(index) >= extent)
    lane = int(np.argmax(bad))
    index = _format_index(int(lanes.per_lane(i)[lane]) for i in indices)
    return (f"{action} buffer '{buffer.name}' at index {index} out of bounds of shape "
            f"{tuple(buffer.shape)}{lanes.where(lane)}")


def _format_index(values):
    return "(" + ", ".join(str(value) for value in values) + ")"


def touch(storage, lanes, keys, writes):
    """Record an access by every lane before it happens: raises on a race, and tells the
    speculations it runs under (interpret.py) when their iterations would see each other."""
    for speculation in lanes.speculations:
        speculation.check(storage, lanes, keys, writes)
    if writes and storage.buffer.scope == "local" and storage.level is not None \
            and storage.level < lanes.thread_level:
        # On a GPU each thread has its own copy; one copy here would let threads see each other's.
        raise InterpretError(f"local buffer '{storage.buffer.name}' is written by threads of a loop it is "
                             f"allocated outside of: allocate it inside the thread loop")
    log = _race_log(storage, lanes)
    if log is None:
        return
    keys = lanes.per_lane(keys)
    who = lanes.per_lane(lanes.thread if storage.level is not None else lanes.block * _THREAD_SPAN + lanes.thread)
    conflict = log.write(keys, who) if writes else log.read(keys, who)
    if conflict is not None:
        raise InterpretError(_race_message(storage, lanes, keys, conflict))


def _race_log(storage, lanes):
    """The PhaseLog that checks an access for races, or None where nothing can race."""
    if storage.log is not None:
        return storage.log
    launch = lanes.launch
    if storage.level is not None or launch is None or not lanes.machine.check:
        return None  # private memory, or sequential code
    key = id(storage.buffer)
    if key not in launch.written:
        return None  # read-only during this launch
    log = launch.logs.get(key)
    if log is None:
        log = launch.logs[key] = PhaseLog(storage.buffer.size)
    return log


def _race_message(storage, lanes, keys, conflict):
    buffer, lane = storage.buffer, conflict.lane
    element = _format_index(int(i) for i in np.unravel_index(int(keys[lane]) % buffer.size, buffer.shape))
    if storage.level is not None:
        me, other = f"thread {int(lanes.per_lane(lanes.thread)[lane])}", f"thread {conflict.other}"
        place = f"shared buffer '{buffer.name}' element {element} in block {int(lanes.per_lane(lanes.block)[lane])}"
        when = "with no barrier between them"
    else:
        me = f"thread {int(lanes.per_lane(lanes.thread)[lane])} of block {int(lanes.per_lane(lanes.block)[lane])}"
        other = "thread {1} of block {0}".format(*divmod(conflict.other, _THREAD_SPAN))
        place = f"global buffer '{buffer.name}' element {element}"
        when = "in the same launch"
    if conflict.kind == "same store":
        return f"race on {place}: {me} and {other} write it in the same store"
    what = {"read after write": f"{me} reads what {other} wrote",
            "write after write": f"{me} writes what {other} wrote",
            "write after read": f"{me} writes what {other} read"}[conflict.kind]
    return f"race on {place}: {what} {when}"
