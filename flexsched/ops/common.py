"""Building blocks shared by the operators: argument checks and the padding node."""

from ..errors import DefinitionError
from ..functions import all_of, select
from ..tensor import compute


def require(condition, message):
    """Raise a one-line DefinitionError unless condition holds."""
    if not condition:
        raise DefinitionError(message)


def check_at_least(minimum, **fields):
    """Each named integer argument is >= minimum."""
    for field, value in fields.items():
        require(isinstance(value, int) and value >= minimum,
                f"argument '{field}' must be an integer >= {minimum}, got {value!r}")


def pad(tensor, pads, axis_names, name="pad"):
    """A node that zero-pads `tensor` by pads[d] on both sides of each dimension d.

    Always a node of its own (even with no padding), as in the paper's mini-graphs; the
    schedule may inline it.
    """
    shape = tuple(n + 2 * p for n, p in zip(tensor.shape, pads))

    def body(*idx):
        source = tensor[tuple(x - p for x, p in zip(idx, pads))]
        inside = [cond for x, n, p in zip(idx, tensor.shape, pads) if p for cond in (x >= p, x < n + p)]
        return select(all_of(*inside), source, 0.0) if inside else source

    return compute(shape, body, name=name, axis_names=axis_names)
