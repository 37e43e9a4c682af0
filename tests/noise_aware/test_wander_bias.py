"""The wander's Jensen bias of logistic regression (skdpvi/noise_aware/wander_bias.py)."""

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from skdpvi.dpvi import TraceStatistics
from skdpvi.noise_aware import logistic_wander_width, remove_wander_bias

NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(40)
WEIGHTS = WEIGHTS / WEIGHTS.sum()


def _data(n=4000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.standard_normal((n, d)), np.ones(n)])
    theta = np.array([1.0, -0.7, 0.4, 0.3])[: d + 1]
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ theta))).astype(float)
    return X, y


def _optimum_of_means(X, y, cov, tau2=1.0):
    """argmin over mu of the negative ELBO's mean part with q's covariance fixed."""
    def f(mu):
        m, v = X @ mu, np.einsum("ij,jk,ik->i", X, cov, X)
        z = m[:, None] + np.sqrt(v)[:, None] * NODES
        s = 1 / (1 + np.exp(-z))
        ll = (y[:, None] * z - np.logaddexp(0, z)) @ WEIGHTS
        return -ll.sum() + mu @ mu / (2 * tau2), -((y[:, None] - s) @ WEIGHTS) @ X + mu / tau2
    return minimize(f, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B",
                    options={"gtol": 1e-10, "ftol": 1e-15}).x


def _likelihood_curvature(X, mu, cov):
    m, v = X @ mu, np.einsum("ij,jk,ik->i", X, cov, X)
    s = 1 / (1 + np.exp(-(m[:, None] + np.sqrt(v)[:, None] * NODES)))
    weight = (s * (1 - s)) @ WEIGHTS
    return (X * weight[:, None]).T @ X


@pytest.mark.parametrize("seed", [0, 1])
def test_the_probit_shift_is_the_shift_of_the_optimum_under_a_wider_posterior(seed):
    # The trace averages the gradient of a posterior widened by the wander S; the
    # first-order probit formula must map that optimum back to the true one.
    X, y = _data(seed=seed)
    p = X.shape[1]
    q_cov = np.diag(np.full(p, 0.03 ** 2))
    mu = _optimum_of_means(X, y, q_cov)
    H_lik = _likelihood_curvature(X, mu, q_cov)
    H = H_lik + np.eye(p)
    rng = np.random.default_rng(seed)
    root = rng.standard_normal((p, p)) * 0.1
    # a wander of tens of posterior variances, as DP-SGD's at epsilon 1 (w ~ 0.1)
    S = 30.0 * np.linalg.inv(H) + 1e-3 * root @ root.T
    widened = _optimum_of_means(X, y, q_cov + S)
    width = np.trace(S @ H_lik) / H_lik[-1, -1]
    corrected = remove_wander_bias(widened[None], width, covariance=np.linalg.inv(H))[0]
    shift, predicted = widened - mu, widened - corrected
    assert np.all(np.sign(shift[np.abs(mu) > 0.2]) == np.sign(mu[np.abs(mu) > 0.2]))  # outward
    sd = np.sqrt(np.diag(np.linalg.inv(H)))
    assert np.max(np.abs(shift / sd)) > 0.3  # a bias worth removing
    # the mean width w ignores how w_i varies with the example (it recovers 68-70 % of
    # the shift on this Gaussian design; the per-example probit sum 106 %): 40 % slack
    assert np.max(np.abs((predicted - shift) / sd)) < 0.4 * np.max(np.abs(shift / sd))
    assert np.all(np.abs(predicted) <= np.abs(shift) * 1.05)  # never more than the bias


def _trace(H_full, phi_star, n_steps=40_000, burn_in=5_000, step=0.02, kappa=0.1,
           noise=1.0, seed=0):
    """A linear-Gaussian SGD trace of the means (p) and constant scales (p)."""
    rng = np.random.default_rng(seed)
    p = len(phi_star)
    K = kappa * H_full
    mu = np.zeros((n_steps + 1, p))
    grads = np.empty((n_steps, p))
    mu[0] = phi_star
    for t in range(n_steps):
        grads[t] = K @ (mu[t] - phi_star) + noise * rng.standard_normal(p)
        mu[t + 1] = mu[t] - step * grads[t]
    return mu, grads


