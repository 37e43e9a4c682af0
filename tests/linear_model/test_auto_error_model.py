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


def test_auto_dense_model_takes_dense_where_the_batch_is_small_against_the_noise():
    from skdpvi.linear_model._logistic_release_checks import SMALLEST_BATCH_OVER_NOISE

    rng = np.random.default_rng(3)
    centred = _release(np.c_[rng.standard_normal((4000, 4)), rng.standard_normal(4000)],
                       rho=-2.0)
    assert auto_dense_model(centred, 5, fit_intercept=True)[0] == "dense_matched"
    above = auto_dense_model(centred, 5, fit_intercept=True,
                             batch_over_noise=SMALLEST_BATCH_OVER_NOISE)
    assert above[0] == "dense_matched" and "batch_over_noise" not in above[1]
    model, info = auto_dense_model(centred, 5, fit_intercept=True,
                                   batch_over_noise=0.5 * SMALLEST_BATCH_OVER_NOISE)
    assert model == "dense" and info["batch_over_noise"] == 0.5 * SMALLEST_BATCH_OVER_NOISE


def test_a_fit_with_few_rows_for_its_budget_reads_its_ratio_into_the_choice():
    import warnings

    from skdpvi import DPBayesianLogisticRegression

    rng = np.random.default_rng(4)
    X = rng.standard_normal((500, 14))  # 15 parameters: the mean field
    y = (rng.random(500) < 0.5).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DPBayesianLogisticRegression(epsilon=0.3, max_iter=2000, random_state=0).fit(X, y)
        fixed = DPBayesianLogisticRegression(epsilon=0.3, max_iter=2000, clip_norm=8.0,
                                             random_state=0).fit(X, y)
    assert est.inference_diagnostics_["batch_over_noise"] < 0.3
    assert est.error_model_ == "dense"
    choice = est.inference_diagnostics_["auto_error_model"]
    assert choice["batch_over_noise"] == pytest.approx(
        est.inference_diagnostics_["batch_over_noise"])
    # with a clip norm of the user's the ratio does not decide (as its warning does not)
    assert "batch_over_noise" not in fixed.inference_diagnostics_["auto_error_model"]
