"""Clopper-Pearson intervals and epsilon lower bounds (skdpvi.privacy_audit.bounds)."""

import math

import numpy as np
import pytest
from scipy.stats import binom

from skdpvi.privacy_audit import clopper_pearson, epsilon_lower_bound
from skdpvi.privacy_audit.bounds import evaluate_test, select_test


def test_clopper_pearson_is_the_exact_binomial_interval():
    low, high = clopper_pearson(30, 200, confidence=0.9)
    # P(X >= 30 | p = low) = 5 % and P(X <= 30 | p = high) = 5 %
    assert binom.sf(29, 200, low) == pytest.approx(0.05, rel=1e-6)
    assert binom.cdf(30, 200, high) == pytest.approx(0.05, rel=1e-6)
    assert clopper_pearson(0, 100)[0] == 0.0 and clopper_pearson(100, 100)[1] == 1.0
    # zero successes: the upper end is 1 - (alpha / 2)^(1/n)
    assert clopper_pearson(0, 1000)[1] == pytest.approx(1 - 0.025 ** (1 / 1000))


def test_lower_bound_formula_and_floor():
    tpr_low, _ = clopper_pearson(400, 1000)
    _, fpr_high = clopper_pearson(20, 1000)
    assert epsilon_lower_bound(400, 1000, 20, 1000, 1e-3) == pytest.approx(
        math.log((tpr_low - 1e-3) / fpr_high))
    assert epsilon_lower_bound(100, 1000, 100, 1000, 1e-5) == 0.0  # shows nothing
    assert epsilon_lower_bound(0, 1000, 0, 1000, 1e-5) == 0.0


def test_bound_holds_with_the_stated_confidence():
    # a mechanism with known epsilon: randomised response with e^eps = 3
    rng = np.random.default_rng(0)
    eps, n, misses = math.log(3), 2000, 0
    for _ in range(200):
        tp = rng.binomial(n, 0.75)
        fp = rng.binomial(n, 0.25)
        misses += epsilon_lower_bound(tp, n, fp, n, 0.0, confidence=0.9) > eps
    assert misses <= 200 * 0.1


def test_selected_test_is_applied_unchanged():
    rng = np.random.default_rng(1)
    s_in = {"a": rng.normal(1.0, 1.0, 5000), "b": rng.normal(0.0, 1.0, 5000)}
    s_out = {"a": rng.normal(0.0, 1.0, 5000), "b": rng.normal(0.0, 1.0, 5000)}
    test = select_test(s_in, s_out, 1e-5)
    assert test["statistic"] == "a" and test["orientation"] == ("in", "above")
    found = evaluate_test(test, s_in, s_out, 1e-5)
    assert found["true_positives"] == int(np.sum(s_in["a"] >= test["threshold"]))
    # the reversed orientation detects a canary that pushes the statistic down
    flipped = {"a": -s_in["a"], "b": s_in["b"]}
    assert select_test(flipped, s_out, 1e-5)["orientation"][1] == "below"


@pytest.mark.parametrize("call, match", [
    (lambda: clopper_pearson(11, 10), "successes and trials"),
    (lambda: clopper_pearson(-1, 10), "successes and trials"),
    (lambda: clopper_pearson(1, 10, confidence=1.5), "confidence"),
    (lambda: epsilon_lower_bound(1100, 1000, 10, 1000, 1e-5), "successes and trials"),
    (lambda: epsilon_lower_bound(900, 1000, 10, 1000, delta=2), "delta"),
])
def test_bounds_refuse_impossible_counts(call, match):
    # they returned (nan, 1.0) or a bound of 0.0 (second review)
    with pytest.raises(ValueError, match=match):
        call()
