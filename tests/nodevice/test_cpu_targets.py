"""CPU targets as TVM writes them (llvm -mcpu=... -mattr=...), and records that say which CPU they are of."""

import io
import json

import pytest

from explore.optimize import build_best, optimize
from explore.evaluator import ExplorationError
from explore.records import Record, load_records
from fake_evaluator import FakeEvaluator
from flexsched import cpus
from flexsched.cli import main
from flexsched.registry import get_task
from flexsched.target import LLVM_TARGET_VARIABLE, TargetError, cpu_target, get_target

HOST_CPU, HOST_FEATURES = cpus.host()
OTHER_CPU = "skylake" if HOST_CPU != "skylake" else "znver4"
GMM = get_task("GMM", 64, 64, 64)


@pytest.fixture(autouse=True)
def no_forced_target(monkeypatch):
    monkeypatch.delenv(LLVM_TARGET_VARIABLE, raising=False)


def test_the_host_is_llvm_however_it_is_spelt():
    host = get_target("llvm")
    assert host.name == "llvm" and host.cpu == HOST_CPU and host.features == HOST_FEATURES
    assert get_target(f"llvm -mcpu={HOST_CPU}") == host == get_target("llvm   ")
    assert host.vector_lanes in (4, 8, 16) and host.device.startswith("host CPU (")


def test_another_cpu_is_named_by_its_canonical_string():
    target = get_target(f"llvm  -mattr=-avx2,+fma -mcpu={OTHER_CPU}")
    assert target.name == f"llvm -mcpu={OTHER_CPU} -mattr=+fma,-avx2"
    assert (target.cpu, target.features) == (OTHER_CPU, "+fma,-avx2")
    assert get_target(target.name) == target


@pytest.mark.parametrize("text, lanes, registers", [
    ("llvm -mcpu=x86-64-v4", 16, 32),
    ("llvm -mcpu=x86-64-v4 -mattr=-avx512f", 8, 16),
    ("llvm -mcpu=haswell", 8, 16),
    ("llvm -mcpu=x86-64-v3 -mattr=-avx", 4, 16),
    ("llvm -mcpu=x86-64 -mattr=+avx512f", 16, 32),
    ("llvm -mcpu=x86-64", 4, 16),
    ("llvm -mcpu=x86-64-v3 -mattr=+avx10.1", 16, 32),
    ("llvm -mcpu=emeraldrapids", 16, 32),
])
def test_vector_lanes_follow_the_features(text, lanes, registers):
    target = get_target(text)
    assert (target.vector_lanes, target.vector_registers) == (lanes, registers)


def test_the_static_model_knows_the_caches_of_current_server_cores():
    # A core the table misses is priced with a modest default core's 512 KiB L2.
    for cpu in ("sapphirerapids", "emeraldrapids", "graniterapids"):
        assert (cpus.caches(cpu).l1, cpus.caches(cpu).l2) == (48 * 2**10, 2 * 2**20)
    assert cpus.caches("no-such-cpu") == cpus.DEFAULT_CACHES


def test_turning_a_feature_off_on_the_host_keeps_the_rest():
    target = get_target("llvm -mattr=-avx512f")
    assert "avx512f" not in cpus.enabled(target.features)
    assert not any(name.startswith("avx512") for name in cpus.enabled(target.features))
    assert cpus.enabled(target.features) <= cpus.enabled(HOST_FEATURES)
    assert target.vector_lanes <= 8
    if "avx512f" in cpus.enabled(HOST_FEATURES):
        assert target.name == f"llvm -mcpu={HOST_CPU} -mattr=-avx512f"
    else:
        assert target.name == "llvm"


def test_turning_avx512_off_leaves_avx2_on_an_avx10_cpu_too():
    """AVX10 includes AVX-512 (LLVM drops it with avx512f): -avx512f turns off every AVX-512 and AVX10 feature."""
    avx10 = cpus.parse("+avx,+avx2,+fma,+avx512f,+avx512bw,+avx512vl,+avx10.1,+avx10.2,+amx-tile")
    left = cpus.apply(avx10, {"avx512f": False})
    assert {name for name, on in left.items() if on} == {"avx", "avx2", "fma", "amx-tile"}
    assert cpus.vector_unit("x86-64", left) == (8, 16)


