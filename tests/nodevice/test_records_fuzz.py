"""Fuzzing the record loader: files of generated lines, valid and corrupt (random bytes, torn JSON,
wrong types, deep nesting, huge numbers, NaN, bytes that are not UTF-8). Loading never raises,
every valid record comes back whole, and every corrupt line is exactly one warning naming it."""

import json
import math
import string
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explore.record_schema import REQUIRED, STATUSES
from explore.records import CorruptRecordWarning, load_records

PRINTABLE = string.ascii_letters + string.digits + " _-.:é中"
words = st.text(alphabet=PRINTABLE, max_size=10)
names = st.text(alphabet=string.ascii_letters + "_", min_size=1, max_size=8)
finite = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.one_of(st.integers(-10**30, 10**30), finite, st.booleans(), words)
knob_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4), max_leaves=8)
configs = st.dictionaries(st.text(alphabet=PRINTABLE, min_size=1, max_size=12), knob_values, max_size=6)
naturals = st.integers(0, 10**30)


@st.composite
def results(draw):
    status = draw(st.sampled_from(STATUSES))
    if status == "ok":
        seconds = draw(st.floats(min_value=1e-300, max_value=1e300))
    else:
        seconds = draw(st.none() | st.floats(min_value=0.0, max_value=1e6))
    result = {"status": status, "seconds": seconds}
    if draw(st.booleans()):
        result["error"] = draw(words)
        result["details"] = draw(st.dictionaries(words, scalars, max_size=3))
    return result


OPTIONAL = {
    "trial": naturals, "point": st.lists(naturals, max_size=5), "elapsed": st.floats(0.0, 1e9),
    "gflops": st.none() | st.floats(0.0, 1e12), "judged_by": st.sampled_from(["measured", "modelled", ""]),
    "method": st.sampled_from(["q", "p", "random"]), "seed": st.none() | st.integers(-5, 10**20),
    "origin": st.none() | st.fixed_dictionaries({"start": st.lists(naturals, max_size=4), "direction": naturals}),
    "time": words, "version": words, "error": st.none() | words,
}


@st.composite
def records(draw):
    record = {"task": {"name": draw(names), "args": draw(st.lists(scalars, max_size=4)),
                       "module": draw(st.sampled_from(["flexsched.ops.linalg", "os", "evil"]))},
              "target": {"name": draw(words), "cores": draw(st.integers(1, 512))},
              "config": draw(configs), "result": draw(results())}
    for name in draw(st.lists(st.sampled_from(sorted(OPTIONAL)), unique=True, max_size=5)):
        record[name] = draw(OPTIONAL[name])
    return record


claims = st.fixed_dictionaries({"run": names, "pid": st.integers(1, 2**22), "host": words, "time": finite}).flatmap(
    lambda signature: st.one_of(st.just({**signature, "ended": True}),
                                st.lists(configs, max_size=3).map(
                                    lambda found: {**signature, "scope": "s", "configs": found})))

WRONG = [("result", "ok"), ("task", []), ("target", 1), ("config", [1]), ("result", {"status": "ok"}),
         ("trial", -1), ("trial", 1.5), ("point", [True]), ("elapsed", -0.5), ("gflops", "fast"),
         ("judged_by", None), ("origin", {"start": [1]}), ("seed", "0"), ("time", 5)]


def dump(data):
    return json.dumps(data).encode()


@st.composite
def corrupt_lines(draw):
    """The bytes of one line that must be rejected."""
    record = draw(records())
    kind = draw(st.sampled_from(["bytes", "torn", "wrong", "missing", "deep", "huge", "nan", "utf8", "args"]))
    if kind == "bytes":
        return draw(st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b
                                                               and b.strip() and b[:1] != b"{"))
    if kind == "torn":
        text = dump(record)
        return text[:draw(st.integers(1, len(text) - 1))]
    if kind == "wrong":
        name, value = draw(st.sampled_from(WRONG))
        return dump({**record, name: value})
    if kind == "missing":
        record.pop(draw(st.sampled_from(REQUIRED)))
        return dump(record)
    if kind == "deep":
        depth = draw(st.integers(33, 3000))
        return b'{"task": ' + b"[" * depth + b"]" * depth + b"}"
    if kind == "huge":
        return dump(record)[:-1] + b', "trial": ' + b"9" * draw(st.integers(4301, 6000)) + b"}"
    if kind == "nan":
        record["result"] = {"status": "ok", "seconds": draw(st.sampled_from([math.nan, math.inf, -1.0, 0.0]))}
        return dump(record)
    if kind == "utf8":
        text = dump(record)
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + text[at:]
    record["task"]["args"] = draw(st.sampled_from([3, "16", None, {"M": 1}]))
    return dump(record)


lines = st.lists(st.one_of(records().map(lambda r: ("record", dump(r))),
                           claims.map(lambda c: ("claim", dump({"claim": c}))),
                           corrupt_lines().map(lambda raw: ("corrupt", raw))), max_size=12)


@pytest.fixture(scope="module")
def fuzz_file(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz") / "records.jsonl"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines=lines)
def test_loading_generated_files_keeps_every_valid_record_and_reports_each_corrupt_line(fuzz_file, lines):
    fuzz_file.write_bytes(b"".join(raw + b"\n" for _, raw in lines))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = load_records(fuzz_file)
    expected = [(number, json.loads(raw)) for number, (kind, raw) in enumerate(lines, 1) if kind == "record"]
    assert [(record.line, dict(record.data)) for record in loaded] == expected
    corrupt = [number for number, (kind, _) in enumerate(lines, 1) if kind == "corrupt"]
    messages = [str(w.message) for w in caught]
    assert all(issubclass(w.category, CorruptRecordWarning) for w in caught)
    assert [int(message[len(str(fuzz_file)) + 1:].split(":")[0]) for message in messages] == corrupt
    assert all(message.startswith(f"{fuzz_file}:") and "skipped a corrupt record (" in message for message in messages)
