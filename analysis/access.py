"""Access patterns: which loops index which dimension of which tensor, with what coefficients."""

from flexsched.expr import Binary, Const, IterVar, Load, walk

from .info import Access, IndexAccess


def affine_form(expr):
    """({loop name: coefficient}, offset) of an index, or None if it uses // or %."""
    if isinstance(expr, IterVar):
        return {expr.name: 1}, 0
    if isinstance(expr, Const):
        return {}, int(expr.value)
    if not isinstance(expr, Binary):
        return None
    left, right = affine_form(expr.a), affine_form(expr.b)
    if left is None or right is None:
        return None
    (a_coef, a_off), (b_coef, b_off) = left, right
    if expr.op in ("+", "-"):
        sign = 1 if expr.op == "+" else -1
        coef = dict(a_coef)
        for name, value in b_coef.items():
            coef[name] = coef.get(name, 0) + sign * value
        return {k: v for k, v in coef.items() if v}, a_off + sign * b_off
    if expr.op == "*" and (not a_coef or not b_coef):
        scale, (coef, off) = (a_off, right) if not a_coef else (b_off, left)
        return {k: v * scale for k, v in coef.items() if v * scale}, off * scale
    return None  # // and %: quasi-affine


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
