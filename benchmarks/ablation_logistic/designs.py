"""Calibration of the logistic model's noise-aware posterior on simulated designs.

The measurements behind the results page's section on logistic regression beyond
Adult (issue 14): K simulated data sets, coefficients and intercept drawn from the
prior N(0, I), one DP-SGD run each with the estimator's settings (clip norm
``clip_mult * sqrt(n_params)``, default 2 as in the estimator,
``learning_rate_scale = sqrt(d / 2)``, the default
preconditioner, T = 10,000, kappa = 0.1, delta = 1e-5), optionally scaled by
``--clip-mult`` and ``--lr-mult``, then the chosen post-processing backends. Reports
TARP (authors' and prior references) with the calibrated range at this K, the
per-coordinate z-scores ((posterior mean - truth) / posterior sd over the
simulations) and the *radial* z-score: the error of the posterior mean along the
direction of the true coefficient vector, in posterior sds along it. A calibrated
posterior has radial z mean 0 and sd 1; a positive mean is an outward bias (the
posterior overstates |theta|), which TARP with prior references detects and TARP
with the authors' references (centred on the posterior) cannot.

Designs:

- ``--design gaussian``: d Gaussian features with equicorrelation ``--rho`` and
  N = ``--n`` rows (rho = 0: uncorrelated);
- ``--design correlated``: issue 14's benchmark (``benchmarks/logistic_correlated.py``:
  six equicorrelated features, rho = 0.5, and a one-hot block of four beside the
  intercept, N = 10,000).

Methods (``--methods``): the package's backends (``emcee``, ``exact``, ``laplace``,
``last_iterate``, ``statistics``) and the ablation variants of the results page:
``emcee+jensen`` (gradient offset from the regression of the per-step curvature on
the means), ``emcee+jensenfd`` (the same with the stationary wander variance),
``emcee+wander`` (joint regression of the scale gradients on phi), ``emcee+oracle``
(the true third derivatives: not private, the yardstick), a ``+lr`` suffix
(linear-response components) and a ``+probit`` suffix (``emcee+probit``,
``emcee+dense+probit``: the wander's Jensen bias removed as the estimator's
``wander_correction="probit"`` does). Dense curvature (the results page's "dense errors with
linear-response widths"): ``emcee+dense`` (the package's ``error_model="dense"``),
``dense+oracle`` (the true curvature at the trace mean: not private),
``dense+wander`` (the stationary Lyapunov solution), ``dense+ou`` (the finite-window
correction; the same computation as ``+dense``), ``dense+wanderdf``,
``dense+oubayes`` and ``dense+anchor`` (the variants that failed), and
``emcee+hess`` / ``emcee+hess<f>`` (linear-response components from the true or a
noised Hessian released with the share f of the run's mu^2).

``--exact`` runs DP-SGD with the model's exact expectations over q
(``elbo_gradients="closed_form"``) on the same seeds (the same subsamples and noise).

Run: python benchmarks/ablation_logistic/designs.py --design gaussian --d 5 --n 5000 \
         --epsilon 1 --k 200 [--clip-mult 1] [--burn-in 0.5] [--methods emcee exact last_iterate]
"""

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np
import torch
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from _common import _engine_settings, kunc_options, save  # noqa: E402
from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.dpvi import run_dpvi_batched  # noqa: E402
from skdpvi.metrics import coverage_rmse_floor, ellipsoid_coverage, tarp_coverage  # noqa: E402
from skdpvi.models import LogisticRegressionModel  # noqa: E402
from skdpvi.noise_aware import (logistic_wander_width, remove_wander_bias,  # noqa: E402
                                sample_phi_star, statistics_posterior)
from skdpvi.posterior import NoiseAwarePosterior  # noqa: E402


def gaussian_design(d, n, rho, prior_scale=1.0):
    """A simulator of d equicorrelated Gaussian features, theta from N(0, s^2 I)."""
    def simulate(rng):
        z = rng.standard_normal((n, d))
        X = math.sqrt(1 - rho) * z + math.sqrt(rho) * rng.standard_normal((n, 1))
        theta = prior_scale * rng.standard_normal(d + 1)
        logits = X @ theta[:-1] + theta[-1]
        y = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(float)
        return X, y, theta
    return simulate, LogisticRegressionModel(d, prior_scale=prior_scale), n


def correlated_design():
    from logistic_correlated import MODEL, N, simulate
    return simulate, MODEL, N


