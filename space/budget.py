"""Turn capability limits over products of split factors into per-loop caps.

Coupled limits (threads per block, a register tile, shared memory) bound products and sums
of products of split factors over several loops. Capping each factor of each loop, with the
limits checked at the largest tiles the caps allow, keeps the space a plain product of knobs
whose every point obeys every limit (footprints only grow with tiles). FPGA spaces do not use
this: boxing the DSP budget this way cut a 3x3 convolution's PE array to 768 of 1368 lanes, so
their DSP and BRAM limits are checked by the model instead (space/fpga.py).
"""


def grow_caps(groups, fits):
    """Caps grown together: {group: {loop: cap}} starting at 1, doubling round-robin (loop by
    loop, group by group) while each doubling keeps fits(caps) true and the cap below the
    loop's extent. groups maps a group name to {loop: extent}."""
    caps = {group: {loop: 1 for loop in extents} for group, extents in groups.items()}
    turns = [(group, loop) for loop in dict.fromkeys(l for e in groups.values() for l in e)
             for group in groups if loop in groups[group]]
    grew = True
    while grew:
        grew = False
        for group, loop in turns:
            if caps[group][loop] >= groups[group][loop]:
                continue
            caps[group][loop] *= 2
            if fits(caps):
                grew = True
            else:
                caps[group][loop] //= 2
    return caps


def largest_power_of_two(limit):
    """The largest power of two <= limit (at least 1)."""
    power = 1
    while power * 2 <= limit:
        power *= 2
    return power
