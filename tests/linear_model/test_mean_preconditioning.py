"""DPBayesianLinearRegression(mean_preconditioning): the recording step along the soft
directions of a correlated design."""

import numpy as np
import pytest

from skdpvi import DPBayesianLinearRegression


def _correlated(n=2000, p=4, rho=0.9, seed=0):
    rng = np.random.default_rng(seed)
    X = np.sqrt(1 - rho) * rng.standard_normal((n, p)) + np.sqrt(rho) * rng.standard_normal((n, 1))
    y = X @ rng.normal(0, 0.3, p) + rng.normal(0, 0.16, n)
    return X, y


def test_correlation_steps_make_the_soft_directions_wander():
    # equicorrelation 0.9: three soft directions (X^T X eigenvalue 0.1 N) that the plain
    # step barely moves; with the default they relax like uncorrelated coordinates, so
    # the recorded trace wanders along them several times further
    X, y = _correlated()
    kwargs = dict(max_iter=1000, epsilon=2.0, n_posterior_samples=100, random_state=0)
    fits = {mode: DPBayesianLinearRegression(mean_preconditioning=mode, **kwargs).fit(X, y)
            for mode in ("auto", "none")}
    Xi = np.c_[X, np.ones(len(X))]
    soft = np.linalg.eigh(Xi.T @ Xi)[1][:, :3]
    wander = {}
    for mode, fit in fits.items():
        result = fit.dpvi_result_
        means = result.trace_phi[result.burn_in:, :5]
        wander[mode] = (means @ soft).std(0)
    assert np.all(wander["auto"] > 2.5 * wander["none"])
    # the stiff direction is not slowed down: its wander does not grow
    stiff = np.linalg.eigh(Xi.T @ Xi)[1][:, -1]
    spread = {m: (f.dpvi_result_.trace_phi[f.dpvi_result_.burn_in:, :5] @ stiff).std()
              for m, f in fits.items()}
    assert spread["auto"] < 1.5 * spread["none"]


def test_mean_preconditioning_is_validated():
    X, y = _correlated(n=200)
    with pytest.raises(ValueError, match="mean_preconditioning must be one of"):
        DPBayesianLinearRegression(mean_preconditioning="dense").fit(X, y)
    with pytest.raises(ValueError, match="needs inference='statistics'"):
        DPBayesianLinearRegression(mean_preconditioning="correlation", inference="exact").fit(X, y)
    # "auto" with another backend is the plain step; so is a fit without burn-in
    for kwargs in (dict(inference="exact"), dict(burn_in=0)):
        est = DPBayesianLinearRegression(max_iter=200, n_posterior_samples=50, random_state=0,
                                         **kwargs)
        assert "step_matrix" not in est._engine_settings(*X.shape).engine
    est = DPBayesianLinearRegression(max_iter=200, random_state=0)
    assert callable(est._engine_settings(*X.shape).engine["step_matrix"])


def test_auto_leaves_more_than_thirty_features_to_the_plain_step():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 31))
    auto = DPBayesianLinearRegression(max_iter=100)._engine_settings(*X.shape).engine
    assert "step_matrix" not in auto
    forced = DPBayesianLinearRegression(max_iter=100, mean_preconditioning="correlation")
    assert callable(forced._engine_settings(*X.shape).engine["step_matrix"])
    X30 = X[:, :30]
    assert callable(DPBayesianLinearRegression(max_iter=100)._engine_settings(
        *X30.shape).engine["step_matrix"])


def test_nearly_collinear_features_keep_their_fit():
    # two features at correlation 0.995: the step matrix speeds the trace up along their
    # nearly flat difference, and the statistics posterior's shrinkage scale, read off a
    # fit with the off-diagonal held at 0, collapsed with it (R^2 0.06 instead of 0.88
    # for this seed; the user review's report)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3))
    y = X @ [0.5, 0.15, -0.2] + rng.normal(0, 0.2, 1000)
    X = np.c_[X, X[:, 0] + 0.1 * rng.normal(size=1000)]
    fit = DPBayesianLinearRegression(max_iter=2000, random_state=2).fit(X, y)
    assert fit.score(X, y) > 0.85
    # the stiff direction (the sum of the collinear pair's coefficients) is right
    assert abs(fit.coef_[0] + fit.coef_[3] - 0.5) < 0.1
