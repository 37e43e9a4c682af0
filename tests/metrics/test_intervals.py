"""Per-parameter checks of a simulation study (skdpvi/metrics/_intervals.py)."""

import numpy as np
import pytest

from skdpvi.metrics import ellipsoid_coverage, interval_coverage, posterior_z_scores


def _conjugate(n_sim=2000, n_draws=400, width=1.0, seed=0):
    """An exact N(x/2, 1/2) posterior of theta ~ N(0, 1) given x ~ N(theta, 1), with
    its sd multiplied by ``width``, for two parameters."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(n_sim, 2))
    x = theta + rng.normal(size=theta.shape)
    draws = x[:, None] / 2 + width * np.sqrt(0.5) * rng.normal(size=(n_sim, n_draws, 2))
    return draws, theta


def test_a_calibrated_posterior_has_unit_z_scores_and_nominal_coverage():
    draws, theta = _conjugate()
    z = posterior_z_scores(draws, theta)
    assert z.shape == (2000, 2)
    np.testing.assert_allclose(z.mean(0), 0, atol=0.07)
    np.testing.assert_allclose(z.std(0), 1, atol=0.05)
    for level in (0.5, 0.9):
        np.testing.assert_allclose(interval_coverage(draws, theta, level), level, atol=0.03)


def test_a_too_narrow_posterior_is_seen_in_both():
    # half the sd: z sd 2, and a 90 % interval covers P(|Z| < 0.82), about 59 %
    draws, theta = _conjugate(width=0.5)
    np.testing.assert_allclose(posterior_z_scores(draws, theta).std(0), 2, rtol=0.05)
    np.testing.assert_allclose(interval_coverage(draws, theta), 0.59, atol=0.04)


def test_bad_input_names_the_argument():
    draws, theta = _conjugate(n_sim=30)
    with pytest.raises(ValueError, match="theta_true"):
        posterior_z_scores(draws, theta[:, :1])
    for level in (1.0, 0.0, "high", None):
        with pytest.raises(ValueError, match="level"):
            interval_coverage(draws, theta, level=level)
    # one draw per posterior has no interval (before: coverage 0) and no z-score
    for metric in (interval_coverage, posterior_z_scores, ellipsoid_coverage):
        with pytest.raises(ValueError, match="at least 2 posterior draws"):
            metric(draws[:, :1], theta)
    # a posterior of zero width has no z-score
    draws[0] = 0.0
    assert np.isnan(posterior_z_scores(draws, theta)[0]).all()


def test_the_study_result_reads_its_own_draws():
    from skdpvi.metrics._study_result import TarpStudyResult
    from skdpvi.metrics import tarp_coverage, marginal_tarp_coverage

    draws, theta = _conjugate(n_sim=100)
    result = TarpStudyResult(tarp=tarp_coverage(draws, theta, random_state=0),
                             marginal=marginal_tarp_coverage(draws, theta, random_state=0),
                             samples=draws, theta_true=theta, epsilons=np.full(100, np.nan))
    np.testing.assert_array_equal(result.z_scores(), posterior_z_scores(draws, theta))
    np.testing.assert_array_equal(result.interval_coverage(0.8),
                                  interval_coverage(draws, theta, 0.8))
    # its repr shows the per-parameter 90 % coverage beside the joint RMSE
    coverage = interval_coverage(draws, theta, 0.9)
    text = repr(result)
    assert f"coverage_90={coverage.min():.2f}-{coverage.max():.2f}" in text
    assert f"rmse={result.rmse:.4f}" in text
    # and the joint check in every direction
    from skdpvi.metrics import ellipsoid_coverage

    assert result.ellipsoid_coverage(0.8) == ellipsoid_coverage(draws, theta, 0.8)
    assert f"ellipsoid_90={ellipsoid_coverage(draws, theta):.2f}" in text


def test_ellipsoid_coverage_is_level_when_calibrated_and_sees_a_narrow_combination():
    from skdpvi.metrics import ellipsoid_coverage

    rng = np.random.default_rng(0)
    n_sim, n_draws = 400, 600
    theta = rng.normal(size=(n_sim, 6))
    x = theta + rng.normal(size=theta.shape)
    draws = x[:, None] / 2 + np.sqrt(0.5) * rng.normal(size=(n_sim, n_draws, 6))
    for level in (0.5, 0.9):
        assert abs(ellipsoid_coverage(draws, theta, level) - level) < 0.06
    # a posterior ten times too narrow along (1, -1, 1, -1, 1, -1) / sqrt(6) only:
    # every coordinate's interval still covers nearly right, the ellipsoid does not
    u = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0]) / np.sqrt(6)
    centred = draws - draws.mean(1, keepdims=True)
    narrow = draws - 0.9 * (centred @ u)[..., None] * u
    assert interval_coverage(narrow, theta).min() > 0.8
    assert ellipsoid_coverage(narrow, theta) < 0.5
    # any shape: a skewed posterior (calibrated by construction) still gives the level
    skew = rng.gamma(2.0, size=(n_sim, n_draws + 1, 2))
    assert abs(ellipsoid_coverage(skew[:, 1:], skew[:, 0]) - 0.9) < 0.05
    with pytest.raises(ValueError, match="level"):
        ellipsoid_coverage(draws, theta, 1.0)
    with pytest.raises(ValueError, match="draws"):
        ellipsoid_coverage(draws[:, :4], theta)