def jensen_offset(result, model, stationary=False):
    """kappa * b: the wander's second-order term in the mean released mean-gradient.

    Over the recording window the means wander with covariance S around their
    average, so the average expected gradient is the gradient at the average plus
    ``b_k = 1/2 sum_jl S_jl T_jlk`` (T: third derivatives of the negative ELBO). The
    scale gradients give the diagonal curvature at every step, ``Lambda_jj(mu_t)``;
    its least-squares slope on mu_t is ``T_jjk``; only the diagonal of S is used.
    """
    p = model.n_params
    burn = result.burn_in
    phi = np.asarray(result.trace_phi[burn:-1], float)
    grad = np.asarray(result.trace_grad[burn:], float)
    kappa = result.sampling_rate
    mu, rho = phi[:, :p], phi[:, p:]
    scale, dscale = np.logaddexp(0, rho), 1 / (1 + np.exp(-rho))
    curvature = (grad[:, p:] / kappa + dscale / scale) / (scale * dscale)
    dm = mu - mu.mean(0)
    slope = np.linalg.lstsq(dm, curvature - curvature.mean(0), rcond=None)[0]  # (k, j)
    if stationary:
        # the stationary wander of constant-step SGD (fluctuation-dissipation), not the
        # trace's variance, which a transient not yet over inflates
        lr = np.asarray(result.learning_rate[:p], float)
        noise = np.asarray(result.noise_std[:p], float)
        total = curvature.mean(0) + 1.0 / model.prior_scale**2
        wander = lr * noise**2 / (2 * kappa * np.maximum(total, 1e-12))
    else:
        wander = dm.var(0)
    b = 0.5 * slope @ wander
    return np.concatenate([kappa * b, np.zeros(p)])


def wander_offset(result, model, return_se=False):
    """kappa * b from a joint regression of the scale gradients on all of phi.

    The variant of :func:`jensen_offset` that a running-sum implementation would use:
    ``d g_rho_j / d mu_k`` at fixed rho by least squares of the released scale
    gradients on (mu, rho) (rho follows mu, so a regression on mu alone absorbs that
    response), divided by ``kappa s_j s'_j`` (``dL / drho_j = s'_j (s_j Lambda_jj -
    1 / s_j)``, Price's theorem). With ``return_se`` also the standard error of each
    offset from the known DP noise of the scale gradients (independent across steps).
    """
    p = model.n_params
    phi = np.asarray(result.trace_phi[result.burn_in:-1], float)
    grad = np.asarray(result.trace_grad[result.burn_in:, p:], float)
    n = len(phi)
    x = phi - phi.mean(0)
    cov = x.T @ x / n
    wander = np.diag(cov)[:p]
    slope = np.linalg.lstsq(cov, (x.T @ (grad - grad.mean(0)) / n), rcond=1e-10)[0].T[:, :p]
    rho = phi[:, p:].mean(0)
    scale, dscale = np.logaddexp(0, rho), 1 / (1 + np.exp(-rho))
    kappa = result.sampling_rate
    weight = 0.5 * wander / (kappa * scale * dscale)
    offset = np.concatenate([kappa * weight @ slope, np.zeros(p)])
    if not return_se:
        return offset
    inv = np.linalg.pinv(cov * n)[:p, :p]
    se = kappa * np.sqrt(np.sum((weight * result.noise_std[p:]) ** 2) * np.diag(inv))
    return offset, se


def probit_jensen_shift(result, model, phi):
    """phi* draws with the wander's Jensen bias of the means removed (the estimator's
    ``wander_correction="probit"``)."""
    p = model.n_params
    out = phi.copy()
    out[:, :p] = remove_wander_bias(phi[:, :p], probit_jensen_width(result, model),
                                    prior_scale=model.prior_scale,
                                    variances=np.logaddexp(0, phi[:, p:]) ** 2)
    return out


def probit_jensen_width(result, model):
    return logistic_wander_width(result.stats, n_means=model.n_params,
                                 sampling_rate=result.sampling_rate,
                                 prior_scale=model.prior_scale)

def oracle_offset(result, model, X, n_mc=64):
    """kappa * b with the true third derivatives of the data term at the trace's mean.

    Not private (it reads X): the yardstick for the estimated offsets.
    """
    p = model.n_params
    trace = np.asarray(result.trace_phi[result.burn_in:-1], float)
    mu, scale = trace[:, :p].mean(0), np.logaddexp(0, trace[:, p:].mean(0))
    wander = trace[:, :p].var(0)
    Xa = np.column_stack([X, np.ones(len(X))]) if model.fit_intercept else X
    rng = np.random.default_rng(0)
    dcurv = np.zeros((p, p))  # [j, k] = dLambda_jj / dmu_k
    for _ in range(n_mc):
        prob = 1 / (1 + np.exp(-Xa @ (mu + scale * rng.standard_normal(p))))
        dcurv += (Xa**2 * (prob * (1 - prob) * (1 - 2 * prob))[:, None]).T @ Xa / n_mc
    return np.concatenate([result.sampling_rate * 0.5 * wander @ dcurv, np.zeros(p)])


