"""Turn a capability budget over a product of factors into per-loop caps (powers of two).

Coupled limits (threads per block, DSP slices, a register tile) bound a product of split
factors over several loops. Capping each loop so that the caps multiply to at most the
budget keeps the space a plain product of knobs whose every point obeys the limit.
"""


def allocate(budget, extents):
    """{loop: cap} with the product of caps <= budget, doubling the smallest cap that still
    helps (cap below the loop's extent), larger extents first on ties."""
    caps = {loop: 1 for loop in extents}
    product = 1
    while True:
        growable = [loop for loop in caps if caps[loop] < extents[loop] and product * 2 <= budget]
        if not growable:
            return caps
        loop = min(growable, key=lambda name: (caps[name], -extents[name]))
        caps[loop] *= 2
        product *= 2


def largest_power_of_two(limit):
    """The largest power of two <= limit (at least 1)."""
    power = 1
    while power * 2 <= limit:
        power *= 2
    return power
