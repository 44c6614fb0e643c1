"""Merging contiguous axes: the same computation over fewer, longer dimensions.

Two adjacent dimensions of a tensor merge into one when every access to them, in every node,
is the pair of adjacent spatial axes of the accessing node, with the extents equal to the
dimensions, and those axes appear nowhere else. A 1x1 convolution's (h, w) is such a pair:
O[b, k, h, w] = sum P[b, rc, h, w] W[k, rc, 0, 0] computes the same as O[b, k, hw] over one
axis of H * W, which a schedule tiles as a matrix product's column (no padding of a 28-wide
row to 32 lanes, no row-crossing tiles). The memory of every tensor is unchanged (row-major,
so the merged tensor is a reshape), and a kernel keeps the caller's shapes at its interface.
A window access (h + rh), a condition on an axis or a transposed use keeps the dimensions apart.
"""

from __future__ import annotations

import functools
import math

from .expr import Binary, IterVar, Load, Reduce, transform, walk
from .reference import topological_order
from .tensor import Tensor


@functools.lru_cache(maxsize=64)
def merge_contiguous_axes(outputs):
    """{tensor name: tensor} of the computation producing `outputs` (a tuple of tensors) with every
    mergeable run of adjacent dimensions merged; the original tensors where nothing merges."""
    tensors = topological_order(outputs)
    joined = _joined_boundaries(tensors)
    if not any(joined.values()):
        return {t.name: t for t in tensors}
    merged = {}
    for tensor in tensors:
        merged[tensor.name] = _rebuilt(tensor, _groups(tensor, joined), merged, joined)
    return merged


def _joined_boundaries(tensors):
    """{(tensor name, d): whether dimensions d and d + 1 merge}, the largest consistent choice:
    start with every boundary joined and split the ones an access contradicts until none does."""
    joined = {(t.name, d): True for t in tensors for d in range(t.ndim - 1)}
    computes = [t for t in tensors if not t.is_placeholder]
    changed = True
    while changed:
        changed = False
        for node in computes:
            for key in _contradicted(node, joined):
                if joined[key]:
                    joined[key], changed = False, True
    return joined


def _contradicted(node, joined):
    """Boundaries that node's body contradicts: of a tensor it reads, where the two indices are not
    the node's adjacent axes joined at the same place; of the node, where one of its two axes is
    used other than as such a pair. (Removing a boundary never lifts a contradiction, so splitting
    until none is left finds the largest consistent choice.)"""
    position = {id(axis): i for i, axis in enumerate(node.axes)}
    uses = [0] * len(node.axes)
    for n in walk(node.body):
        if isinstance(n, IterVar) and id(n) in position:
            uses[position[id(n)]] += 1
    plain_uses = [0] * len(node.axes)
    broken = set()   # boundaries of the node a use contradicts

    def pair(tensor, indices, d):
        """The node's boundary i when indices d, d + 1 are its axes i, i + 1 of the tensor's extents."""
        x, y = _plain_axis(indices[d], position), _plain_axis(indices[d + 1], position)
        if x is None or y is None or position[id(y)] != position[id(x)] + 1:
            return None
        if (tensor.shape[d], tensor.shape[d + 1]) != (x.extent, y.extent):
            return None
        return position[id(x)]

    for load in (n for n in walk(node.body) if isinstance(n, Load)):
        tensor, indices = load.tensor, load.indices
        for d in range(tensor.ndim - 1):
            i = pair(tensor, indices, d)
            if joined[(tensor.name, d)] and (i is None or not joined[(node.name, i)]):
                yield (tensor.name, d)
        for d, index in enumerate(indices):
            axis = _plain_axis(index, position)
            if axis is None:
                continue
            i = position[id(axis)]
            plain_uses[i] += 1
            # Its boundary with the next axis needs the next index to be that axis, joined; with the
            # previous axis, the previous index.
            if d + 1 >= tensor.ndim or pair(tensor, indices, d) != i or not joined[(tensor.name, d)]:
                broken.add(i)
            if d == 0 or pair(tensor, indices, d - 1) != i - 1 or not joined[(tensor.name, d - 1)]:
                broken.add(i - 1)
    for i, (count, plain) in enumerate(zip(uses, plain_uses)):
        if count != plain:   # used in arithmetic or a condition: neither boundary can hold
            broken.update((i - 1, i))
    for i in sorted(broken):
        if 0 <= i < len(node.axes) - 1 and joined[(node.name, i)]:
            yield (node.name, i)


def _plain_axis(index, position):
    """The node axis an index is, where it is one: the axis itself, or plus axes of extent 1
    (always 0, as a 1x1 kernel's taps in h + rh); else None."""
    terms, stack = [], [index]
    while stack:
        term = stack.pop()
        if isinstance(term, Binary) and term.op == "+":
            stack.extend((term.a, term.b))
        elif isinstance(term, IterVar):
            terms.append(term)
        else:
            return None
    axes = [term for term in terms if id(term) in position]
    if len(axes) != 1 or any(term.extent != 1 for term in terms if term is not axes[0]):
        return None
    return axes[0]


def _groups(tensor, joined):
    """Tensor's dimensions as runs [(first, last), ...] that merge."""
    groups, first = [], 0
    for d in range(tensor.ndim):
        if d == tensor.ndim - 1 or not joined[(tensor.name, d)]:
            groups.append((first, d))
            first = d + 1
    return groups


def _rebuilt(tensor, groups, merged, joined):
    """Tensor with its dimension groups merged; its body reads the merged tensors in `merged`."""
    shape = tuple(math.prod(tensor.shape[a:b + 1]) for a, b in groups)
    if tensor.is_placeholder:
        return Tensor(tensor.name, shape, tensor.dtype, tag=tensor.tag)
    taken = {axis.name for axis in tensor.axes} | {axis.name for axis in tensor.reduce_axes}
    position = {id(axis): i for i, axis in enumerate(tensor.axes)}
    axes, replaced = [], {}
    for (a, b), extent in zip(groups, shape):
        if a == b:
            axes.append(tensor.axes[a])
            continue
        names = [axis.name for axis in tensor.axes[a:b + 1]]
        name = "".join(names) if "".join(names) not in taken else "_".join(names)
        axes.append(IterVar(name, extent, "spatial"))
        replaced[id(tensor.axes[a])] = axes[-1]

    def rule(node):
        if not isinstance(node, Load):
            return None
        source = merged[node.tensor.name]
        indices = []
        for a, b in _groups(node.tensor, joined):
            indices.append(node.indices[a] if a == b else replaced[id(_plain_axis(node.indices[a], position))])
        return Load(source, tuple(indices), node.dtype)

    body = tensor.body
    if isinstance(body, Reduce):
        body = Reduce(body.combiner, transform(body.source, rule), body.axes, body.dtype)
    else:
        body = transform(body, rule)
    return Tensor(tensor.name, shape, tensor.dtype, tuple(axes), body, tensor.tag)
