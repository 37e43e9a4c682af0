"""Tests of tarp_coverage and marginal_tarp_coverage (skdpvi.metrics._tarp.api)."""

import numpy as np
import pytest

from skdpvi.metrics import (
    DEFAULT_ALPHA_GRID,
    coverage_from_frequencies,
    coverage_rmse,
    marginal_tarp_coverage,
    tarp_coverage,
)

from ._posteriors import K, P, SCHEMES, gaussian_posteriors, high_level_error, reference_kwargs


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
        (dict(n_bootstrap=1), "n_bootstrap must be 0 .* or at least 2"),  # was se 0
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