@pytest.mark.parametrize("text, expected", [
    ("llvm -mcpu", "'-mcpu' is not one of -mcpu=NAME"),
    ("llvm -O3", "'-O3' is not one of -mcpu=NAME, -mattr=+FEATURE,-FEATURE, -num-cores=N"),
    ("llvm -mattr=avx2", "feature 'avx2' must start with + or -"),
    ("llvm -num-cores=0", "-num-cores must be a whole number of at least 1, got '0'"),
    ("llvm -mcpu=a -mcpu=b", "-mcpu is given twice"),
])
def test_a_malformed_cpu_target_is_one_line(text, expected):
    with pytest.raises(TargetError) as raised:
        get_target(text)
    assert expected in str(raised.value) and "\n" not in str(raised.value)


def test_the_environment_variable_is_what_llvm_means(monkeypatch):
    monkeypatch.setenv(LLVM_TARGET_VARIABLE, "llvm -mattr=-avx512f")
    assert get_target("llvm") == cpu_target("llvm -mattr=-avx512f")
    assert cpu_target("llvm").name == "llvm"   # the host itself stays reachable
    monkeypatch.setenv(LLVM_TARGET_VARIABLE, "cuda")
    with pytest.raises(TargetError, match=f"^{LLVM_TARGET_VARIABLE}: target 'cuda': a CPU target starts with 'llvm'"):
        get_target("llvm")


def test_records_name_the_cpu_and_older_ones_still_match(tmp_path):
    log = tmp_path / "run.jsonl"
    optimize(GMM, "llvm", trials=3, method="random", log=str(log), evaluator=FakeEvaluator(), build_kernel=False)
    (record, *_) = load_records(log)
    host = get_target("llvm")
    assert record.target["cpu"] == HOST_CPU and record.target["features_digest"] == cpus.digest(HOST_FEATURES)
    assert "features" not in record.target and record.same_target(host)
    older = {key: value for key, value in record.target.items() if key not in ("cpu", "features_digest")}
    assert Record({**record.data, "target": older}, 1).same_target(host)
    other = {**record.target, "cpu": OTHER_CPU}
    assert not Record({**record.data, "target": other}, 1).same_target(host)


def rewrite_cpu(path, cpu):
    lines = [json.loads(line) for line in path.read_text().splitlines() if '"claim"' not in line]
    for data in lines:
        data["target"]["cpu"] = cpu
    path.write_text("".join(json.dumps(data) + "\n" for data in lines))


def test_best_lists_records_of_another_cpu_and_build_best_refuses_them(tmp_path):
    log = tmp_path / "elsewhere.jsonl"
    optimize(GMM, "llvm", trials=4, method="random", log=str(log), evaluator=FakeEvaluator(), build_kernel=False)
    rewrite_cpu(log, OTHER_CPU)   # as if tuned on another machine
    out = io.StringIO()
    assert main(["best", str(log)], out=out) == 0
    assert out.getvalue().startswith(f"GMM(64, 64, 64) on llvm -mcpu={OTHER_CPU}: 4 records")
    with pytest.raises(ExplorationError) as raised:
        build_best(log, GMM)
    message = str(raised.value)
    assert f"no successful record of GMM(64, 64, 64) for this CPU (llvm on {HOST_CPU}); the file's are of " \
           f"llvm -mcpu={OTHER_CPU}" in message and "\n" not in message
    with pytest.raises(ExplorationError, match="for this CPU"):
        build_best(log)   # the task from the file: none of this CPU either


def test_a_target_of_another_cpu_keeps_its_name_in_records(tmp_path):
    log = tmp_path / "cross.jsonl"
    target = f"llvm -mcpu={OTHER_CPU} -mattr=-avx512f"
    optimize(GMM, target, trials=3, method="random", log=str(log), evaluator=FakeEvaluator(), build_kernel=False)
    out = io.StringIO()
    assert main(["best", str(log)], out=out) == 0
    assert out.getvalue().startswith(f"GMM(64, 64, 64) on {target}: 3 records")
