"""Knobs: the dimensions of a schedule space, each a finite ordered tuple of values with directions.

A point of the space stores, per knob, the index of its chosen value. Split knobs follow
FlexTensor section 4.2: the factorisations of a loop are rearranged into a space of N(N-1)
directions, so that a move changes the split of only two sub-loops.
"""

import functools
import math
import operator
from bisect import bisect_right

# A guarded split pads the extent up to a multiple of one of these, for round tiles.
GUARD_MULTIPLES = (2, 4, 8, 16, 32)
# Padding beyond 15% wastes more work on guarded-off iterations than round tiles win back.
GUARD_SLACK_PERCENT = 115


def _ceil_div(numerator, denominator):
    """Integer ceiling division, exact where float division is not."""
    return -(-numerator // denominator)


def _logs(factors):
    """Base-2 logarithms of a split's factors."""
    return [math.log2(factor) for factor in factors]


def _split_distance(logs, candidate_logs):
    """SplitKnob's distance between two splits given as their factors' logarithms."""
    ratios = [abs(a - b) for a, b in zip(logs, candidate_logs)]
    return ratios[-1], sum(ratios[1:-1]), ratios[0]


def _divisors(number):
    """All divisors in increasing order, so factorisations come out in lexicographic order."""
    small, large = [], []
    candidate = 1
    while candidate * candidate <= number:
        if number % candidate == 0:
            small.append(candidate)
            if candidate * candidate != number:
                large.append(number // candidate)
        candidate += 1
    return small + large[::-1]


def _factorisations(number, caps):
    """Every ordered tuple of len(caps) factors whose product is number, each within its cap."""
    divisors = _divisors(number)
    found = []

    def extend(prefix, remaining, position):
        if position == len(caps):
            if remaining == 1:
                found.append(prefix)
            return
        cap = caps[position]
        if position == len(caps) - 1:
            if cap is None or remaining <= cap:
                found.append(prefix + (remaining,))
            return
        for factor in divisors:
            if factor > remaining or (cap is not None and factor > cap):
                break
            if remaining % factor == 0:
                extend(prefix + (factor,), remaining // factor, position + 1)

    extend((), number, 0)
    return found


def _guarded_factorisations(extent, caps):
    """Round tiles of a slightly padded extent; the ceil-divided outer loop never idles."""
    paddeds = sorted({_ceil_div(extent, multiple) * multiple for multiple in GUARD_MULTIPLES})
    found = []
    for padded in paddeds:
        if padded == extent or padded * 100 > GUARD_SLACK_PERCENT * extent:
            continue
        for inner in _divisors(padded):
            outer = padded // inner
            if outer != _ceil_div(extent, inner) or (caps[0] is not None and outer > caps[0]):
                continue
            found.extend((outer,) + rest for rest in _factorisations(inner, caps[1:]))
    return found


def _padded_inner_factorisations(extent, caps, exact=()):
    """Splits whose innermost factor does not divide the extent: the tiles, ceil-divided, run at
    one outer level (the others 1), or at one inner level under an outermost factor from
    GUARD_MULTIPLES, so a parallel outer loop keeps a packed panel shared by many tiles (a register
    tile of 6 rows over 1024 rows as 2 x 86 x 6: AVX2 code, GMM ran at 1.09-1.12x oneDNN, against
    0.55-0.57 as 171 x 6, whose every tile packed its own panel), or under the middle factors of
    any of the `exact` splits with the outermost factor ceil-divided, so that a move changes the
    innermost factor of a split and keeps its middle ones (2 x 2 x 2-vector register tiles of YOLO
    C4 took 3 rows only from splits whose middle factors were all 1 or a tile count). The tiles past
    the end run a guarded copy (codegen.peel peels a last one off, codegen.version tests each before
    it starts). Not every factorisation of the tile count: those would mostly add odd factors
    (171 = 9 x 19) that crowd the knob's moves."""
    found = []
    middles = {value[1:-1] for value in exact}
    for inner in range(2, (caps[-1] or 0) + 1):
        tiles = _ceil_div(extent, inner)
        if extent % inner == 0 or tiles * inner * 100 > GUARD_SLACK_PERCENT * extent:
            continue
        for level, cap in enumerate(caps[:-1]):
            if cap is None or tiles <= cap:
                found.append(tuple(tiles if position == level else 1 for position in range(len(caps) - 1)) + (inner,))
        for outermost in GUARD_MULTIPLES:
            rest = _ceil_div(tiles, outermost)
            # The outermost factor must be the ceil-divided rest of the extent, as a guarded split's is.
            if rest < 2 or _ceil_div(extent, rest * inner) != outermost:
                continue
            if caps[0] is not None and outermost > caps[0]:
                continue
            for level, cap in enumerate(caps[1:-1], 1):
                if cap is None or rest <= cap:
                    found.append((outermost,) + tuple(rest if position == level else 1
                                                      for position in range(1, len(caps) - 1)) + (inner,))
        for middle in middles:
            covered = math.prod(middle) * inner
            outermost = _ceil_div(extent, covered)
            if (outermost * covered * 100 <= GUARD_SLACK_PERCENT * extent
                    and (caps[0] is None or outermost <= caps[0])):
                found.append((outermost, *middle, inner))
    return found


def _as_tuples(value):
    """Lists become tuples, so that values read back from JSON are found."""
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuples(item) for item in value)
    return value


class _Knob:
    """Behaviour shared by every knob: checks, lookup, neighbours, immutability once built."""

    kind = "knob"

    def __setattr__(self, attribute, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(f"{self.kind} knob {self.name!r} is immutable")
        object.__setattr__(self, attribute, value)

    @property
    def num_values(self):
        """How many values the knob offers, the size of its dimension."""
        return len(self.values)

    @property
    def num_directions(self):
        """How many ways a point can move along this knob."""
        return len(self.directions)

    def neighbours(self, index):
        """Every index reachable in one move, each once, in direction order."""
        reachable = []
        for direction in range(self.num_directions):
            target = self.move(index, direction)
            if target is not None and target not in reachable:
                reachable.append(target)
        return reachable

    def index_of(self, value):
        """The index that stores value in a point."""
        try:
            return self._index_by_value[_as_tuples(value)]
        except (KeyError, TypeError):
            raise self._error(f"no value {value!r}") from None

    def nearest_index(self, value):
        """The index of value, or of the knob's value nearest to it (a point of another task's
        space carried over); ValueError where nothing is near (an unknown choice)."""
        value = _as_tuples(value)
        if value in self._index_by_value:
            return self._index_by_value[value]
        distances = self._distances(value)
        if all(distance is None for distance in distances):
            raise self._error(f"no value near {value!r}")
        return min((distance, index) for index, distance in enumerate(distances) if distance is not None)[1]

    def _distances(self, value):
        """_distance from value to each of the knob's values, in order."""
        return [self._distance(value, candidate) for candidate in self.values]

    def _distance(self, value, candidate):
        """How far candidate is from value (None: not comparable); plain numbers by ratio."""
        if isinstance(value, int) and isinstance(candidate, int) and value > 0 and candidate > 0:
            return abs(math.log2(value) - math.log2(candidate))
        return None

    def to_dict(self):
        """A JSON-friendly summary for reports and logs."""
        return {"name": self.name, "kind": self.kind,
                "num_values": self.num_values, "num_directions": self.num_directions}

    def __repr__(self):
        return f"<{type(self).__name__} {self.name!r}: {self.num_values} values>"

    def _set_name(self, name, kind):
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"knob {name!r}: kind must be a non-empty str, got {kind!r}")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{kind} knob: name must be a non-empty str, got {name!r}")
        self.kind = kind
        self.name = name

    def _error(self, message):
        return ValueError(f"{self.kind} knob {self.name!r}: {message}")

    def _checked_index(self, index):
        # operator.index accepts numpy integers, which explorers often hold.
        try:
            index = operator.index(index)
        except TypeError:
            raise self._error(f"index must be an int, got {index!r}") from None
        if not 0 <= index < self.num_values:
            raise self._error(f"index must be in [0, {self.num_values}), got {index}")
        return index

    def _checked_direction(self, direction):
        try:
            direction = operator.index(direction)
        except TypeError:
            raise self._error(f"direction must be an int, got {direction!r}") from None
        if not 0 <= direction < self.num_directions:
            raise self._error(f"direction must be in [0, {self.num_directions}), got {direction}")
        return direction

    def _freeze(self):
        self._index_by_value = {value: index for index, value in enumerate(self.values)}
        self._frozen = True


class SplitKnob(_Knob):
    """How a loop of trip count extent is split into parts factors, outer to inner."""

    def __init__(self, name, extent, parts, caps=None, guarded=True, floors=None, padded_inner=False):
        self._set_name(name, "split")
        self.extent = self._positive_int("extent", extent)
        self.parts = self._positive_int("parts", parts)
        self.caps = self._checked_caps(caps)
        self.floors = self._checked_caps(floors)  # the smallest factor each part may take
        self.guarded = bool(guarded)
        exact = sorted(_factorisations(self.extent, self.caps))
        padded = sorted(_guarded_factorisations(self.extent, self.caps)) if self.guarded else []
        if self.guarded and padded_inner and self.parts > 1:
            padded += sorted(set(_padded_inner_factorisations(self.extent, self.caps, exact)) - set(padded))
        values = [value for value in exact + padded
                  if all(floor is None or factor >= floor for factor, floor in zip(value, self.floors))]
        if not values:
            raise self._error(f"caps {self.caps} and floors {self.floors} leave no split of extent {self.extent}")
        self.values = tuple(values)
        self.directions = tuple((up, down) for up in range(self.parts)
                                for down in range(self.parts) if up != down)
        largest_factor = max(max(value) for value in self.values)
        self._log_bound = math.log2(max(2, largest_factor))
        self._groups_by_direction = {}
        self._moves = {}
        self._freeze()

    @property
    def encoding_length(self):
        """One number per factor."""
        return self.parts

    def _distances(self, value):
        """Each value's distance from value: by the innermost factor's ratio first (the register or
        vector tile, whose shape matters most), then the other inner factors' ratios (the outermost
        follows from the extent); ties go to the nearer outermost factor. (YOLO C3, AVX-512: GMM's best
        with its 32-wide column tile kept ran at 1.38 of oneDNN, moved by the sum of all inner ratios
        to a 28-wide one at 1.13.)"""
        # value checked once and the knob's logarithms kept: a transfer from a record file asks
        # thousands of these, each over every split of a loop.
        if not self._comparable(value):
            return [None] * len(self.values)
        logs = _logs(value)
        return [_split_distance(logs, candidate) for candidate in self._log_values]

    def _comparable(self, value):
        """Whether value is a split this knob can measure a distance to: as many positive int factors as parts."""
        return (isinstance(value, tuple) and len(value) == self.parts
                and all(isinstance(factor, int) and factor > 0 for factor in value))

    @functools.cached_property
    def _log_values(self):
        """Each value's factors as base-2 logarithms."""
        return tuple(_logs(value) for value in self.values)

    def is_guarded(self, index):
        """Whether this split pads the loop and so needs a boundary guard."""
        return math.prod(self.values[self._checked_index(index)]) != self.extent

    def encode(self, index):
        """Log-scaled factors, since tile sizes matter by ratio rather than by difference."""
        value = self.values[self._checked_index(index)]
        return tuple(math.log2(factor) / self._log_bound for factor in value)

    def move(self, index, direction):
        """The nearest value with a larger factor at up and a smaller one at down, others kept."""
        index = self._checked_index(index)
        direction = self._checked_direction(direction)
        key = (index, direction)
        if key not in self._moves:
            self._moves[key] = self._nearest(index, direction)
        return self._moves[key]

    def _nearest(self, index, direction):
        up, down = self.directions[direction]
        start = self.values[index]
        members, up_factors = self._group(direction, start)
        best_index, best = None, None
        # The cost log(g_up/f_up) + log(f_down/g_down) orders candidates as g_up/g_down does;
        # compared by cross-multiplication so that ties are exact.
        for position in range(bisect_right(up_factors, start[up]), len(members)):
            candidate = self.values[members[position]]
            if best is not None and candidate[up] * best[down] >= best[up] * start[down]:
                break  # g_up/g_down > g_up/f_down, which only grows from here on
            if candidate[down] < start[down] and (
                    best is None or candidate[up] * best[down] < best[up] * candidate[down]):
                best_index, best = members[position], candidate
        return best_index

    def _group(self, direction, value):
        """Values sharing value's factors outside the direction's pair, by ascending up factor."""
        up, down = self.directions[direction]
        if direction not in self._groups_by_direction:
            members_by_key = {}
            for index, other in enumerate(self.values):
                members_by_key.setdefault(self._group_key(other, up, down), []).append(index)
            groups = {}
            for key, members in members_by_key.items():
                # A stable sort, so equal up factors stay in value order for tie-breaking.
                members.sort(key=lambda member: self.values[member][up])
                groups[key] = (members, [self.values[member][up] for member in members])
            self._groups_by_direction[direction] = groups
        return self._groups_by_direction[direction][self._group_key(value, up, down)]

    @staticmethod
    def _group_key(value, up, down):
        return tuple(factor for position, factor in enumerate(value) if position not in (up, down))

    def _positive_int(self, field, number):
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise self._error(f"{field} must be >= 1, got {number!r}")
        return number

    def _checked_caps(self, caps):
        if caps is None:
            return (None,) * self.parts
        caps = tuple(caps)
        if len(caps) != self.parts:
            raise self._error(f"caps must have {self.parts} entries, got {len(caps)}")
        for cap in caps:
            if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
                raise self._error(f"caps entries must be None or ints >= 1, got {cap!r}")
        return caps


def _is_plain_value(value):
    """Whether value is an int, a str or a tuple of those, hashable and JSON-friendly."""
    if isinstance(value, tuple):
        return all(_is_plain_value(item) for item in value)
    return isinstance(value, (int, str))


class ChoiceKnob(_Knob):
    """A list of alternatives. Ordered (a size, a count): one step moves to the next or previous
    value. Unordered (a place, a strategy): one step moves to any other value, since no value
    lies between two others and walking past the ones in the way wastes a measurement on each."""

    def __init__(self, name, kind, values, ordered=True):
        self._set_name(name, kind)
        if isinstance(values, str):
            raise self._error(f"values must be a sequence, got {values!r}")
        values = tuple(values)
        if not values:
            raise self._error("values must not be empty")
        for value in values:
            if not _is_plain_value(value):
                raise self._error(f"values must be ints, strs or tuples of those, got {value!r}")
        if len(set(values)) != len(values):
            duplicates = sorted({repr(value) for value in values if values.count(value) > 1})
            raise self._error(f"values must be distinct, repeated: {', '.join(duplicates)}")
        self.values = values
        self.ordered = bool(ordered) or len(values) <= 2  # with two values both kinds move alike
        self.directions = ("+1", "-1") if self.ordered else tuple(f"={value}" for value in values)
        # Unordered values are one-hot, so the Q-network sees no false order between them.
        self.encoding_length = 1 if self.ordered else len(values)
        self._freeze()

    def move(self, index, direction):
        """Ordered: the next or previous value (None past either end: order has no wrap).
        Unordered: the direction's value (None where the point already has it)."""
        index = self._checked_index(index)
        direction = self._checked_direction(direction)
        if not self.ordered:
            return direction if direction != index else None
        target = index + (1 if direction == 0 else -1)
        return target if 0 <= target < self.num_values else None

    def _distance(self, value, candidate):
        """Only an ordered knob's numbers are near one another; an unordered value matches or not."""
        return super()._distance(value, candidate) if self.ordered else None

    def encode(self, index):
        """Ordered: position along the list, scaled to [0, 1]; unordered: one-hot."""
        index = self._checked_index(index)
        if not self.ordered:
            return tuple(1.0 if position == index else 0.0 for position in range(self.num_values))
        if self.num_values == 1:
            return (0.0,)
        return (index / (self.num_values - 1),)

    def to_dict(self):
        return {**super().to_dict(), "ordered": self.ordered}