def linear_response_components(result, phi_star, model):
    """Mean-field components with their covariance replaced by c S.

    S is the covariance of the means over the recording window, proportional to the
    inverse curvature where the trace has relaxed (fluctuation-dissipation); c
    anchors it to the mean-field scales (the median over coordinates of
    ``s_j^2 (S^-1)_jj``, the conditional variances), so that only the shape of the
    posterior (correlations, variance inflation) comes from the wander.
    """
    from skdpvi.models.components import GaussianComponents

    p = model.n_params
    trace = np.asarray(result.trace_phi[result.burn_in:-1, :p], float)
    S = np.cov(trace.T)
    inv_diag = np.diag(np.linalg.inv(S))
    scales = np.logaddexp(0, phi_star[:, p:])
    c = np.median(scales**2 * inv_diag, axis=1)
    chol = np.sqrt(c)[:, None, None] * np.linalg.cholesky(S)[None]
    return GaussianComponents(phi_star[:, :p], chol)


def dense_spread_means(result, model, phi, rng, anchor="scales"):
    """Redraw the mean coordinates of phi* with the dense error covariance of the trace mean.

    With isotropic gradient noise tau^2 on the means and one step gamma, the stationary
    covariance of the means' wander is S = gamma tau^2 / (2 kappa) H^-1 and the trace
    mean errs by N(0, tau^2 / (n kappa^2) H^-2): coupled coordinates err together,
    which the diagonal gradient model (error variance (H^-1)_jj^2 per coordinate,
    independent) misses. H^-1 = c S with c anchored to the mean-field scales (the
    median of s_j^2 (S^-1)_jj, as in :func:`linear_response_components`) or to the
    formula (c = 2 kappa / (gamma tau^2)).
    """
    p = model.n_params
    trace = np.asarray(result.trace_phi[result.burn_in:-1, :p], float)
    n, kappa = len(trace), result.sampling_rate
    S = np.cov(trace.T)
    tau2 = float(np.mean(result.noise_std[:p] ** 2))
    if anchor == "scales":
        scales = np.logaddexp(0, phi[:, p:].mean(0))
        c = np.median(scales**2 * np.diag(np.linalg.inv(S)))
    else:
        c = 2 * kappa / (float(np.mean(result.learning_rate[:p])) * tau2)
    H_inv = c * S
    cov = tau2 / (n * kappa**2) * H_inv @ H_inv
    out = phi.copy()
    out[:, :p] = phi[:, :p].mean(0) + rng.standard_normal((len(phi), p)) @ np.linalg.cholesky(cov).T
    return out


def known_curvature_means(result, model, phi, rng):
    """Replace the mean coordinates of phi* draws by the known-curvature estimate.

    At the mean-field optimum ``s_j^2 Lambda_jj = 1``, so the mean coordinates'
    curvature is ``a_j = 1 / s_j^2`` at the window's average scale: no regression
    needed. Then ``phi*_j = x_bar_j - (g_bar_j - e_bar_j) / (kappa a_j)`` with
    ``e_bar_j ~ N(0, tau_j^2 / n)``, tau_j from the residuals.
    """
    p = model.n_params
    st = result.stats
    n, kappa = st.count, result.sampling_rate
    x_mean, g_mean = st.sum_x[:p] / n, st.sum_g[:p] / n
    a = 1.0 / np.logaddexp(0, st.shift[p:] + st.sum_x[p:] / n) ** 2
    centre = x_mean - g_mean / (kappa * a)
    # residuals of g - kappa a (x - centre) from the sums
    c = kappa * a
    r2 = (st.sum_gg[:p] - 2 * c * (st.sum_gx[:p] - centre * st.sum_g[:p])
          + c**2 * (st.sum_xx[:p] - 2 * centre * st.sum_x[:p] + n * centre**2)) / n
    tau = np.sqrt(np.maximum(r2, 0))
    out = phi.copy()
    out[:, :p] = st.shift[:p] + centre + rng.standard_normal((len(phi), p)) * tau / (np.sqrt(n) * c)
    return out


def released_hessian(result, model, X, fraction, rng):
    """H = sum_i E_q[p_i (1 - p_i)] x_i x_i^T at the trace mean, optionally noised.

    ``fraction`` 0: exact (an oracle, not private). Else the Gaussian mechanism on the
    per-example matrices clipped to Frobenius norm C_H = clip_norm^2 / 8, with noise
    multiplier 1 / (sqrt(fraction) mu), mu the DP-SGD run's Gaussian-DP parameter
    (the release takes ``fraction`` of mu^2). Returns (H, entry noise sd).
    """
    p = model.n_params
    Xa = np.c_[X, np.ones(len(X))]
    mu = result.stats.shift[:p] + result.stats.sum_x[:p] / result.stats.count
    s = np.logaddexp(0, result.stats.shift[p:] + result.stats.sum_x[p:] / result.stats.count)
    m, v = Xa @ mu, (Xa**2) @ s**2
    nodes, weights = np.polynomial.hermite_e.hermegauss(12)
    prob = 1 / (1 + np.exp(-(m[:, None] + np.sqrt(v)[:, None] * nodes)))
    w = (prob * (1 - prob)) @ (weights / weights.sum())
    if not fraction:
        return (Xa * w[:, None]).T @ Xa, 0.0
    c_h = result.clip_norm**2 / 8
    w = w * np.minimum(1.0, c_h / (w * (Xa**2).sum(1)))
    q, T, sigma = result.sampling_rate, result.n_steps, result.noise_multiplier
    mu_gdp = q * math.sqrt(T * math.expm1(1 / sigma**2))
    sd = c_h / (math.sqrt(fraction) * mu_gdp)
    E = rng.standard_normal((p, p)) * sd
    E = np.triu(E) + np.triu(E, 1).T
    return (Xa * w[:, None]).T @ Xa + E, sd


