"""Tests of coverage_rmse_floor (skdpvi.metrics._tarp.floor)."""

import numpy as np
import pytest

from skdpvi.metrics import tarp_coverage


def test_coverage_rmse_floor_matches_tarp_of_exact_posteriors():
    from skdpvi.metrics import coverage_rmse_floor

    mean40, (lo40, hi40) = coverage_rmse_floor(40, random_state=0)
    mean500, _ = coverage_rmse_floor(500, random_state=0)
    assert lo40 < mean40 < hi40
    # the floor shrinks like 1 / sqrt(K)
    assert mean40 / mean500 == pytest.approx(np.sqrt(500 / 40), rel=0.15)
    # exact posteriors of a conjugate normal model: TARP RMSEs of K=40 studies
    # scatter like the floor says
    rng = np.random.default_rng(1)
    rmses = []
    for _ in range(40):
        theta = rng.normal(size=(40, 1))
        data_mean = theta + rng.normal(size=(40, 1))
        post = data_mean[:, None] / 2 + rng.normal(size=(40, 300, 1)) * np.sqrt(0.5)
        rmses.append(tarp_coverage(post, theta, random_state=0).rmse)
    assert np.mean(rmses) == pytest.approx(mean40, rel=0.3)
    with pytest.raises(ValueError, match="n_simulations"):
        coverage_rmse_floor(0)
    with pytest.raises(ValueError, match="quantiles"):  # reversed bounds, silently
        coverage_rmse_floor(100, quantiles=(0.9, 0.1))
