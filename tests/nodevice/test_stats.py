"""Kendall's tau: the rank correlation the CPU model is judged by."""

import math

import numpy as np
import pytest

from flexsched.stats import StatsError, kendall_tau


def test_identical_and_reversed_rankings():
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)


def test_rank_only_matters():
    values = [0.3, 5.0, 1.2, 9.9, 2.5]
    assert kendall_tau(values, np.exp(values)) == pytest.approx(1.0)


def test_one_swapped_pair():
    # 6 pairs, 5 concordant and 1 discordant: (5 - 1) / 6
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)


def test_ties_follow_tau_b():
    # x ties one pair: 5 untied pairs in x, 6 in y, 5 concordant
    assert kendall_tau([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(5 / math.sqrt(5 * 6))


def test_matches_scipy_on_random_data():
    stats = pytest.importorskip("scipy.stats")
    generator = np.random.default_rng(0)
    a = generator.integers(0, 20, 60).astype(float)   # with ties
    b = a + generator.normal(0, 5, 60)
    assert kendall_tau(a, b) == pytest.approx(stats.kendalltau(a, b).statistic)


def test_undefined_cases_are_nan():
    assert math.isnan(kendall_tau([1], [2]))
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))


@pytest.mark.parametrize("a, b, field", [([1, 2], [1, 2, 3], "b"), ([1, float("inf")], [1, 2], "a"),
                                         ("ab", [1, 2], "a"), ([[1, 2]], [1, 2], "a")])
def test_bad_input_names_the_argument(a, b, field):
    with pytest.raises(StatsError, match=f"^{field}:"):
        kendall_tau(a, b)
