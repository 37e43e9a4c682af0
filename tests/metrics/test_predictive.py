"""Tests of posterior-predictive coverage (skdpvi.metrics._predictive)."""

import numpy as np
import pytest

from skdpvi.metrics import (
    DEFAULT_ALPHA_GRID,
    marginal_tarp_coverage,
    predictive_coverage,
    predictive_coverage_rmse,
)

from ._posteriors import predictive_draws


def test_predictive_coverage_calibrated_and_not():
    y, draws = predictive_draws()
    res = predictive_coverage(y, draws)
    np.testing.assert_allclose(res.credibility, np.sort(1 - DEFAULT_ALPHA_GRID))
    assert np.max(np.abs(res.coverage - res.credibility)) < 0.04
    assert res.rmse < 0.02
    assert predictive_coverage_rmse(y, draws) == res.rmse
    narrow = predictive_coverage(*predictive_draws(0.5))
    wide = predictive_coverage(*predictive_draws(2.0))
    assert np.all((narrow.coverage - narrow.credibility)[1:-1] < -0.02)
    assert np.all((wide.coverage - wide.credibility)[1:-1] > 0.02)
    assert narrow.rmse > 0.15 and wide.rmse > 0.15


def test_predictive_coverage_equals_tarp_with_median_reference():
    rng = np.random.default_rng(1)
    mu = rng.normal(size=500)
    y = mu + 1.3 * rng.normal(size=500)
    z = rng.normal(size=(500, 200))
    draws = mu[:, None] + np.concatenate([z, -z], axis=1)  # symmetric about mu
    pred = predictive_coverage(y, draws)
    tarp = marginal_tarp_coverage(draws[:, :, None], y[:, None],
                                  references=np.median(draws, axis=1)[:, None])
    np.testing.assert_allclose(pred.coverage, tarp.coverage[0], atol=0.01)


def test_predictive_coverage_hand_computed():
    draws = np.tile(np.arange(11.0), (4, 1))  # quantiles of 0..10: q_p = 10 p
    y = np.array([5.0, 2.0, 1.0, 10.0])
    res = predictive_coverage(y, draws, credibility=[0.5, 0.8])
    # 50%: [2.5, 7.5] holds 5 -> 1/4; 80%: [1, 9] holds 5, 2, 1 -> 3/4.
    np.testing.assert_allclose(res.coverage, [0.25, 0.75])


@pytest.mark.parametrize(
    "y, draws, kwargs, match",
    [
        (np.zeros(3), np.zeros((4, 10)), {}, "y_samples"),
        (np.zeros(3), np.zeros((3, 1)), {}, "y_samples"),
        (np.zeros(3), np.zeros(3), {}, "y_samples"),
        (np.array([0, np.nan, 1]), np.zeros((3, 10)), {}, "y_true"),
        (np.zeros((3, 2)), np.zeros((3, 10)), {}, "y_true"),
        (np.zeros(3), np.zeros((3, 10)), dict(credibility=[0.5, 1.5]), "credibility"),
    ],
)
def test_predictive_bad_input(y, draws, kwargs, match):
    with pytest.raises(ValueError, match=match):
        predictive_coverage(y, draws, **kwargs)
