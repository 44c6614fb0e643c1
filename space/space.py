"""A schedule space: a product of knobs whose every point is a legal schedule, of which a search
proposes those its target's rules say fit (the rest are legal and known to be slow).

A point is a tuple of value indices, one per knob. Each move changes one knob along one of
its directions (a split's (i, j) rearrangement pair, ±1 for an ordered choice, any other value
for an unordered one), and directions
have a stable global index, which the Q-network's outputs follow.
"""

from __future__ import annotations

import math

import numpy as np

from flexsched.errors import FlexschedError

from .config import Config


class SpaceError(FlexschedError, ValueError):
    """A point or config that does not belong to a space."""


GENERATED = "generated"
# Random draws a fitting point may take: the rules leave out a corner of the product, never most of it.
MAX_FITTING_DRAWS = 1000


class Space:
    """Knobs for one computation and target, and the rule that turns a point into a Schedule.

    name says where the space came from ("generated", or "template:OP:NAME" for a hand-written
    template) and version which revision of it: records name both, so the points of one space
    are never read as points of another."""

    def __init__(self, info, target, knobs, emit, name=GENERATED, version=1, family=None, fits=None,
                 broad_family=None):
        self.info = info
        self.target = target
        self.name = name
        self.version = int(version)
        self.knobs = tuple(knobs)
        self._emit = emit  # Config -> Schedule, the target's fixed decisions
        self._family = family  # Config -> hashable kind of kernel, or None where all are one kind
        self._broad_family = broad_family or family  # Config -> a coarser kind, grouping some families
        self._fits = fits  # Config -> whether a search proposes it, or None where every point does
        self.directions = tuple((k, d) for k, knob in enumerate(self.knobs) for d in range(knob.num_directions))
        self._offsets = np.cumsum([0] + [knob.encoding_length for knob in self.knobs])
        names = [knob.name for knob in self.knobs]
        if len(set(names)) != len(names):
            raise SpaceError(f"knob names repeat in {names}")

    @property
    def size(self):
        """The exact number of points of the product, fitting or not (a Python int: it overflows floats
        for large graphs)."""
        return math.prod(knob.num_values for knob in self.knobs)

    @property
    def num_knobs(self):
        return len(self.knobs)

    @property
    def num_directions(self):
        return len(self.directions)

    @property
    def encoding_length(self):
        return int(self._offsets[-1])

    def direction_name(self, direction):
        knob_index, knob_direction = self.directions[direction]
        knob = self.knobs[knob_index]
        return f"{knob.name}{knob.directions[knob_direction]}"

    def _check(self, point):
        if len(point) != len(self.knobs):
            raise SpaceError(f"a point of this space has {len(self.knobs)} indices, got {len(point)}")
        for knob, index in zip(self.knobs, point):
            if not 0 <= index < knob.num_values:
                raise SpaceError(f"knob '{knob.name}' has {knob.num_values} values; index {index} is outside")
        return tuple(int(i) for i in point)

    def fits(self, point):
        """Whether a search proposes the point: every point is legal, and the target's rules leave out
        those they know to be slow (on a CPU, a register tile past what its registers hold)."""
        return self._fits is None or bool(self._fits(self.config(point)))

    def random_point(self, rng):
        """A uniformly random fitting point; rng is a numpy Generator or a seed."""
        rng = np.random.default_rng(rng)
        for _ in range(MAX_FITTING_DRAWS):
            point = tuple(int(rng.integers(knob.num_values)) for knob in self.knobs)
            if self.fits(point):
                return point
        raise SpaceError(f"none of {MAX_FITTING_DRAWS} random points of the space of {self.info.task} fits "
                         f"its target's limits")

    def move(self, point, direction):
        """The neighbour along a direction, or None where the knob has no value that way or the
        neighbour does not fit."""
        point = self._check(point)
        knob_index, knob_direction = self.directions[direction]
        moved = self.knobs[knob_index].move(point[knob_index], knob_direction)
        if moved is None:
            return None
        neighbour = point[:knob_index] + (moved,) + point[knob_index + 1:]
        return neighbour if self.fits(neighbour) else None

    def neighbours(self, point):
        """[(direction, neighbour), ...] for every direction that leads to a fitting point."""
        point = self._check(point)  # once, not once per direction: this runs in the search loop
        result = []
        for direction, (knob_index, knob_direction) in enumerate(self.directions):
            moved = self.knobs[knob_index].move(point[knob_index], knob_direction)
            if moved is not None:
                neighbour = point[:knob_index] + (moved,) + point[knob_index + 1:]
                if self.fits(neighbour):
                    result.append((direction, neighbour))
        return result

    def encode(self, point):
        """A fixed-length float32 vector in [0, 1] describing the point, for learning."""
        point = self._check(point)
        vector = np.empty(self.encoding_length, dtype=np.float32)
        for knob, index, start in zip(self.knobs, point, self._offsets):
            vector[start:start + knob.encoding_length] = knob.encode(index)
        return vector

    def config(self, point):
        point = self._check(point)
        return Config(tuple((knob.name, knob.values[index]) for knob, index in zip(self.knobs, point)))

    def point(self, config):
        """The point of a Config (e.g. read back from a record)."""
        return self._indices(config, lambda knob, value: knob.index_of(value))

    def nearest_point(self, config):
        """The point nearest a config of another task's space with the same knobs (each knob's
        own value where it has it, else its nearest one); SpaceError naming the knob that has
        no value near, or that the config lacks."""
        return self._indices(config, lambda knob, value: knob.nearest_index(value))

    def _indices(self, config, index_of):
        """Each knob's index of the config's value by index_of(knob, value), which raises ValueError."""
        indices = []
        for knob in self.knobs:
            if config.get(knob.name) is None:
                raise SpaceError(f"config has no value for knob '{knob.name}'")
            try:
                indices.append(index_of(knob, config[knob.name]))
            except ValueError as err:
                raise SpaceError(str(err)) from None
        return tuple(indices)

    def family(self, point):
        """The kind of kernel a point makes (on a CPU: where each reduction accumulates and which
        axis its register tile vectorises); () where the space has one kind only. A search starts
        from the best of several kinds, since a climb seldom crosses from one to another."""
        return self._family(self.config(point)) if self._family is not None else ()

    def broad_family(self, point):
        """A coarser kind than family's, grouping kinds a search need not start from in turn (on a CPU,
        the tile widths of one axis): its starts go round the broad kinds, and the kinds in one share
        its turns."""
        return self._broad_family(self.config(point)) if self._broad_family is not None else ()

    def schedule(self, point_or_config):
        """The Schedule (a list of primitive steps) a point stands for."""
        config = point_or_config if isinstance(point_or_config, Config) else self.config(point_or_config)
        return self._emit(config)

    def identity(self):
        """{"name", "version"}: what a record stores to say which space its point belongs to."""
        return {"name": self.name, "version": self.version}

    def to_dict(self):
        return {
            "task": self.info.task,
            "space": self.identity(),
            "target": self.target.to_dict(),
            "size": self.size,
            "num_knobs": self.num_knobs,
            "num_directions": self.num_directions,
            "encoding_length": self.encoding_length,
            "knobs": [knob.to_dict() for knob in self.knobs],
        }
