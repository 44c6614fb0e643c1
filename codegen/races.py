"""Race bookkeeping for GPU launches emulated on the CPU.

Lock-step emulation runs every thread's statement at once, so it computes the right answer even
where a GPU would not. A PhaseLog instead remembers, for every element of a buffer, who wrote it
and who read it since the last point that orders threads (a barrier for shared memory, the start
of the launch for global memory), and reports the first access whose result would depend on how
the threads were scheduled. The log is plain numpy arrays, so one check covers every lane of a
vectorised access.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

NOBODY = -1


class Conflict(NamedTuple):
    """The first lane of an access that races, and the thread it races with."""

    lane: int       # position in the access's arrays
    other: int      # identity of the other thread
    kind: str       # "read after write", "write after write", "write after read", "same store"


class PhaseLog:
    """Who wrote and who read each element during the current phase.

    Identities are non-negative integers naming threads. Two readers are kept per element (the
    first one, and any other one): enough to tell whether a writer's element was read by a
    thread other than itself.
    """

    def __init__(self, size):
        self.writer = np.full(size, NOBODY, np.int64)
        self.reader = np.full(size, NOBODY, np.int64)
        self.other_reader = np.full(size, NOBODY, np.int64)

    def read(self, keys, who):
        """Record that thread who[i] reads element keys[i]; the first read of what another thread
        wrote, or None."""
        writer = self.writer[keys]
        conflict = _first(writer, who, "read after write")
        if conflict is not None:
            return conflict
        first = self.reader[keys]
        unclaimed = first == NOBODY
        if unclaimed.any():
            # Lanes reading the same unclaimed element race for it; one wins, the rest are "other".
            self.reader[keys[unclaimed]] = who[unclaimed]
            first = self.reader[keys]
        other = first != who
        if other.any():
            self.other_reader[keys[other]] = who[other]
        return None

    def write(self, keys, who):
        """Record that thread who[i] writes element keys[i]; the first write of what another
        thread wrote or read (in this phase or in this very store), or None."""
        conflict = _first(self.writer[keys], who, "write after write")
        if conflict is not None:
            return conflict
        first = self.reader[keys]
        reader = np.where(first != who, first, self.other_reader[keys])
        conflict = _first(reader, who, "write after read")
        if conflict is not None:
            return conflict
        self.writer[keys] = who
        # Where several lanes wrote one element, only one identity stuck: the others raced.
        return _first(self.writer[keys], who, "same store")

    def reset(self, rows, row_size):
        """Forget the phase of the given rows (blocks) of a log laid out row by row."""
        for log in (self.writer, self.reader, self.other_reader):
            log.reshape(-1, row_size)[rows] = NOBODY


def _first(recorded, who, kind):
    """The first lane whose element was touched by a thread other than itself."""
    clash = (recorded != NOBODY) & (recorded != who)
    if not clash.any():
        return None
    lane = int(np.argmax(clash))
    return Conflict(lane, int(recorded[lane]), kind)
