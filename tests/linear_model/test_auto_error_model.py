"""The statistics ``error_model="auto"`` reads off a logistic release to choose its model."""

from types import SimpleNamespace

import numpy as np
import pytest

from skdpvi.dpvi import TraceStatistics
from skdpvi.linear_model._logistic_dense import (AUTO_FALLBACK_MODEL, AUTO_MATCHED_INFLATION,
                                                  AUTO_MATCHED_MAX_PRIOR_SCALE,
                                                  AUTO_MATCHED_RELAXATIONS, auto_dense_model,
                                                  window_relaxations)
from skdpvi.linear_model._logistic_release_checks import wander_intercept_inflation


def _release(means, *, rho=0.0, steps=1e-3, kappa=0.1):
    """A release whose means wander as ``means`` (T, p), scales fixed at ``rho``."""
    T, p = means.shape
    phi = np.c_[means, np.full((T, p), rho)]
    phi = np.r_[phi, phi[-1:]]
    grads = np.zeros((T, 2 * p))
    return SimpleNamespace(stats=TraceStatistics.from_trace(phi, grads, 0),
                           learning_rate=np.full(2 * p, steps), sampling_rate=kappa,
                           noise_std=np.ones(2 * p))


def test_window_relaxations_reads_the_mean_field_curvature():
    rng = np.random.default_rng(0)
    release = _release(rng.standard_normal((500, 3)), rho=0.3, steps=2e-3, kappa=0.2)
    curvature = 0.2 / np.logaddexp(0.0, 0.3) ** 2
    np.testing.assert_allclose(window_relaxations(release, 3), 500 * 2e-3 * curvature)


def test_wander_inflation_is_one_for_an_independent_intercept_and_large_for_a_collinear_one():
    rng = np.random.default_rng(1)
    coefs = rng.standard_normal((4000, 4))
    independent = _release(np.c_[coefs, rng.standard_normal(4000)])
    assert wander_intercept_inflation(independent, 5) == pytest.approx(1.0, abs=0.01)
    # the intercept's wander moves with the sum of the coefficients' (uncentred features)
    collinear = _release(np.c_[coefs, -coefs.sum(1) + 0.2 * rng.standard_normal(4000)])
    assert wander_intercept_inflation(collinear, 5) > 50
    # ... unless that direction is a declared one-hot block's, which the prior restrains
    flat = np.r_[np.ones(4), 1.0] / np.sqrt(5.0)
    assert wander_intercept_inflation(collinear, 5, flat[None, :]) < 2.0


def test_auto_dense_model_follows_both_statistics():
    rng = np.random.default_rng(2)
    coefs = rng.standard_normal((4000, 4))
    centred = _release(np.c_[coefs, rng.standard_normal(4000)], rho=-2.0)
    relax = float(np.median(window_relaxations(centred, 5)))
    assert relax >= AUTO_MATCHED_RELAXATIONS
    model, info = auto_dense_model(centred, 5, fit_intercept=True)
    assert model == "dense_matched" and info["window_relaxations"] == pytest.approx(relax)
    assert info["inflation_over_sampling"] <= AUTO_MATCHED_INFLATION
    # a wide prior (large coefficients, a trace that may still lag): no matching
    model, _ = auto_dense_model(centred, 5, fit_intercept=True,
                                prior_scale=AUTO_MATCHED_MAX_PRIOR_SCALE)
    assert model == "dense_matched"
    model, info = auto_dense_model(centred, 5, fit_intercept=True,
                                   prior_scale=2 * AUTO_MATCHED_MAX_PRIOR_SCALE)
    assert model == AUTO_FALLBACK_MODEL
    assert info["prior_scale"] == 2 * AUTO_MATCHED_MAX_PRIOR_SCALE
    assert "intercept_inflation" not in info
    uncentred = _release(np.c_[coefs, -coefs.sum(1) + 0.2 * rng.standard_normal(4000)],
                         rho=-2.0)
    model, info = auto_dense_model(uncentred, 5, fit_intercept=True)
    # enough relaxations, but not centred: the shrunk window curvature
    assert AUTO_FALLBACK_MODEL == "dense_shrunk"
    assert model == "dense_shrunk" and info["inflation_over_sampling"] > AUTO_MATCHED_INFLATION
    # without an intercept there is nothing to inflate
    model, info = auto_dense_model(uncentred, 5, fit_intercept=False)
    assert model == "dense_matched" and "intercept_inflation" not in info
    # a window of about one relaxation: "dense", whatever the wander
    short = _release(np.c_[coefs, rng.standard_normal(4000)], rho=3.0, steps=1e-5)
    model, info = auto_dense_model(short, 5, fit_intercept=True)
    assert model == "dense" and info["window_relaxations"] < AUTO_MATCHED_RELAXATIONS
    assert "intercept_inflation" not in info