def hessian_components(result, model, phi, X, fraction, rng, n_unique=100):
    """Gaussian components N(mu_m, (H_m + I / tau^2)^-1): linear-response covariance."""
    from skdpvi.models.components import GaussianComponents

    p = model.n_params
    H, sd = released_hessian(result, model, X, fraction, rng)
    chols = []
    for _ in range(n_unique if sd else 1):
        Hk = H
        if sd:
            E = rng.standard_normal((p, p)) * sd
            Hk = H + np.triu(E) + np.triu(E, 1).T
        lam, U = np.linalg.eigh(Hk)
        cov = (U / (np.maximum(lam, 0) + 1 / model.prior_scale**2)) @ U.T
        chols.append(np.linalg.cholesky(cov + 1e-12 * np.eye(p)))
    chols = np.array(chols)[np.arange(len(phi)) % len(chols)]
    return GaussianComponents(phi[:, :p], chols)


def _ou_ratio(N):
    """E[sample variance] of an OU path over N relaxation times, in units of n s^2 / 6."""
    N = np.asarray(N, float)
    small = N < 1e-3
    Ns = np.where(small, 1.0, N)
    r = 3 / Ns * (1 - 2 / Ns + 2 * -np.expm1(-Ns) / Ns**2)
    return np.where(small, 1 - N / 4, r)


def ou_curvature(S, gamma, q, n, floor):
    """Curvature per eigen-direction of the wander, corrected for the finite window."""
    from scipy.optimize import brentq

    g = float(np.exp(np.mean(np.log(gamma))))
    s2 = g**2 * float(np.exp(np.mean(np.log(q))))
    lam, U = np.linalg.eigh(S)
    r = lam / (n * s2 / 6)
    N = np.array([0.0 if ri >= 1 else brentq(lambda x: _ou_ratio(x) - ri, 1e-6, 1e7)
                  for ri in r])
    k = np.maximum(N / (g * n), floor)
    return (U * k) @ U.T


def ou_bayes_posterior(result, model, n_draws, rng, n_grid=400):
    """Dense components with the curvature's uncertainty per eigen-direction of the wander.

    In the eigenbasis U of the means' wander covariance (isotropic steps and noise:
    the curvature shares it), each direction's sample variance, in units of the
    random-walk level n gamma^2 q / 6, is r ~ r(N) chi2_nu / nu with N = gamma k n
    the relaxation times in the window and nu = N + 2.5; N gets a log-uniform prior
    from the prior's own curvature up, and each draw of N gives that direction's
    curvature k, its linear-response variance kappa / k and the error of its mean
    (x_bar - g_bar / k, variance q / (n k^2), with the N(x_bar, 1) prior of phi*).
    """
    from scipy.special import gammaln
    from skdpvi.models.components import GaussianComponents

    p, st = model.n_params, result.stats
    n, kappa = st.count, result.sampling_rate
    q = float(np.exp(np.mean(np.log(np.asarray(result.noise_std, float)[:p] ** 2))))
    g = float(np.exp(np.mean(np.log(np.asarray(result.learning_rate, float)[:p]))))
    prec0 = 1 / model.prior_scale**2
    lam, U = np.linalg.eigh(st.wander_covariance()[:p, :p])
    r = lam / (n * g**2 * q / 6)
    n_floor = g * n * kappa * prec0
    grid = np.exp(np.linspace(np.log(n_floor), np.log(max(1e4, 100 * n_floor)), n_grid))
    mean_r = _ou_ratio(grid)
    nu = grid + 2.5
    loglik = ((nu[None] / 2 - 1) * np.log(r[:, None]) - nu[None] / 2 * r[:, None] / mean_r[None]
              - nu[None] / 2 * np.log(mean_r[None]) + nu[None] / 2 * np.log(nu[None] / 2)
              - gammaln(nu[None] / 2))
    w = np.exp(loglik - loglik.max(1, keepdims=True))
    cdf = np.cumsum(w, 1) / w.sum(1, keepdims=True)
    u = rng.random((n_draws, p))
    idx = np.array([np.searchsorted(cdf[i], u[:, i]) for i in range(p)]).T
    k = grid[np.minimum(idx, n_grid - 1)] / (g * n)          # (M, p)
    xu = U.T @ (st.shift[:p] + st.sum_x[:p] / n)
    gu = U.T @ (st.sum_g[:p] / n)
    err = q / (n * k**2)
    v = 1 / (1 / err + 1 / model.prior_scale**2)
    m = v * ((xu - gu / k) / err + xu / model.prior_scale**2)
    means_u = m + np.sqrt(v) * rng.standard_normal((n_draws, p))
    chol = U[None] * np.sqrt(kappa / k)[:, None, :]
    return GaussianComponents(means_u @ U.T, chol)


