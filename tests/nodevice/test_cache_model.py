"""Data movement through a cache from loop-IR footprints (codegen.cache_model)."""

from codegen.cache_model import Cache, CacheModel
from codegen.ir import Buffer, For, Store, loop_var
from flexsched.expr import Load

KIB = 1024


def loops(extents, leaf):
    """Serial loops outer to inner around leaf(variables)."""
    variables = [loop_var(f"v{depth}", extent) for depth, extent in enumerate(extents)]
    body = leaf(variables)
    for var, extent in reversed(list(zip(variables, extents))):
        body = For(var, extent, "serial", body)
    return body


def test_a_nest_that_fits_moves_nothing_from_one_call_to_the_next():
    a = Buffer("A", (64, 64), "float32")
    nest = loops([64, 64], lambda v: Store(a, (v[0], v[1]), Load(a, (v[0], v[1]), "float32") + 1.0))
    model = CacheModel(nest)
    assert model.footprint() == {a: 16 * KIB}
    assert model.moved(Cache(32 * KIB)) == 0
    # in 8 KiB a row at a time fits: each line comes in once, and A is written back too
    assert model.moved(Cache(8 * KIB)) == 2 * 16 * KIB


def test_a_column_walk_refetches_its_lines_when_they_do_not_stay():
    b = Buffer("B", (1024, 1024), "float32")
    out = Buffer("O", (16,), "float32")
    nest = loops([16, 1024], lambda v: Store(out, (v[0],), Load(out, (v[0],), "float32") + Load(b, (v[1], v[0]),
                                                                                                   "float32")))
    model = CacheModel(nest)
    # one column touches a line in each of 1024 rows: 64 KiB, more than 32 KiB holds, so every
    # column brings its 1024 lines again; 128 KiB holds them across columns
    assert model.moved(Cache(32 * KIB)) == 16 * (64 * KIB + 2 * 64)   # O's line too, filled and written back
    assert model.moved(Cache(128 * KIB)) == 0


def test_rows_a_page_apart_thrash_a_set_of_an_associative_cache():
    def nest(rows):
        a = Buffer("A", (rows, 1024), "float32")
        out = Buffer("O", (rows,), "float32")
        return loops([16, rows], lambda v: Store(out, (v[1],), Load(a, (v[1], v[0]), "float32")))

    # 32 lines, one per row, all in one set of a 64-set cache: an 8-way set holds too few of them
    assert CacheModel(nest(32)).moved(Cache(32 * KIB)) == 0
    assert CacheModel(nest(32)).moved(Cache(32 * KIB, ways=8)) > 16 * 32 * 64
    # 16 rows stay within twice the ways, as a real L1 mostly keeps them
    assert CacheModel(nest(16)).moved(Cache(32 * KIB, ways=8)) == 0
