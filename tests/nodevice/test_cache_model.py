"""Data movement through a cache from loop-IR footprints (codegen.cache_model)."""

from codegen.cache_model import Cache, CacheModel
from codegen.ir import Buffer, For, IfThenElse, Store, loop_var
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


def test_a_versioned_body_moves_what_one_of_its_copies_moves():
    # A tile's fast and guarded copies read the same row; each iteration runs one of them.
    a = Buffer("A", (64, 1024), "float32")
    out = Buffer("O", (64,), "float32")

    def row(i):
        j = loop_var("j", 1024)
        return For(j, 1024, "serial", Store(out, (i,), Load(out, (i,), "float32") + Load(a, (i, j), "float32")))

    plain = CacheModel(loops([64], lambda v: row(v[0])))
    versioned = CacheModel(loops([64], lambda v: IfThenElse(v[0] < 60, row(v[0]), row(v[0]))))
    cache = Cache(2 * KIB)   # less than a row of A: every copy streams its row through
    assert plain.moved(cache) == 64 * (4 * KIB + 2 * 64)
    assert versioned.moved(cache) == plain.moved(cache)