def dense_posterior(result, model, X, variant, n_draws, rng):
    """Means from the dense error model and linear-response components, one curvature K.

    ``variant``: "oracle" (K = kappa (H + I / tau^2) with the true H at the trace
    mean: not private), "wander" (K from the wander covariance, as
    :func:`~skdpvi.noise_aware.coupled_means`), "wanderdf" (the same with the
    Dickey-Fuller-type bias 4 / (gamma n) removed per eigen-direction of Gamma K and
    floored at the prior's kappa / tau^2).
    """
    from skdpvi.models.components import GaussianComponents
    from skdpvi.noise_aware.coupling import wander_curvature

    p, st = model.n_params, result.stats
    n, kappa = st.count, result.sampling_rate
    prec0 = 1 / model.prior_scale**2
    x_bar = st.shift[:p] + st.sum_x[:p] / n
    g_bar = st.sum_g[:p] / n
    q = np.asarray(result.noise_std, float)[:p] ** 2
    gamma = np.asarray(result.learning_rate, float)[:p]
    if variant == "oracle":
        H, _ = released_hessian(result, model, X, 0, None)
        K = kappa * (H + prec0 * np.eye(p))
    else:
        K = wander_curvature(st.wander_covariance()[:p, :p], gamma, q)
        if variant == "wanderdf":
            g = np.sqrt(gamma)
            lam, U = np.linalg.eigh(g[:, None] * K * g[None, :])
            lam = np.maximum(lam - 4.0 / n, np.min(gamma) * kappa * prec0)
            K = (U * lam) @ U.T / g[:, None] / g[None, :]
        elif variant == "ou":
            K = ou_curvature(st.wander_covariance()[:p, :p], gamma, q, n, kappa * prec0)
        elif variant.startswith("anchor"):
            # the window curvature's correlations, its diagonal from the mean-field
            # scales (s_j^-2 = H_jj + prior precision at the mean-field optimum)
            from skdpvi.noise_aware import window_curvature

            K, _ = window_curvature(st.wander_covariance()[:p, :p], gamma, q, n,
                                    floor=kappa * prec0)
            scales = np.logaddexp(0, st.shift[p:] + st.sum_x[p:] / n)
            d = np.sqrt(kappa / scales**2 / np.diag(K))
            K = d[:, None] * K * d[None, :]
    K = 0.5 * (K + K.T)
    K_inv = np.linalg.inv(K)
    estimate = x_bar - K_inv @ g_bar
    cov = K_inv @ (q[:, None] * K_inv) / n
    post_cov = np.linalg.inv(np.linalg.inv(cov) + np.eye(p) / model.prior_scale**2)
    post_cov = 0.5 * (post_cov + post_cov.T)
    post_mean = post_cov @ (np.linalg.solve(cov, estimate) + x_bar / model.prior_scale**2)
    means = post_mean + rng.standard_normal((n_draws, p)) @ np.linalg.cholesky(post_cov).T
    comp_cov = kappa * K_inv
    return GaussianComponents(means, np.linalg.cholesky(0.5 * (comp_cov + comp_cov.T)))


#: Unit vectors of directions along which the design's likelihood is exactly flat
#: (set by main for the correlated design: its one-hot block beside the intercept).
FLAT_DIRECTIONS = None


def correlated_flat_directions(model):
    """The correlated design's flat direction: every one-hot coefficient up, the
    intercept down by the same amount (each row holds exactly one category)."""
    from logistic_correlated import N_CATEGORIES, N_GAUSSIAN

    v = np.zeros((1, model.n_params))
    v[0, N_GAUSSIAN:N_GAUSSIAN + N_CATEGORIES] = 1.0
    v[0, -1] = -1.0
    return v / np.linalg.norm(v)


class _Draws:
    """Posterior draws as mixture components (component m is draw m), so that the
    package's :class:`~skdpvi.noise_aware.FlatPriorComponents` can post-process them."""

    def __init__(self, draws):
        self.draws = draws
        self.n_components = len(draws)

    def sample(self, index, rng):
        return self.draws[index]


def prior_along_flat(draws, directions, model, rng):
    """Draws with their component along the flat directions replaced by the prior's
    (what the estimators' ``onehot_blocks`` does), through the package's code."""
    from skdpvi.noise_aware import FlatPriorComponents

    flat = FlatPriorComponents(_Draws(draws), directions, model.weight_prior_sd)
    return flat.sample(np.arange(len(draws)), rng)


