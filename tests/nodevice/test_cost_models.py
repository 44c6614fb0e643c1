"""Candidate features, learned cost models and model-guided search, judged by a fake evaluator."""

import io
import json
import math
from dataclasses import replace

import numpy as np
import pytest

from analysis import analyze
from codegen.features import KERNEL_LENGTH, NODE_LENGTH, VECTOR_LENGTH, features_of, statements
from codegen.kernel import lower_for
from explore.cost_model import CostModelError, Sample, load_model, make_model, model_from, samples_from_records
from explore.guided import ModelScreen
from explore.optimize import optimize
from fake_evaluator import FakeEvaluator, fake_seconds
from flexsched.cli import main
from flexsched.registry import get_task
from flexsched.stats import kendall_tau
from flexsched.target import get_target
from space import generate

GMM = get_task("GMM", 64, 64, 64)


@pytest.fixture(scope="module")
def landscape():
    """Features and fake seconds of 120 random GMM 64^3 points (failures included)."""
    target = get_target("llvm")
    space = generate(analyze(GMM), target)
    rng = np.random.default_rng(0)
    points = {space.random_point(rng) for _ in range(160)}
    samples = []
    for point in sorted(points)[:120]:
        config = space.config(point)
        seconds = math.inf if config.get("O.pack.A") == "S2" else fake_seconds(config)
        samples.append(Sample(features_of(GMM, space.schedule(point), target, space.info), seconds, "GMM"))
    return samples


def held_out_tau(model, samples):
    # Every third sample held out: the samples are sorted by point, so a block of the last ones
    # would hold the first knob's last values only, a different distribution from the training set.
    train = [s for index, s in enumerate(samples) if index % 3]
    test = [s for s in samples[::3] if math.isfinite(s.seconds)]
    model.fit(train)
    return kendall_tau(model.scores([s.features for s in test]), [-s.seconds for s in test])


def test_kendall_tau_counts_concordant_pairs():
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError, match="b: 3 values, but a has 2"):
        kendall_tau([1, 2], [1, 2, 3])


def test_features_read_the_loop_ir():
    target = get_target("llvm")
    _, lowered = lower_for(GMM, None, target)
    found = statements(lowered.func.body)
    update = max(found, key=lambda s: s.executions)
    assert update.executions == 64 ** 3
    store, *loads = update.accesses
    # The naive nest runs k innermost: O is reused along it, A is contiguous, B strides a row.
    assert store.stride == 0 and sorted(a.stride for a in loads) == [0, 1, 64]
    features = features_of(GMM, None, target)
    assert features.vector.shape == (VECTOR_LENGTH,) and features.nodes.shape[1] == NODE_LENGTH
    nodes = len(features.nodes)
    assert len(features.edges) == nodes - 1 and features.edges.max() < nodes  # a tree over the nest


def test_features_see_vectorisation():
    target = get_target("llvm")
    space = generate(analyze(GMM), target)
    rng = np.random.default_rng(3)
    lanes_of_hottest = KERNEL_LENGTH + 2   # log2(1 + vector lanes) of the hottest statement
    vectorised = [features_of(GMM, space.schedule(p), target, space.info).vector[lanes_of_hottest]
                  for p in (space.random_point(rng) for _ in range(20))]
    assert features_of(GMM, None, target).vector[lanes_of_hottest] == 1.0   # the naive nest: one lane
    assert max(vectorised) >= math.log2(1 + target.vector_lanes)   # a vector loop of at least one register


def test_features_count_cache_traffic():
    """Bytes moved through the three modelled caches: none where the operator fits, and a naive
    nest over a matrix too large for the first cache moves more into it than into the last."""
    target = get_target("llvm")
    moved = slice(6, 9)    # log2(1 + bytes) moved into the 48 KiB, 1 MiB and 32 MiB caches
    assert list(features_of(get_task("GMM", 16, 16, 16), None, target).vector[moved]) == [0.0, 0.0, 0.0]
    first, second, last = features_of(get_task("GMM", 256, 256, 256), None, target).vector[moved]
    assert first > second >= last and last == 0.0   # three 256 KiB matrices fit the last cache only


def test_xgb_ranks_held_out_candidates(landscape):
    pytest.importorskip("xgboost")
    assert held_out_tau(make_model("xgb"), landscape) > 0.25   # chance: 0 with a spread of about 0.1


def test_gnn_learns_the_order_it_is_trained_on(landscape):
    model = make_model("gnn", epochs=60)
    ranked = [s for s in landscape[:60] if math.isfinite(s.seconds)]
    model.fit(landscape[:60])
    assert kendall_tau(model.scores([s.features for s in ranked]), [-s.seconds for s in ranked]) > 0.3


@pytest.mark.parametrize("name", ["xgb", "gnn"])
def test_saved_model_scores_the_same(name, landscape, tmp_path):
    if name == "xgb":
        pytest.importorskip("xgboost")
    model = make_model(name, **({"epochs": 5} if name == "gnn" else {}))
    model.fit(landscape[:40])
    path = tmp_path / "model.json"
    model.save(path)
    again = load_model(str(path))
    features = [s.features for s in landscape[40:60]]
    np.testing.assert_allclose(again.scores(features), model.scores(features), rtol=1e-5)
    assert again.trained and model_from(str(path)).name == name