def test_the_width_reads_tr_SH_over_the_intercepts_curvature_from_the_sums():
    p, kappa = 3, 0.1
    H_lik = np.array([[40.0, 5.0, 8.0], [5.0, 30.0, 3.0], [8.0, 3.0, 50.0]])
    H_full = H_lik + np.eye(p)
    mu, grads = _trace(H_full, np.array([0.5, -0.2, 0.1]), kappa=kappa)
    # the scales sit at the mean-field optimum of the intercept: s_0^-2 = H_00 + 1
    s = 1 / np.sqrt(np.diag(H_full))
    rho = np.log(np.expm1(s))
    phi = np.column_stack([mu, np.tile(rho, (len(mu), 1))])
    g = np.column_stack([grads, np.zeros((len(grads), p))])
    stats = TraceStatistics.from_trace(phi, g, 5_000)
    S = np.cov(mu[5_000:-1].T)
    expected = np.trace(S @ H_lik) / H_lik[-1, -1]
    width = logistic_wander_width(stats, n_means=p, sampling_rate=kappa)
    assert width == pytest.approx(expected, rel=0.1)
    # nothing to read: no wander, or no curvature
    still = TraceStatistics.from_trace(np.tile(phi[:1], (10, 1)), np.zeros((9, 2 * p)), 2)
    assert logistic_wander_width(still, n_means=p, sampling_rate=kappa) == 0.0


def test_remove_wander_bias_is_a_shrink_that_spares_the_priors_share():
    means = np.array([[1.0, -2.0, 0.5], [0.2, 0.0, -1.0]])
    out = remove_wander_bias(means, 0.16, prior_scale=2.0)
    np.testing.assert_allclose(out, means * (1 - math.pi / 16 * 0.16))
    np.testing.assert_allclose(remove_wander_bias(means, 0.0), means)
    variances = np.array([0.1, 0.2, 4.0])  # the last coordinate: the prior's alone
    out = remove_wander_bias(means, 0.16, prior_scale=2.0, variances=variances)
    np.testing.assert_allclose(out[:, 2], means[:, 2])
    np.testing.assert_allclose(out[:, 0], means[:, 0] * (1 - math.pi / 16 * 0.16 * (1 - 0.1 / 4)))
    cov = np.diag(variances)
    np.testing.assert_allclose(
        remove_wander_bias(means, 0.16, prior_scale=2.0, covariance=cov), out)


def test_the_width_through_a_curvature_reads_tr_SH_off_the_window_alone():
    p, kappa = 3, 0.1
    H_lik = np.array([[40.0, 5.0, 8.0], [5.0, 30.0, 3.0], [8.0, 3.0, 50.0]])
    H_full = H_lik + np.eye(p)
    mu, grads = _trace(H_full, np.array([0.5, -0.2, 0.1]), kappa=kappa)
    rho = np.log(np.expm1(1 / np.sqrt(np.diag(H_full))))
    phi = np.column_stack([mu, np.tile(rho, (len(mu), 1))])

    def stats_of(g):
        return TraceStatistics.from_trace(
            phi, np.column_stack([g, np.zeros((len(g), p))]), 5_000)

    stats = stats_of(grads)
    K = kappa * H_full
    S = stats.wander_covariance()[:p, :p]
    width = logistic_wander_width(stats, n_means=p, sampling_rate=kappa, curvature=K)
    assert width == pytest.approx(np.sum(H_lik * S) / H_lik[-1, -1], rel=1e-10)
    # on a linear-Gaussian trace both readings agree ...
    stationary = logistic_wander_width(stats, n_means=p, sampling_rate=kappa)
    assert width == pytest.approx(stationary, rel=0.1)
    # ... but a part of the released gradients that moves with the means without being
    # their curvature (on DP-SGD's traces: the scales' coupling) inflates only the
    # stationary reading; the curvature's reading does not use the gradients at all
    coupled = stats_of(grads + 0.5 * kappa * np.diag(H_lik) * (mu[:-1] - mu[5_000:].mean(0)))
    assert logistic_wander_width(coupled, n_means=p, sampling_rate=kappa) > 1.3 * stationary
    assert logistic_wander_width(coupled, n_means=p, sampling_rate=kappa,
                                 curvature=K) == pytest.approx(width, rel=1e-10)
    # a curvature at the prior's alone says there is no likelihood to bias
    assert logistic_wander_width(stats, n_means=p, sampling_rate=kappa,
                                 curvature=kappa * np.eye(p)) == 0.0
