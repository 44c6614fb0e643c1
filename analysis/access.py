"""Access patterns: which loops index which dimension of which tensor, with what coefficients."""

from flexsched.affine import affine_form
from flexsched.expr import IterVar, Load, walk

from .info import Access, IndexAccess


def index_access(expr):
    loops = tuple(dict.fromkeys(node.name for node in walk(expr) if isinstance(node, IterVar)))
    form = affine_form(expr)
    if form is None:
        return IndexAccess(str(expr), loops, affine=False)
    coef, offset = form
    return IndexAccess(str(expr), loops, True, tuple(sorted(coef.items(), key=lambda kv: loops.index(kv[0]))),
                       offset)


def read_accesses(body):
    """Every distinct tensor read in a body, in first-use order."""
    seen = {}
    for node in walk(body):
        if isinstance(node, Load):
            access = Access(node.tensor.name, tuple(index_access(i) for i in node.indices))
            seen.setdefault(access, access)
    return tuple(seen)


def write_access(tensor):
    """The output write: element (i, j, ...) of the node's own loop nest."""
    return Access(tensor.name, tuple(IndexAccess(a.name, (a.name,), True, ((a.name, 1),), 0)
                                     for a in tensor.axes))