def test_bad_model_files_and_names_say_what_is_wrong(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(CostModelError, match="broken.json: not a saved cost model"):
        load_model(str(broken))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(CostModelError, match="no 'flexsched-cost-model' format field"):
        load_model(str(other))
    with pytest.raises(CostModelError, match="cannot read"):
        load_model(str(tmp_path / "missing.json"))
    with pytest.raises(CostModelError, match="unknown cost model 'forest'"):
        make_model("forest")


def test_untrained_model_changes_nothing_until_it_has_learned():
    pytest.importorskip("xgboost")
    plain = FakeEvaluator()
    optimize(GMM, trials=6, evaluator=plain, build_kernel=False, seed=2)
    guided = FakeEvaluator()
    result = optimize(GMM, trials=6, evaluator=guided, build_kernel=False, seed=2, cost_model="xgb")
    assert guided.calls == plain.calls and result.screened_out == 0


@pytest.mark.parametrize("method", ["q", "p", "random"])
def test_guided_search_measures_only_the_budget_and_screens_the_rest(method):
    pytest.importorskip("xgboost")
    evaluator = FakeEvaluator()
    result = optimize(GMM, trials=40, evaluator=evaluator, build_kernel=False, seed=1, method=method,
                      cost_model="xgb", screen_ratio=6)
    assert len(evaluator.calls) == 40 == len(set(evaluator.calls))
    assert result.screened_out > 0 and result.cost_model.trained
    assert result.summary()["cost_model"] == "xgb"


def test_guided_search_finds_better_points_for_the_same_measurements():
    """On the fake landscape a model-screened search beats an unscreened one at equal budget in most of
    10 seeds (3 were too few to say: with the AVX2 target's space the first 3 gave one win, the 10
    seven)."""
    pytest.importorskip("xgboost")
    wins = 0
    for seed in range(10):
        plain = optimize(GMM, trials=40, evaluator=FakeEvaluator(), build_kernel=False, seed=seed, method="random")
        guided = optimize(GMM, trials=40, evaluator=FakeEvaluator(), build_kernel=False, seed=seed, method="random",
                          cost_model="xgb")
        wins += guided.seconds <= plain.seconds
    assert wins >= 6


def test_a_saved_model_screens_from_the_first_round(landscape, tmp_path):
    pytest.importorskip("xgboost")
    model = make_model("xgb")
    model.fit(landscape)
    path = tmp_path / "gmm.json"
    model.save(path)
    space = generate(analyze(GMM), get_target("llvm"))
    screen = ModelScreen(str(path), GMM, space, get_target("llvm"), ratio=4)
    assert screen.active
    result = optimize(GMM, trials=12, evaluator=FakeEvaluator(), build_kernel=False, seed=0, cost_model=str(path))
    assert result.screened_out > 0


def test_train_and_rank_from_record_files(tmp_path):
    pytest.importorskip("xgboost")
    log = tmp_path / "records.jsonl"
    optimize(GMM, trials=30, evaluator=FakeEvaluator(), build_kernel=False, seed=0, log=str(log), method="random")
    samples, skipped = samples_from_records([str(log)])
    assert len(samples) == 30 and skipped == 0
    assert {s.group for s in samples} == {f"GMM(64, 64, 64) on {get_target('llvm').name}"}
    out = io.StringIO()
    model_file = tmp_path / "model.json"
    assert main(["cost-model", "train", str(log), "--model", "xgb", "-o", str(model_file)], out=out) == 0
    assert "trained xgb (rank loss) on 30 candidates of 1 tasks" in out.getvalue()
    out = io.StringIO()
    assert main(["cost-model", "rank", str(model_file), str(log), "--json"], out=out) == 0
    line = json.loads(out.getvalue().splitlines()[0])
    assert line["candidates"] > 10 and line["kendall_tau"] > 0.5   # in-sample: it has seen these


class SlowerEvaluator(FakeEvaluator):
    """The fake landscape, every time doubled: a second pass over the same candidates on a slower core."""

    def evaluate(self, task, space, points):
        return [replace(e, seconds=2 * e.seconds) for e in super().evaluate(task, space, points)]


def test_a_candidate_measured_twice_is_one_sample_at_its_fastest(tmp_path):
    slow, fast = tmp_path / "slow.jsonl", tmp_path / "fast.jsonl"
    for log, evaluator in ((slow, SlowerEvaluator()), (fast, FakeEvaluator())):   # the same 20 random points
        optimize(GMM, trials=20, evaluator=evaluator, build_kernel=False, seed=0, log=str(log), method="random")
    alone, _ = samples_from_records([str(fast)])
    both, skipped = samples_from_records([str(slow), str(fast)])
    assert skipped == 0 and len(both) == len(alone) == 20
    assert sorted(s.seconds for s in both) == sorted(s.seconds for s in alone)


def test_cost_model_options_need_a_model(capsys):
    assert main(["tune", "GMM", "8", "8", "8", "--screen-ratio", "4", "--no-db"]) == 2
    assert "--screen-ratio and --save-cost-model need --cost-model" in capsys.readouterr().err
    assert main(["cost-model", "rank", "/nonexistent/model.json", "x.jsonl"]) == 2
    assert "cannot read the cost model" in capsys.readouterr().err


def test_sweep_files_name_a_cost_model():
    from flexsched.sweep_spec import SpecError, parse_spec

    base = {"trials": 4, "contenders": ["q"], "cases": [{"op": "GMM", "args": [8, 8, 8]}]}
    spec = parse_spec({**base, "cost_model": "xgb", "screen_ratio": 4})
    assert (spec.cost_model, spec.screen_ratio) == ("xgb", 4)
    assert parse_spec(base).cost_model is None
    with pytest.raises(SpecError, match="'screen_ratio': needs cost_model"):
        parse_spec({**base, "screen_ratio": 4})
    with pytest.raises(SpecError, match="'cost_model': must be a model name"):
        parse_spec({**base, "cost_model": 3})