def posterior_draws(result, model, n_examples, method, n_draws=1000, X=None):
    """Unconstrained posterior draws of one run by one backend."""
    if method.endswith("+flat"):
        if FLAT_DIRECTIONS is None:
            raise ValueError("+flat needs a design with known flat directions (correlated)")
        draws = posterior_draws(result, model, n_examples, method[:-5], n_draws, X)
        return prior_along_flat(draws, FLAT_DIRECTIONS, model, np.random.default_rng(1))
    if "+dense" in method:
        from skdpvi.noise_aware import linear_response_posterior, mean_field_curvature

        p = model.n_params
        # "+shrunk[m]": the wander's noise bulk shrunk with m looks per relaxation time
        # (default m = 2); plain "+dense": the estimator's dense error model
        shrunk = [part for part in method.split("+") if part.startswith("shrunk")]
        # "+kunclog[c]": the extrapolation's curvature uncertainty (cached_runs.py)
        comps, info = linear_response_posterior(
            result.stats, n_means=p, learning_rate=result.learning_rate,
            noise_std=result.noise_std, sampling_rate=result.sampling_rate,
            prior_scale=model.prior_scale, n_components=n_draws,
            diagonal_curvature=(mean_field_curvature(result.stats, p, result.sampling_rate)
                                if shrunk else None),
            effective_relaxations=float(shrunk[0][6:] or 2.0) if shrunk else 2.0,
            **kunc_options(method),
            random_state=0)
        if method.endswith("+probit"):  # the Jensen shift of the component means
            comps.mean = remove_wander_bias(comps.mean, probit_jensen_width(result, model),
                                            prior_scale=model.prior_scale,
                                            covariance=info["component_covariance"])
        return NoiseAwarePosterior.from_components(comps, model, method).sample(
            n_draws, random_state=0, unconstrained=True)
    if method == "dense+oubayes":
        comps = ou_bayes_posterior(result, model, n_draws, np.random.default_rng(0))
        return NoiseAwarePosterior.from_components(comps, model, method).sample(
            n_draws, random_state=0, unconstrained=True)
    if method.startswith("dense+"):
        comps = dense_posterior(result, model, X, method[6:], n_draws,
                                np.random.default_rng(0))
        return NoiseAwarePosterior.from_components(comps, model, method).sample(
            n_draws, random_state=0, unconstrained=True)
    if "+hess" in method:
        base, variant = method.split("+")
        fraction = float(variant[4:] or 0)
        phi, _ = sample_phi_star(result, base, n_draws, random_state=0, check=False)
        comps = hessian_components(result, model, phi, X, fraction,
                                   np.random.default_rng(0))
        return NoiseAwarePosterior.from_components(comps, model, method).sample(
            n_draws, random_state=0, unconstrained=True)
    if method.endswith("+knowna"):
        base = method.split("+")[0]
        phi, _ = sample_phi_star(result, base, n_draws, random_state=0, check=False)
        phi = known_curvature_means(result, model, phi, np.random.default_rng(0))
        return NoiseAwarePosterior(phi, model, base).sample(
            n_draws, random_state=0, unconstrained=True)
    if method.endswith("+coupled"):
        from skdpvi.noise_aware.coupling import coupled_means

        base = method.split("+")[0]
        phi, _ = sample_phi_star(result, base, n_draws, random_state=0, check=False)
        phi, _ = coupled_means(phi, result.stats, n_means=model.n_params,
                               learning_rate=result.learning_rate, noise_std=result.noise_std,
                               random_state=0)
        return NoiseAwarePosterior(phi, model, base).sample(
            n_draws, random_state=0, unconstrained=True)
    if "+spread" in method:
        base, *variants = method.split("+")
        phi, _ = sample_phi_star(result, base, n_draws, random_state=0, check=False)
        phi = dense_spread_means(result, model, phi, np.random.default_rng(0),
                                 "formula" if "formula" in variants else "scales")
        if "lr" in variants:
            comps = linear_response_components(result, phi, model)
            return NoiseAwarePosterior.from_components(comps, model, method).sample(
                n_draws, random_state=0, unconstrained=True)
        return NoiseAwarePosterior(phi, model, base).sample(
            n_draws, random_state=0, unconstrained=True)
    if method.endswith("+probit"):
        base = method.split("+")[0]
        phi, _ = sample_phi_star(result, base, n_draws, random_state=0, check=False)
        phi = probit_jensen_shift(result, model, phi)
        return NoiseAwarePosterior(phi, model, base).sample(
            n_draws, random_state=0, unconstrained=True)
    if method.endswith("+oracle") or method.endswith("+wander"):
        base, variant = method.split("+")
        offset = (oracle_offset(result, model, X) if variant == "oracle"
                  else wander_offset(result, model))
        phi, _ = sample_phi_star(result, base, n_draws, random_state=0, gradient_offset=offset)
        return NoiseAwarePosterior(phi, model, base).sample(
            n_draws, random_state=0, unconstrained=True)
    if method.endswith("+lr"):
        base = method[:-3]
        offset = (jensen_offset(result, model, base.endswith("+jensenfd"))
                  if "+jensen" in base else None)
        phi, _ = sample_phi_star(result, base.split("+")[0], n_draws, random_state=0,
                                 gradient_offset=offset)
        comps = linear_response_components(result, phi, model)
        return NoiseAwarePosterior.from_components(comps, model, method).sample(
            n_draws, random_state=0, unconstrained=True)
    if method.endswith("+jensen") or method.endswith("+jensenfd"):
        base, variant = method.split("+")
        phi, _ = sample_phi_star(result, base, n_draws, random_state=0,
                                 gradient_offset=jensen_offset(result, model,
                                                               variant == "jensenfd"))
        return NoiseAwarePosterior(phi, model, base).sample(
            n_draws, random_state=0, unconstrained=True)
    if method == "last_iterate":
        return NoiseAwarePosterior(result.phi[None], model, method).sample(
            n_draws, random_state=0, unconstrained=True)
    if method == "statistics":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            components, _ = statistics_posterior(result, model.data_statistics(n_examples),
                                                 n_draws, random_state=0)
        return NoiseAwarePosterior.from_components(components, model, method).sample(
            n_draws, random_state=0, unconstrained=True)
    phi, _ = sample_phi_star(result, method, n_draws, random_state=0)
    return NoiseAwarePosterior(phi, model, method).sample(n_draws, random_state=0,
                                                          unconstrained=True)


