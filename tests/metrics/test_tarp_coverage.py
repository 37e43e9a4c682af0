"""Tests of coverage curves and their RMSE (skdpvi.metrics._tarp.coverage)."""

import numpy as np
import pytest

from skdpvi.metrics import coverage_from_frequencies, coverage_rmse, tarp_coverage

from ._posteriors import gaussian_posteriors


def test_resummarise_frequencies():
    samples, theta = gaussian_posteriors(n_sim=100, n_draws=100)
    res = tarp_coverage(samples, theta, random_state=0)
    cred, cov = coverage_from_frequencies(res.frequencies)
    np.testing.assert_array_equal(cred, res.credibility)
    np.testing.assert_array_equal(cov, res.coverage)
    assert coverage_rmse(cred, cov) == pytest.approx(res.rmse)
    # Pooling: frequencies of two runs concatenated.
    res2 = tarp_coverage(*gaussian_posteriors(n_sim=100, n_draws=100, seed=1), random_state=0)
    grid = np.linspace(0.05, 0.95, 10)
    cred, cov = coverage_from_frequencies(
        np.concatenate([res.frequencies, res2.frequencies]), alpha_grid=grid
    )
    np.testing.assert_allclose(cred, np.sort(1 - grid))
    assert cov.shape == (10,)


def test_coverage_rmse_values():
    assert coverage_rmse([0.2, 0.8], [0.2, 0.8]) == 0.0
    assert coverage_rmse([0.2, 0.8], [0.1, 0.5]) == pytest.approx(np.sqrt((0.01 + 0.09) / 2))
    batched = coverage_rmse([0.2, 0.8], [[0.2, 0.8], [0.1, 0.5]])
    np.testing.assert_allclose(batched, [0.0, np.sqrt(0.05)])
    with pytest.raises(ValueError, match="credibility must hold at least one level"):
        coverage_rmse([], [])  # was NaN
