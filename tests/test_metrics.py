"""Tests of skdpvi.metrics: TARP, calibration, predictive coverage, scorers, plots."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.calibration import calibration_curve
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss as sk_brier_score_loss
from sklearn.model_selection import GridSearchCV, KFold

from skdpvi.metrics import (
    DEFAULT_ALPHA_GRID,
    brier_score_loss,
    calibration_curve_quantile,
    calibration_rmse,
    coverage_from_frequencies,
    coverage_rmse,
    expected_calibration_error,
    get_scorer,
    make_predictive_coverage_scorer,
    marginal_tarp_coverage,
    neg_brier_score_scorer,
    neg_calibration_rmse_scorer,
    neg_expected_calibration_error_scorer,
    neg_predictive_coverage_rmse_scorer,
    predictive_coverage,
    predictive_coverage_rmse,
    tarp_coverage,
)

K, N, P = 300, 300, 3


def gaussian_posteriors(sd_factor=1.0, seed=0, n_sim=K, n_draws=N, n_params=P):
    """Exact conjugate posteriors: theta ~ N(0, 1), x ~ N(theta, 1).

    The posterior is N(x / 2, 1/2); ``sd_factor`` < 1 makes the draws
    over-confident, > 1 under-confident.
    """
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(n_sim, n_params))
    x = theta + rng.normal(size=theta.shape)
    z = rng.normal(size=(n_sim, n_draws, n_params))
    return x[:, None, :] / 2 + sd_factor * np.sqrt(0.5) * z, theta


def prior_sampler(n, rng):
    return rng.normal(size=(n, P))


def reference_kwargs(scheme):
    """Keyword arguments of tarp_coverage for each reference scheme."""
    if scheme == "posterior":
        return {}
    if scheme == "prior":
        return dict(references="prior", prior_sampler=prior_sampler)
    if scheme == "array":
        return dict(references=np.random.default_rng(12345).normal(size=(K, P)))
    if scheme == "callable":
        return dict(
            references=lambda rng, s: s.mean(0) + s.std(0) * rng.normal(size=s.shape[1])
        )
    raise AssertionError(scheme)


SCHEMES = ["posterior", "prior", "array", "callable"]


def high_level_error(credibility, coverage):
    """Mean signed coverage error over credibility >= 0.5 (sign of miscalibration)."""
    hi = credibility >= 0.5
    return np.mean((coverage - credibility)[..., hi], axis=-1)


# ----------------------------------------------------------------------------
# TARP
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", SCHEMES)
def test_tarp_calibrated_posterior_is_near_diagonal(scheme):
    samples, theta = gaussian_posteriors()
    res = tarp_coverage(samples, theta, random_state=0, **reference_kwargs(scheme))
    np.testing.assert_allclose(res.credibility, np.sort(1 - DEFAULT_ALPHA_GRID))
    # Binomial sd of a coverage estimate is at most 0.5 / sqrt(300) = 0.029.
    assert np.max(np.abs(res.coverage - res.credibility)) < 0.09
    assert res.rmse < 0.06
    assert abs(high_level_error(res.credibility, res.coverage)) < 0.06
    assert res.frequencies.shape == (K,)
    assert res.references.shape == (K, P)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("sd_factor, sign", [(0.5, -1), (2.0, +1)])
def test_tarp_detects_over_and_under_confidence(scheme, sd_factor, sign):
    samples, theta = gaussian_posteriors(sd_factor)
    res = tarp_coverage(samples, theta, random_state=0, **reference_kwargs(scheme))
    # Over-confident: below the diagonal; under-confident: above.
    assert sign * high_level_error(res.credibility, res.coverage) > 0.1
    assert res.rmse > 0.1


@pytest.mark.parametrize("scheme", SCHEMES)
def test_marginal_tarp(scheme):
    kw = reference_kwargs(scheme)
    samples, theta = gaussian_posteriors()
    res = marginal_tarp_coverage(samples, theta, random_state=0, **kw)
    assert res.coverage.shape == (P, DEFAULT_ALPHA_GRID.size)
    assert res.frequencies.shape == (K, P)
    assert np.all(res.rmse < 0.07)
    assert np.all(np.abs(high_level_error(res.credibility, res.coverage)) < 0.06)

    over = marginal_tarp_coverage(*gaussian_posteriors(0.5), random_state=0, **kw)
    under = marginal_tarp_coverage(*gaussian_posteriors(2.0), random_state=0, **kw)
    assert np.all(high_level_error(over.credibility, over.coverage) < -0.07)
    assert np.all(high_level_error(under.credibility, under.coverage) > 0.07)


def test_marginal_tarp_localises_miscalibrated_parameter():
    samples, theta = gaussian_posteriors()
    mean = samples.mean(axis=1, keepdims=True)
    samples[:, :, 1] = (mean + 0.4 * (samples - mean))[:, :, 1]
    res = marginal_tarp_coverage(samples, theta, random_state=0, param_names=["a", "b", "c"])
    assert res.rmse[1] > 0.1 and res.rmse[0] < 0.07 and res.rmse[2] < 0.07
    one = res["b"]
    assert one.rmse == pytest.approx(res.rmse[1])
    np.testing.assert_array_equal(one.coverage, res.coverage[1])
    np.testing.assert_array_equal(res[-1].frequencies, res.frequencies[:, 2])
    with pytest.raises(KeyError):
        res["zz"]


def test_tarp_hand_computed():
    # One parameter, reference at 0: f = fraction of |draws| < |theta|.
    samples = np.array([[1.0, 2, 3, 4], [1, 2, 3, 4]])[:, :, None]
    theta = np.array([[2.5], [10.0]])
    res = tarp_coverage(samples, theta, references=np.zeros((2, 1)),
                        alpha_grid=[0.5, 0.25])
    np.testing.assert_allclose(res.frequencies, [0.5, 1.0])
    np.testing.assert_allclose(res.credibility, [0.5, 0.75])
    np.testing.assert_allclose(res.coverage, [0.0, 0.5])  # strict f < 1 - alpha
    assert res.rmse == pytest.approx(np.sqrt((0.5**2 + 0.25**2) / 2))
    assert res.coverage_se is None and res.bootstrap_coverage is None


@pytest.mark.parametrize(
    "distance, expected",
    [("euclidean", 1 / 3), ("manhattan", 2 / 3), ("cityblock", 2 / 3), ("chebyshev", 1 / 3)],
)
def test_tarp_distances(distance, expected):
    samples = np.array([[[3.0, 0.0], [2.0, 2.0], [0.0, 1.0]]])
    theta = np.array([[2.0, 1.9]])
    res = tarp_coverage(samples, theta, references=np.zeros((1, 2)),
                        alpha_grid=[0.5], distance=distance)
    assert res.frequencies[0] == pytest.approx(expected)


def test_tarp_normalize_is_scale_invariant():
    samples, theta = gaussian_posteriors(n_sim=50, n_draws=100)
    refs = np.random.default_rng(1).normal(size=theta.shape)
    scale = np.array([1000.0, 1.0, 1.0])
    kw = dict(alpha_grid=[0.1, 0.5, 0.9])
    base = tarp_coverage(samples, theta, references=refs, normalize=True, **kw)
    scaled = tarp_coverage(samples * scale, theta * scale, references=refs * scale,
                           normalize=True, **kw)
    np.testing.assert_allclose(base.frequencies, scaled.frequencies)
    raw = tarp_coverage(samples * scale, theta * scale, references=refs * scale, **kw)
    assert not np.allclose(raw.frequencies, base.frequencies)


def test_posterior_references_follow_authors_scheme():
    samples, theta = gaussian_posteriors(n_sim=50, n_draws=100)
    res = tarp_coverage(samples, theta, random_state=3)
    offset = (res.references - samples.mean(axis=1)) / samples.std(axis=1)
    assert np.all(np.abs(offset) <= 4) and np.abs(offset).max() > 3
    again = tarp_coverage(samples, theta, random_state=3)
    np.testing.assert_array_equal(res.references, again.references)
    other = tarp_coverage(samples, theta, random_state=4)
    assert not np.array_equal(res.references, other.references)


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


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(samples=np.zeros((30, 10))), "samples"),
        (dict(theta_true=np.zeros((30, 3))), "theta_true"),
        (dict(theta_true=np.zeros((29, 2))), "theta_true"),
        (dict(samples=np.full((30, 10, 2), np.nan)), "samples"),
        (dict(references="uniform"), "references"),
        (dict(references="prior"), "prior_sampler"),
        (dict(references="prior", prior_sampler=lambda n, rng: np.zeros((n, 5))),
         "prior_sampler"),
        (dict(references=np.zeros((30, 3))), "references"),
        (dict(references=lambda rng, s: np.zeros(5)), "references"),
        (dict(distance="cosine"), "distance"),
        (dict(alpha_grid=[0.5, 1.5]), "alpha_grid"),
        (dict(alpha_grid=[0.5, np.nan]), "alpha_grid"),
        (dict(samples=np.zeros((10, 10, 2)), theta_true=np.zeros((10, 2))), "simulations"),
        (dict(n_bootstrap=-1), "n_bootstrap"),
        (dict(random_state="seed"), "random_state"),
    ],
)
def test_tarp_bad_input(kwargs, match):
    args = dict(samples=np.random.default_rng(0).normal(size=(30, 10, 2)),
                theta_true=np.zeros((30, 2)))
    args.update(kwargs)
    samples, theta = args.pop("samples"), args.pop("theta_true")
    with pytest.raises(ValueError, match=match):
        tarp_coverage(samples, theta, **args)


def test_marginal_and_helpers_bad_input():
    samples = np.zeros((30, 10, 2))
    with pytest.raises(ValueError, match="param_names"):
        marginal_tarp_coverage(samples, np.zeros((30, 2)), param_names=["a"])
    with pytest.raises(ValueError, match="coverage"):
        coverage_rmse([0.5, 0.9], [0.5])
    with pytest.raises(ValueError, match="coverage"):
        coverage_rmse([0.5, 0.9], [0.5, 1.2])
    with pytest.raises(ValueError, match="frequencies"):
        coverage_from_frequencies([0.2, 1.5])


# ----------------------------------------------------------------------------
# Calibration
# ----------------------------------------------------------------------------
Y_SMALL = np.array([0, 0, 1, 0, 1, 1])
P_SMALL = np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.9])


def test_calibration_hand_computed():
    prob_true, prob_pred, counts = calibration_curve_quantile(Y_SMALL, P_SMALL, n_bins=2)
    np.testing.assert_allclose(prob_true, [1 / 3, 2 / 3])
    np.testing.assert_allclose(prob_pred, [0.2, 2.2 / 3])
    np.testing.assert_array_equal(counts, [3, 3])
    errors = np.array([1 / 3 - 0.2, 2 / 3 - 2.2 / 3])
    assert calibration_rmse(Y_SMALL, P_SMALL, n_bins=2) == pytest.approx(
        np.sqrt(np.mean(errors**2))
    )
    assert expected_calibration_error(Y_SMALL, P_SMALL, n_bins=2) == pytest.approx(0.1)
    # Unequal counts: ECE weights by count, RMSE does not.
    y = np.array([0, 0, 0, 1])
    p = np.array([0.1, 0.1, 0.1, 0.9])  # edges 0.1, 0.1, 0.9 -> bins {0.1 x3}, {0.9}
    prob_true, prob_pred, counts = calibration_curve_quantile(y, p, n_bins=2)
    np.testing.assert_array_equal(counts, [3, 1])
    assert expected_calibration_error(y, p, n_bins=2) == pytest.approx(0.75 * 0.1 + 0.25 * 0.1)
    assert calibration_rmse(y, p, n_bins=2) == pytest.approx(0.1)


@pytest.mark.parametrize("n_bins", [1, 3, 10, 25])
@pytest.mark.parametrize("ties", [False, True])
def test_calibration_curve_matches_sklearn(n_bins, ties):
    rng = np.random.default_rng(n_bins)
    p = rng.beta(2, 3, size=500)
    if ties:
        p = np.round(p, 1)
    y = (rng.uniform(size=500) < p ** 1.5).astype(int)
    prob_true, prob_pred, counts = calibration_curve_quantile(y, p, n_bins=n_bins)
    sk_true, sk_pred = calibration_curve(y, p, n_bins=n_bins, strategy="quantile")
    np.testing.assert_allclose(prob_true, sk_true)
    np.testing.assert_allclose(prob_pred, sk_pred)
    assert counts.sum() == 500
    if not ties:
        assert counts.max() - counts.min() <= 1  # equal-count bins
    for strategy in ("quantile", "uniform"):
        sk_true, sk_pred = calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
        rmse = calibration_rmse(y, p, n_bins=n_bins, strategy=strategy)
        assert rmse == pytest.approx(np.sqrt(np.mean((sk_true - sk_pred) ** 2)))


def test_calibration_accepts_predict_proba_and_labels():
    reference = calibration_rmse(Y_SMALL, P_SMALL, n_bins=2)
    assert reference > 0
    proba = np.column_stack([1 - P_SMALL, P_SMALL])
    assert calibration_rmse(Y_SMALL, proba, n_bins=2) == reference
    assert calibration_rmse(2 * Y_SMALL - 1, P_SMALL, n_bins=2) == reference
    assert calibration_rmse(Y_SMALL.astype(bool), P_SMALL, n_bins=2) == reference
    labels = np.where(Y_SMALL == 1, "yes", "no")
    assert calibration_rmse(labels, P_SMALL, 2, pos_label="yes") == reference
    assert expected_calibration_error(labels, P_SMALL, 2, pos_label="yes") == pytest.approx(0.1)


def test_brier_matches_sklearn():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=200)
    y = (rng.uniform(size=200) < p).astype(int)
    w = rng.uniform(size=200)
    assert brier_score_loss(y, p) == pytest.approx(sk_brier_score_loss(y, p))
    assert brier_score_loss(y, np.column_stack([1 - p, p])) == pytest.approx(
        sk_brier_score_loss(y, p)
    )
    assert brier_score_loss(y, p, sample_weight=w) == pytest.approx(
        sk_brier_score_loss(y, p, sample_weight=w)
    )


def test_calibration_rmse_is_not_sqrt_brier():
    # Perfectly calibrated, yet sqrt(Brier) = 0.5 (the paper's claim is false).
    y, p = np.array([0, 1]), np.array([0.5, 0.5])
    assert calibration_rmse(y, p, n_bins=1) == 0.0
    assert calibration_rmse(y, p, n_bins=2) == 0.0  # tied edges: one bin
    assert np.sqrt(brier_score_loss(y, p)) == pytest.approx(0.5)
    # And on realistic calibrated predictions the two are far apart.
    rng = np.random.default_rng(0)
    p = rng.uniform(size=20000)
    y = (rng.uniform(size=20000) < p).astype(int)
    assert calibration_rmse(y, p) < 0.02
    assert np.sqrt(brier_score_loss(y, p)) > 0.35


def test_calibration_detects_miscalibration():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=20000)
    y = (rng.uniform(size=20000) < p).astype(int)
    over = np.clip(0.5 + 1.8 * (p - 0.5), 0, 1)  # over-confident
    assert calibration_rmse(y, over) > 5 * calibration_rmse(y, p)
    assert expected_calibration_error(y, over) > 5 * expected_calibration_error(y, p)


@pytest.mark.parametrize(
    "y, p, kwargs, match",
    [
        ([0, 1, 1], [0.1, 0.2], {}, "lengths"),
        ([0, 1, 1], [0.1, np.nan, 0.3], {}, "y_prob"),
        ([0, 1, 1], [0.1, 1.2, 0.3], {}, "y_prob"),
        ([0, 1, 1], [-0.1, 0.2, 0.3], {}, "y_prob"),
        ([0, 1, 1], np.full((3, 3), 1 / 3), {}, "y_prob"),
        ([0, 1, 2], [0.1, 0.2, 0.3], {}, "binary"),
        (["a", "b", "b"], [0.1, 0.2, 0.3], {}, "pos_label"),
        ([0, np.nan, 1], [0.1, 0.2, 0.3], {}, "y_true"),
        ([0, 1, 1], [0.1, 0.2, 0.3], dict(n_bins=4), "n_bins"),
        ([0, 1, 1], [0.1, 0.2, 0.3], dict(n_bins=0), "n_bins"),
        ([0, 1, 1], [0.1, 0.2, 0.3], dict(n_bins=2, strategy="kmeans"), "strategy"),
    ],
)
def test_calibration_bad_input(y, p, kwargs, match):
    with pytest.raises(ValueError, match=match):
        calibration_rmse(y, p, **kwargs)
    if "strategy" not in kwargs:
        with pytest.raises(ValueError, match=match):
            calibration_curve_quantile(y, p, **kwargs)


# ----------------------------------------------------------------------------
# Predictive coverage
# ----------------------------------------------------------------------------
def predictive_draws(scale=1.0, n=2000, n_draws=400, seed=0):
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    y = mu + rng.normal(size=n)
    return y, mu[:, None] + scale * rng.normal(size=(n, n_draws))


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


# ----------------------------------------------------------------------------
# Scorers
# ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def classification_data():
    return make_classification(n_samples=600, n_features=5, random_state=0)


def test_classifier_scorer_values(classification_data):
    X, y = classification_data
    clf = LogisticRegression().fit(X[:400], y[:400])
    p = clf.predict_proba(X[400:])[:, 1]
    assert neg_calibration_rmse_scorer(clf, X[400:], y[400:]) == pytest.approx(
        -calibration_rmse(y[400:], p)
    )
    assert neg_expected_calibration_error_scorer(clf, X[400:], y[400:]) == pytest.approx(
        -expected_calibration_error(y[400:], p)
    )
    assert neg_brier_score_scorer(clf, X[400:], y[400:]) == pytest.approx(
        -sk_brier_score_loss(y[400:], p)
    )
    # String labels: classes_[1] is the positive class.
    labels = np.where(y == 1, "yes", "no")
    clf_s = LogisticRegression().fit(X[:400], labels[:400])
    assert neg_calibration_rmse_scorer(clf_s, X[400:], labels[400:]) == pytest.approx(
        neg_calibration_rmse_scorer(clf, X[400:], y[400:])
    )


def test_scorer_in_grid_search_alone(classification_data):
    X, y = classification_data
    cv = KFold(3, shuffle=True, random_state=0)
    grid = {"C": [1e-3, 1.0]}
    search = GridSearchCV(LogisticRegression(), grid, scoring=neg_calibration_rmse_scorer,
                          cv=cv).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(scores <= 0)
    # Recompute one cell by hand.
    train, test = next(cv.split(X))
    clf = LogisticRegression(C=1e-3).fit(X[train], y[train])
    expected = -calibration_rmse(y[test], clf.predict_proba(X[test]))
    assert search.cv_results_["split0_test_score"][0] == pytest.approx(expected)
    # Heavy regularisation squeezes probabilities to 0.5: badly calibrated.
    assert search.best_params_ == {"C": 1.0}


def test_scorers_in_multimetric_grid_search(classification_data):
    X, y = classification_data
    scoring = {
        "cal": neg_calibration_rmse_scorer,
        "ece": get_scorer("neg_expected_calibration_error"),
        "brier": neg_brier_score_scorer,
        "acc": "accuracy",
    }
    search = GridSearchCV(LogisticRegression(), {"C": [1e-3, 1e-2, 1.0]},
                          scoring=scoring, refit="ece", cv=3).fit(X, y)
    for key in ("cal", "ece", "brier"):
        assert np.all(search.cv_results_[f"mean_test_{key}"] <= 0)
    assert search.best_index_ == np.argmax(search.cv_results_["mean_test_ece"])
    assert hasattr(search.best_estimator_, "predict_proba")


class SampleYRegressor(RegressorMixin, BaseEstimator):
    """Least squares with Gaussian predictive draws scaled by ``scale``."""

    def __init__(self, scale=1.0):
        self.scale = scale

    def fit(self, X, y):
        X1 = np.column_stack([X, np.ones(len(X))])
        self.coef_, *_ = np.linalg.lstsq(X1, y, rcond=None)
        self.sigma_ = np.std(y - X1 @ self.coef_)
        return self

    def predict(self, X):
        return np.column_stack([X, np.ones(len(X))]) @ self.coef_

    def sample_y(self, X, n_samples=1, random_state=0):
        rng = np.random.default_rng(random_state)
        noise = rng.normal(size=(len(X), n_samples))
        return self.predict(X)[:, None] + self.scale * self.sigma_ * noise


def test_regression_scorer_in_grid_search():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=900)
    grid = {"scale": [0.3, 1.0, 3.0]}
    search = GridSearchCV(SampleYRegressor(), grid, cv=3,
                          scoring=neg_predictive_coverage_rmse_scorer).fit(X, y)
    assert search.best_params_ == {"scale": 1.0}
    assert search.best_score_ > -0.05
    multi = GridSearchCV(
        SampleYRegressor(), grid, cv=3, refit="coverage",
        scoring={"coverage": get_scorer("neg_predictive_coverage_rmse"),
                 "mse": "neg_mean_squared_error"},
    ).fit(X, y)
    assert multi.best_params_ == {"scale": 1.0}
    # MSE cannot tell the scales apart; coverage can.
    np.testing.assert_allclose(multi.cv_results_["mean_test_mse"],
                               multi.cv_results_["mean_test_mse"][0])
    est = SampleYRegressor().fit(X, y)
    draws = est.sample_y(X, n_samples=200, random_state=0)
    assert neg_predictive_coverage_rmse_scorer(est, X, y) == pytest.approx(
        -predictive_coverage_rmse(y, draws)
    )
    scorer = make_predictive_coverage_scorer(n_samples=50, random_state=3)
    assert scorer(est, X, y) == pytest.approx(
        -predictive_coverage_rmse(y, est.sample_y(X, n_samples=50, random_state=3))
    )


def test_get_scorer_and_bad_estimators(classification_data):
    assert get_scorer("neg_calibration_rmse") is neg_calibration_rmse_scorer
    assert get_scorer("neg_expected_calibration_error") is neg_expected_calibration_error_scorer
    assert get_scorer("neg_predictive_coverage_rmse") is neg_predictive_coverage_rmse_scorer
    assert callable(get_scorer("accuracy"))
    assert get_scorer(neg_brier_score_scorer) is neg_brier_score_scorer
    with pytest.raises(ValueError, match="neg_calibration_rmse"):
        get_scorer("neg_calibration_mse")
    X, y = classification_data
    reg = SampleYRegressor().fit(X, y.astype(float))
    with pytest.raises(ValueError, match="predict_proba"):
        neg_calibration_rmse_scorer(reg, X, y)
    clf = LogisticRegression().fit(X, y)
    with pytest.raises(ValueError, match="sample_y"):
        neg_predictive_coverage_rmse_scorer(clf, X, y)
    with pytest.raises(ValueError, match="n_samples"):
        make_predictive_coverage_scorer(n_samples=1)


# ----------------------------------------------------------------------------
# Plotting
# ----------------------------------------------------------------------------
@pytest.fixture
def plt():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def test_plot_coverage(plt):
    from skdpvi.plotting import plot_coverage

    samples, theta = gaussian_posteriors(n_sim=60, n_draws=50)
    res = tarp_coverage(samples, theta, n_bootstrap=20, random_state=0)
    ax = plot_coverage(res, label="toy")
    curve = ax.lines[0]
    np.testing.assert_allclose(curve.get_xdata(), res.credibility)
    np.testing.assert_allclose(curve.get_ydata(), res.coverage)
    np.testing.assert_allclose(ax.lines[1].get_xdata(), [0, 1])  # diagonal
    assert len(ax.collections) == 1  # bootstrap band
    marg = marginal_tarp_coverage(samples, theta, random_state=0, param_names=["a", "b", "c"])
    ax = plot_coverage(marg)
    assert [line.get_label() for line in ax.lines[:3]] == ["a", "b", "c"]
    assert len(ax.collections) == 0
    ax = plot_coverage(predictive_coverage(*predictive_draws(n=100, n_draws=50)))
    assert len(ax.lines) == 2
    with pytest.raises(ValueError, match="result"):
        plot_coverage(np.zeros(3))


def test_plot_calibration(plt):
    from skdpvi.plotting import plot_calibration

    rng = np.random.default_rng(0)
    p = rng.uniform(size=(4, 300))
    y = (rng.uniform(size=(4, 300)) < p).astype(int)
    ax = plot_calibration(y[0], p[0], n_bins=5, labels="one")
    prob_true, prob_pred, _ = calibration_curve_quantile(y[0], p[0], n_bins=5)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), prob_true)
    np.testing.assert_allclose(ax.lines[0].get_xdata(), prob_pred)
    ax = plot_calibration(list(y), list(p), n_bins=5)
    assert len(ax.collections) == 1  # +- sd band
    curves = [calibration_curve_quantile(y[r], p[r], n_bins=5)[0] for r in range(4)]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), np.mean(curves, axis=0))
    ax = plot_calibration(y[0], {"a": p[0], "b": [p[0], p[0] ** 2]}, n_bins=5)
    assert [line.get_label() for line in ax.lines[:2]] == ["a", "b"]
    with pytest.raises(ValueError, match="labels"):
        plot_calibration(y[0], p[0], labels=["a", "b"])


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
