"""Data footprints of loop tiles, from the analyzer's access coefficients (no operator code)."""

import math


def span(index, tiles, extent):
    """Distinct values one index dimension takes while each loop covers tiles[loop] values."""
    if index.affine:
        reach = 1 + sum(abs(coefficient) * (tiles.get(loop, 1) - 1) for loop, coefficient in index.coefficients)
    else:  # // or %: nothing finer is known than the whole dimension
        reach = extent if any(tiles.get(loop, 1) > 1 for loop in index.loops) else 1
    return min(reach, extent)


def footprint(access, tiles, shape):
    """Elements of access.tensor touched by one tile of the loops (monotone in every tile)."""
    return math.prod(span(index, tiles, extent) for index, extent in zip(access.indices, shape))


def reads_footprint(info, node, tiles):
    """Elements of every tensor the node reads, for one tile: what a cache must hold."""
    return sum(footprint(access, tiles, info.tensor(access.tensor).shape) for access in node.reads)