def one_batch(seeds, simulate, model, n_examples, settings, methods, flat=None):
    global FLAT_DIRECTIONS
    FLAT_DIRECTIONS = flat
    torch.set_num_threads(1)
    sims = [simulate(np.random.default_rng(s)) for s in seeds]
    runs = run_dpvi_batched(model, [(X, y) for X, y, _ in sims], random_states=seeds,
                            **settings)
    return [({m: posterior_draws(r, model, n_examples, m, X=X) for m in methods}, theta,
             r.diagnostics["clipped_fraction"]) for (X, _, theta), r in zip(sims, runs)]


def summarise(draws, theta, n_params, prior_scale=1.0):
    """TARP under both reference schemes, radial and per-coordinate z-scores."""
    def prior(n, rng):
        return prior_scale * rng.standard_normal((n, n_params))

    post = tarp_coverage(draws, theta, references="posterior", random_state=0,
                         n_bootstrap=100)
    pri = tarp_coverage(draws, theta, references="prior", prior_sampler=prior,
                        random_state=0, n_bootstrap=100)
    z = (draws.mean(1) - theta) / draws.std(1)
    u = theta / np.linalg.norm(theta, axis=1, keepdims=True)
    along = np.einsum("kmd,kd->km", draws, u)
    radial = (along.mean(1) - np.einsum("kd,kd->k", theta, u)) / along.std(1)
    return {"tarp_posterior": [float(post.rmse), float(post.rmse_se)],
            "tarp_prior": [float(pri.rmse), float(pri.rmse_se)],
            "ellipsoid_90": ellipsoid_coverage(draws, theta, 0.9),
            "radial_z": [float(radial.mean()), float(radial.std())],
            "z_mean": z.mean(0).tolist(), "z_sd": z.std(0).tolist()}


def describe(s):
    """One line of a :func:`summarise` result: TARP, radial z, coordinate z means and sds."""
    return (f"TARP {s['tarp_posterior'][0]:.3f} ± {s['tarp_posterior'][1]:.3f}"
            f" / {s['tarp_prior'][0]:.3f} ± {s['tarp_prior'][1]:.3f}   radial z "
            f"{s['radial_z'][0]:+.2f} (sd {s['radial_z'][1]:.2f})   z mean "
            f"{min(s['z_mean']):+.2f}..{max(s['z_mean']):+.2f}, z sd "
            f"{min(s['z_sd']):.2f}-{max(s['z_sd']):.2f}"
            + (f", 90 % ellipsoids {s['ellipsoid_90']:.2f}" if "ellipsoid_90" in s else ""))


def design_arguments(parser, k=200):
    """The design options shared by the scripts of this folder (``--design`` ... ``--k``)."""
    parser.add_argument("--design", choices=["gaussian", "correlated"], default="gaussian")
    parser.add_argument("--d", type=int, default=5)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--rho", type=float, default=0.0)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--k", type=int, default=k)
    parser.add_argument("--prior-scale", type=float, default=1.0,
                        help="theta ~ N(0, s^2 I), and the model's prior (gaussian design)")
    return parser


def design_of(args):
    """``(simulate, model, n_examples)`` of the parsed design options."""
    return (gaussian_design(args.d, args.n, args.rho, args.prior_scale)
            if args.design == "gaussian"
            else correlated_design())


