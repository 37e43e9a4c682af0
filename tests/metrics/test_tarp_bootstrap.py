"""Tests of the TARP bootstrap (skdpvi.metrics._tarp.bootstrap)."""

import numpy as np

from skdpvi.metrics import marginal_tarp_coverage, tarp_coverage

from ._posteriors import P, gaussian_posteriors


def test_tarp_bootstrap_reproducible_and_varied():
    samples, theta = gaussian_posteriors(n_sim=100, n_draws=100)
    np.random.seed(7)
    global_state = np.random.get_state()[1].copy()
    res = tarp_coverage(samples, theta, n_bootstrap=200, random_state=0)
    np.testing.assert_array_equal(np.random.get_state()[1], global_state)

    again = tarp_coverage(samples, theta, n_bootstrap=200, random_state=0)
    np.testing.assert_array_equal(res.bootstrap_coverage, again.bootstrap_coverage)
    np.testing.assert_array_equal(res.bootstrap_rmse, again.bootstrap_rmse)

    n_levels = res.credibility.size
    assert res.bootstrap_coverage.shape == (200, n_levels)
    assert np.unique(res.bootstrap_coverage, axis=0).shape[0] > 150
    assert np.unique(res.bootstrap_rmse).size > 100
    # SE of a proportion near 0.5 with 100 simulations: about 0.05.
    mid = np.argmin(np.abs(res.credibility - 0.5))
    assert 0.03 < res.coverage_se[mid] < 0.07
    assert res.coverage_band.shape == (2, n_levels)
    assert np.all(res.coverage_band[0] <= res.coverage_band[1])
    assert res.rmse_band[0] <= res.rmse <= res.rmse_band[1] + 0.02
    assert res.rmse_se > 0

    other = tarp_coverage(samples, theta, n_bootstrap=200, random_state=1)
    assert not np.array_equal(res.bootstrap_coverage, other.bootstrap_coverage)


def test_marginal_bootstrap_shapes():
    samples, theta = gaussian_posteriors(n_sim=60, n_draws=50)
    res = marginal_tarp_coverage(samples, theta, n_bootstrap=30, random_state=0)
    L = res.credibility.size
    assert res.bootstrap_coverage.shape == (30, P, L)
    assert res.coverage_band.shape == (2, P, L)
    assert res.rmse_se.shape == (P,)
    assert res[0].coverage_band.shape == (2, L)
