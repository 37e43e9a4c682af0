"""The logistic estimator's private clipping norm (``clip_norm="auto"``).

Where the data are large enough for the budget, a fit spends a share of it on a noisy
histogram of the rows' norms (:mod:`skdpvi.dpvi.clip_bound`), clips at the bound it
gives and accounts for both mechanisms; elsewhere it spends nothing on it.
"""

import math

import numpy as np
import pytest
from sklearn.base import clone

from skdpvi import DPBayesianLinearRegression, DPBayesianLogisticRegression
from skdpvi.accounting import compose_epsilon, noise_multiplier, total_privacy_spent
from skdpvi.dpvi.clip_bound import histogram_noise_std

QUICK = dict(max_iter=300, n_posterior_samples=100, epsilon=8.0)


def _unit_features(seed, n=1000, d=3):
    """Features on [0, 1] (rows' norms ~1.4-2), far below the fixed 2 sqrt(d + 1) = 4."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ [2.0, -1.0, 1.0] - 1.0)))).astype(int)
    return X, y


def test_auto_clips_at_the_private_bound_and_accounts_for_the_histogram():
    X, y = _unit_features(0)
    est = DPBayesianLogisticRegression(**QUICK, random_state=0).fit(X, y)
    noise = histogram_noise_std(noise_multiplier(8.0, 1e-5, 1.0, 1)[0])
    assert est.clip_histogram_noise_ == noise
    # rows of norm <= 2 on the grid 4, 2.83, 2, 1.41, ...: the lowest edge accepted is
    # 2 (or 1.41 if few enough rows lie above it), the bound one step above it
    assert est.clip_norm_ in (pytest.approx(2.0), pytest.approx(2 * math.sqrt(2)))
    # the DP-SGD got less than the whole budget, the composition spends it
    alone, _ = noise_multiplier(8.0, 1e-5, 0.1, 300)
    assert est.noise_multiplier_ > alone
    both = compose_epsilon([(est.noise_multiplier_, 0.1, 300), (noise, 1.0, 1)], 1e-5)
    assert est.epsilon_ <= 8.0 and both == pytest.approx(est.epsilon_, rel=1e-3)
    mechanisms, delta = est._dp_mechanism()
    assert len(mechanisms) == 2 and mechanisms[1].noise_multiplier == noise
    assert total_privacy_spent([est])[0] == pytest.approx(est.epsilon_, rel=1e-3)
    # unfitted, a candidate of a search is accounted with its histogram
    unfitted, _ = clone(est)._dp_mechanism()
    assert unfitted == mechanisms


def test_auto_spends_nothing_where_the_histogram_cannot_lower_the_bound():
    X, y = _unit_features(0, n=200)
    est = DPBayesianLogisticRegression(**{**QUICK, "epsilon": 1.0}, random_state=0).fit(X, y)
    assert est.clip_histogram_noise_ is None and est.clip_norm_ == pytest.approx(4.0)
    assert est.noise_multiplier_ == noise_multiplier(1.0, 1e-5, 0.1, 300)[0]
    assert len(est._dp_mechanism()[0]) == 1
    # a fixed clipping norm, and the linear estimator, never run it
    X, y = _unit_features(0)
    fixed = DPBayesianLogisticRegression(**QUICK, clip_norm=3.0, random_state=0).fit(X, y)
    assert fixed.clip_histogram_noise_ is None and fixed.clip_norm_ == 3.0
    reg = DPBayesianLinearRegression(**QUICK, random_state=0).fit(X, y.astype(float))
    assert reg.clip_histogram_noise_ is None


def test_private_clip_norm_is_reproducible_and_follows_the_data():
    X, y = _unit_features(0)
    a = DPBayesianLogisticRegression(**QUICK, random_state=3).fit(X, y)
    b = DPBayesianLogisticRegression(**QUICK, random_state=3).fit(X, y)
    assert a.clip_norm_ == b.clip_norm_
    np.testing.assert_array_equal(a.coef_, b.coef_)
    # the same rows ten times larger: the bound rises to the fixed default, never above
    big = DPBayesianLogisticRegression(**QUICK, random_state=3).fit(10 * X, y)
    assert big.clip_norm_ == pytest.approx(4.0) and a.clip_norm_ < 3.0


def test_fit_batch_groups_data_sets_by_their_private_clip_norm():
    est = DPBayesianLogisticRegression(**QUICK)
    data = [_unit_features(k) for k in range(3)]
    data.append((10 * data[0][0], data[0][1]))  # another clipping norm: its own group
    fitted = est._fit_batch(data, [5, 6, 7, 5])
    assert fitted[3].clip_norm_ > fitted[0].clip_norm_
    for got, (X, y), seed in zip(fitted, data, [5, 6, 7, 5]):
        want = clone(est).set_params(random_state=seed).fit(X, y)
        assert got.clip_norm_ == want.clip_norm_
        assert got.clip_histogram_noise_ == want.clip_histogram_noise_
        np.testing.assert_allclose(got.coef_, want.coef_, rtol=1e-5, atol=1e-4)
        assert got.epsilon_ == want.epsilon_