def engine_settings(model, n_examples, epsilon, clip_mult=2.0, lr_mult=1.0, burn_in=0.2,
                    record_trace=False):
    """The estimator's default DP-SGD settings for a design (T = 10,000, kappa = 0.1,
    delta = 1e-5), with the clip norm and the learning rate scaled by the multipliers."""
    est = DPBayesianLogisticRegression()
    return _engine_settings(
        model, epsilon=epsilon, clip_norm=math.sqrt(model.n_params) * clip_mult,
        n_steps=10_000, sampling_rate=0.1, delta=1e-5, burn_in=burn_in, preconditioner=None,
        learning_rate_scale=est._default_learning_rate_scale(2 * model.n_params) * lr_mult,
        n_examples=n_examples, record_trace=record_trace)


def main():
    parser = design_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--clip-mult", type=float, default=2.0,
                        help="clip norm in units of sqrt(n_params); the default is the estimator's")
    parser.add_argument("--lr-mult", type=float, default=1.0)
    parser.add_argument("--burn-in", type=float, default=0.2)
    parser.add_argument("--burn-in-step", type=float, default=1.0,
                        help="multiplier of every mean coordinate's step before burn-in")
    parser.add_argument("--recording-step", type=float, default=1.0,
                        help="multiplier of every mean coordinate's step from burn-in on")
    parser.add_argument("--methods", nargs="+", default=["emcee"])
    parser.add_argument("--step-matrix", type=float, default=None, metavar="FLOOR",
                        help="a recording step matrix from the burn-in's dense curvature "
                             "(recording_step_matrix with this eigenvalue floor)")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--save", default=None, help="name of a JSON in benchmarks/results")
    parser.add_argument("--exact", action="store_true",
                        help="DP-SGD with exact expectations over q (elbo_gradients="
                             "'closed_form'), not Monte Carlo draws")
    args = parser.parse_args()
    simulate, model, n_examples = design_of(args)
    model.exact_expectations = args.exact
    settings = engine_settings(
        model, n_examples, args.epsilon, clip_mult=args.clip_mult, lr_mult=args.lr_mult,
        burn_in=args.burn_in, record_trace=any(m == "statistics" or ("+" in m and not m.endswith("+coupled") and "+hess" not in m
                         and not m.startswith("dense+")
                         and "+dense" not in m)
                         for m in (m.removesuffix("+flat") for m in args.methods)))
    if args.step_matrix is not None:
        from skdpvi.noise_aware import recording_step_matrix

        p = model.n_params
        beta = np.r_[np.ones(p), np.full(p, settings["preconditioner"])]
        settings["record_trace"] = True
        settings["step_matrix"] = recording_step_matrix(
            model.data_statistics(n_examples), sampling_rate=settings["sampling_rate"],
            noise_std=settings["noise_multiplier"] * settings["clip_norm"] / beta,
            floor=args.step_matrix)
    if args.burn_in_step != 1 or args.recording_step != 1:
        p = model.n_params
        settings["step_scales"] = tuple(np.r_[np.full(p, m), np.ones(p)]
                                        for m in (args.burn_in_step, args.recording_step))
    seeds = list(range(args.seed, args.seed + args.k))
    chunks = [seeds[i:i + 25] for i in range(0, args.k, 25)]
    start = time.perf_counter()
    out = Parallel(n_jobs=args.n_jobs)(
        delayed(one_batch)(c, simulate, model, n_examples, settings, args.methods,
                           correlated_flat_directions(model)
                           if args.design == "correlated" else None)
        for c in chunks)
    out = [o for part in out for o in part]
    theta = np.array([o[1] for o in out])
    floor, (lo, hi) = coverage_rmse_floor(args.k, random_state=0)
    label = (f"{args.design} d={model.n_params - 1} N={n_examples} rho={args.rho} "
             f"epsilon={args.epsilon} K={args.k} prior scale {model.prior_scale} clip x{args.clip_mult} lr x{args.lr_mult} "
             f"burn-in {args.burn_in} steps x{args.burn_in_step} / x{args.recording_step}"
             f"{'' if args.step_matrix is None else f' step matrix floor {args.step_matrix}'}"
             f"{' exact expectations' if args.exact else ''}")
    clipped = float(np.mean([o[2] for o in out]))
    print(f"{label}: clipped fraction {clipped:.4f}, {time.perf_counter() - start:.0f} s; "
          f"calibrated TARP at this K: {floor:.3f} ({lo:.3f}-{hi:.3f})")
    payload = {"label": label, "args": vars(args), "clipped": clipped,
               "floor": [floor, float(lo), float(hi)], "methods": {}}
    for method in args.methods:
        draws = np.array([o[0][method] for o in out])
        s = summarise(draws, theta, model.n_params, model.prior_scale)
        payload["methods"][method] = s
        print(f"  {method:<13} {describe(s)}")
    if args.save:
        save(args.save, payload)


if __name__ == "__main__":
    main()
