"""The logistic posterior's joint gap traced to the noise of its curvature (thirty-first session).

Three measurements on ``release_cache.py``'s cached releases (the default's
post-processing again, exactly as ``fit`` ran it, with the dense models' curvature
and errors captured; nothing here is a package option):

``check``
    Per fit, the generalised eigenvalues of the curvature the posterior used, K_hat,
    against the curvature of the simulation's own data at the truth, ``kappa X^T W X +
    kappa / tau^2 I`` (an oracle), medians by rank; along the posterior's own
    eigen-directions (narrowest first), the variance the true curvature implies
    (``K^-1 Q K^-1 / n + kappa K^-1``) over the variance stated, the share of the
    stated variance that is the optimum's error, and the truth's error in posterior sds
    (root mean square over the fits; 1 calibrated).
``wishart``
    The curvature's sampling noise integrated out: each mixture component takes its own
    curvature ``K_hat^1/2 W K_hat^1/2`` (W Wishart with ``nu = c x`` the median relaxation
    count degrees of freedom, scaled to mean I; for every model its diagonal rescaled to
    K_hat's, which the released mean-field scales fix), and with it its own posterior of
    the optimum (the package's: ``x_bar - K_m^-1 g_bar``, error ``K_m^-1 Q K_m^-1 / n``,
    the gradient model's prior N(x_bar, I)), plus the default's probit shift, and
    covariance ``kappa K_m^-1``; beside it the oracle, the data's own curvature at the
    truth in the same formulas (``oracle``: the default's probit shift kept;
    ``oracle_probit``: the shift read through the data's curvature too, for the fits
    whose default applies it).
``nonlinear``
    The matched fits' wander covariance (whitened by the uncorrelated target) with its
    eigenvalues shrunk by Ledoit & Wolf's (2020) analytical nonlinear shrinkage for
    ``c x`` the median relaxations samples, in every matched fit, in place of the
    gated linear shrinkage of its noise bulk.
``eb`` (thirty-second session)
    A posterior of the curvature's correlations instead of its reading: the matched
    fits' wander covariance, whitened by the uncorrelated target (the window's
    variances the released mean-field diagonal implies), read as a Wishart sample of
    ``nu = c x`` the median relaxations looks, under an inverse-Wishart prior with mean
    I whose degrees of freedom m0 maximise the marginal likelihood (empirical Bayes;
    ``_m0_over_nu`` reports m0 / nu). ``eb_point``: every component through the
    posterior mean's curvature (the unit-diagonal correlation of its inverse, scaled
    by the diagonal); ``eb``: each component through its own posterior draw;
    ``ebw``: the package's curvature perturbed as in ``wishart`` with m0 + nu degrees
    of freedom. Optimum, error, prior gain, covariance and the default's probit shift
    as in ``wishart``. Each also with the coupling along the means in the prior's
    mean (``ebr_point``, ``ebr``: mean ``I + beta u u^T``, u the whitened window mean
    of the means, beta by marginal likelihood too).
``ebpkg``
    That structured posterior mean as the package's pre-matching shrinkage, in every
    matched fit (``ebrpkg``).
``debias``
    ``error_model="dense"`` (whose curvature is the inverse of the window's wander
    covariance S, so its optimum's error ``K^-1 Q K^-1 / n`` is quadratic in S and
    biased up by the Wishart term ``S tr(S) / nu``) with that term removed:
    ``(K^-1 Q K^-1 - K^-1 tr(K^-1 Q) / nu) / (n (1 + 1 / nu))``, eigenvalues floored.

Results: doc/results.rst, "A second set of hold-outs, and the joint gap traced to the
curvature (thirty-first session)" and "A posterior of the curvature (thirty-second
session)". Run::

    python benchmarks/ablation_logistic/curvature_noise.py check toep06d6e05 gauss
    python benchmarks/ablation_logistic/curvature_noise.py wishart toep06d6e05 --c 1 2 4
    python benchmarks/ablation_logistic/curvature_noise.py eb toep06d6e05 gauss --c 1 2
"""

import argparse
import contextlib
import os
import sys
import warnings

import numpy as np
import scipy.linalg as sl
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import release_cache as rc  # noqa: E402
from _common import machine, save  # noqa: E402


@contextlib.contextmanager
def captured():
    """Keep the last ``linear_response_posterior`` info (K and the optimum's error)."""
    from skdpvi.linear_model import _logistic_dense

    original, box = _logistic_dense.linear_response_posterior, {}

    def wrapped(*args, **kwargs):
        components, info = original(*args, **kwargs)
        box["info"] = info
        return components, info

    _logistic_dense.linear_response_posterior = wrapped
    try:
        yield box
    finally:
        _logistic_dense.linear_response_posterior = original


#: ``--set`` parameters of the cached runs (``release_cache.py run --set ... --tag``)
RUN_PARAMS = {}


def _refit(cell, row, **params):
    """(theta, X, the estimator post-processed as ``fit`` would, the captured info)."""
    from sklearn.base import clone

    warnings.simplefilter("ignore")
    theta, X, y = rc.simulate(rc._rule_cell(cell), row["seed"])
    est = clone(rc.estimator(cell, **RUN_PARAMS)).set_params(random_state=row["seed"], **params)
    with captured() as box:
        rc.refitter(est, X, y)(row["result"])
    return theta, X, est, box["info"]


def _true_curvature(X, theta, result, tau):
    rows = np.c_[X, np.ones(len(X))]
    p = 1 / (1 + np.exp(-rows @ theta))
    kappa = result.sampling_rate
    return kappa * (rows * (p * (1 - p))[:, None]).T @ rows + kappa / tau**2 * np.eye(len(theta))


def _check_one(cell, row, run_params):
    RUN_PARAMS.update(run_params)  # in the worker
    theta, X, est, info = _refit(cell, row)
    result = row["result"]
    p, n = len(theta), result.stats.count
    K_true = _true_curvature(X, theta, result, rc.prior_scale(cell))
    generalised = sl.eigh(info["curvature"], K_true, eigvals_only=True)
    draws = est.sample_posterior(2000, random_state=0)
    mean, cov = draws.mean(0), np.cov(draws.T)
    var, U = np.linalg.eigh(cov)
    K_inv = np.linalg.inv(K_true)
    true = K_inv @ (result.noise_std[:p, None] ** 2 * K_inv) / n + result.sampling_rate * K_inv
    stated = info["covariance"] + info["component_covariance"]
    along = lambda A: np.einsum("ji,jk,ki->i", U, A, U)  # noqa: E731
    return {"generalised": generalised, "true_over_stated": along(true) / along(stated),
            "error_share": along(info["covariance"]) / var,
            "truth_z": U.T @ (theta - mean) / np.sqrt(var), "model": est.error_model_,
            "relaxations": float(np.median(info["relaxation_times"]))}


def check(args):
    payload = {"machine": machine(), "cells": {}}
    for cell in args.cells:
        rows = rc.load(args.cache, rc._tagged(cell, args.tag))[:args.max_sim]
        fits = Parallel(n_jobs=args.n_jobs)(delayed(_check_one)(cell, r, args.run_params)
                                            for r in rows)
        median = lambda key: np.median([f[key] for f in fits], 0).round(2).tolist()  # noqa: E731
        z = np.array([f["truth_z"] for f in fits])
        entry = {"n_sim": len(fits), "generalised_eigenvalues": median("generalised"),
                 "true_over_stated": median("true_over_stated"),
                 "error_share": median("error_share"),
                 "truth_z_rms": np.sqrt((z**2).mean(0)).round(2).tolist(),
                 "relaxations_median": float(np.median([f["relaxations"] for f in fits]))}
        payload["cells"][rc._tagged(cell, args.tag)] = entry
        print(f"{rc._tagged(cell, args.tag)} (K = {len(fits)}, median relaxations {entry['relaxations_median']:.1f})")
        for key in ("generalised_eigenvalues", "true_over_stated", "error_share", "truth_z_rms"):
            print(f"  {key:<24}", " ".join(f"{v:.2f}" for v in entry[key]))
        save(args.save + "_check" + (f"_{args.tag}" if args.tag else ""), payload)


def _psd_cholesky(A):
    w, V = np.linalg.eigh(0.5 * (A + A.T))
    return np.linalg.cholesky((V * np.maximum(w, 1e-12 * w.max())) @ V.T)


def _optima(K_inv, x_bar, g_bar, Q, n, prior_sd=1.0):
    """The package's posterior of the means' optimum (``coupling._optimum_of_means``,
    the gradient model's prior N(x_bar, prior_sd^2 I) in gain form) for a stack of
    curvatures: (means, covariances)."""
    estimate = x_bar - np.einsum("mij,j->mi", K_inv, g_bar)
    error = np.einsum("mij,j,mkj->mik", K_inv, Q, K_inv) / n
    error = 0.5 * (error + error.transpose(0, 2, 1))
    gain = error @ np.linalg.inv(error + prior_sd**2 * np.eye(len(x_bar)))
    cov = error - gain @ error
    mean = estimate + np.einsum("mij,mj->mi", gain, x_bar - estimate)
    return mean, 0.5 * (cov + cov.transpose(0, 2, 1))


def _roots(A):
    """Square roots ``V diag(sqrt(w))`` of a stack of symmetric PSD matrices."""
    w, V = np.linalg.eigh(A)
    return V * np.sqrt(np.maximum(w, 0.0))[..., None, :]


def _default_release(cell, row, run_params, n_draws):
    """The default post-processed again, and what the curvature probes build on: theta,
    X, the estimator, its captured info, its draws ({"default": ...}), the release, the curvature, the
    noise variances, the window's mean and mean gradient, and the default's probit
    shift of the centre (kept as it is)."""
    RUN_PARAMS.update(run_params)  # in the worker
    theta, X, est, info = _refit(cell, row)
    out = {"default": est.sample_posterior(n_draws, random_state=0)}
    result = row["result"]
    p, n = len(theta), result.stats.count
    K_hat, Q = info["curvature"], result.noise_std[:p] ** 2
    x_bar = result.stats.shift[:p] + result.stats.sum_x[:p] / n
    g_bar = result.stats.sum_g[:p] / n
    if not hasattr(est.posterior_.components, "mean"):
        raise ValueError("declared one-hot blocks (flat-direction components): not covered")
    shift = (est.posterior_.components.mean.mean(0)
             - _optima(np.linalg.inv(K_hat)[None], x_bar, g_bar, Q, n)[0][0])
    return theta, X, est, info, out, result, K_hat, Q, x_bar, g_bar, shift


def _wishart_one(cell, row, cs, run_params, n_draws=1000):
    theta, X, est, info, out, result, K_hat, Q, x_bar, g_bar, shift = _default_release(
        cell, row, run_params, n_draws)
    p, n, kappa = len(theta), result.stats.count, result.sampling_rate
    w, V = np.linalg.eigh(K_hat)
    root = (V * np.sqrt(w)) @ V.T
    relaxations = float(np.median(info["relaxation_times"]))
    rng = np.random.default_rng(row["seed"])
    K_true = _true_curvature(X, theta, result, rc.prior_scale(cell))
    for c in [0.0] + list(cs):  # 0: the oracle, the data's own curvature in every component
        if c == 0.0:
            K_m = np.broadcast_to(K_true, (n_draws, p, p))
        else:
            nu = int(np.ceil(max(c * relaxations, p + 2.0)))
            G = rng.standard_normal((n_draws, nu, p))
            K_m = root @ (np.einsum("mki,mkj->mij", G, G) / nu) @ root
            scale = np.sqrt(np.diag(K_hat) / np.einsum("mii->mi", K_m))
            K_m = K_m * scale[:, :, None] * scale[:, None, :]
        K_m_inv = np.linalg.inv(K_m)
        mean, cov = _optima(K_m_inv, x_bar, g_bar, Q, n)
        means = mean + shift + np.einsum("mij,mj->mi", _roots(cov),
                                         rng.standard_normal((n_draws, p)))
        L = _roots(kappa * 0.5 * (K_m_inv + K_m_inv.transpose(0, 2, 1)))
        out[f"wishart{c:g}" if c else "oracle"] = means + np.einsum(
            "mij,mj->mi", L, rng.standard_normal((n_draws, p)))
        if c == 0.0 and est.wander_correction_ == "probit":
            # the oracle with its probit shift read through the data's curvature too
            from skdpvi.noise_aware import logistic_wander_width, remove_wander_bias

            tau = rc.prior_scale(cell)
            width = logistic_wander_width(result.stats, n_means=p, sampling_rate=kappa,
                                          prior_scale=tau, curvature=K_true)
            K_true_inv = np.linalg.inv(K_true)
            shifted = remove_wander_bias(means - shift, width, prior_scale=tau,
                                         covariance=kappa * K_true_inv)
            out["oracle_probit"] = shifted + np.einsum("mij,mj->mi", L,
                                                       rng.standard_normal((n_draws, p)))
        elif c == 0.0:
            out["oracle_probit"] = out["oracle"]
    return theta, out


def _debias_one(cell, row, cs, run_params, n_draws=1000):
    RUN_PARAMS.update(run_params)  # in the worker
    theta, X, est, _ = _refit(cell, row)
    out = {"default": est.sample_posterior(n_draws, random_state=0)}
    _, _, est, info = _refit(cell, row, error_model="dense")
    out["dense"] = est.sample_posterior(n_draws, random_state=0)
    result = row["result"]
    p, n = len(theta), result.stats.count
    K_inv, Q = np.linalg.inv(info["curvature"]), result.noise_std[:p] ** 2
    E = K_inv @ (Q[:, None] * K_inv) / n
    floor = 0.05 * max(np.linalg.eigvalsh(E).min(), 0.0) + 1e-300
    relaxations = float(np.median(info["relaxation_times"]))
    components = est.posterior_.components
    means, centre = components.mean.copy(), components.mean.mean(0)
    for c in cs:
        nu = c * relaxations
        E_c = (K_inv @ (Q[:, None] * K_inv) - K_inv * np.trace(K_inv * Q[None, :]) / nu)
        E_c /= n * (1 + 1 / nu)
        w, V = np.linalg.eigh(0.5 * (E_c + E_c.T))
        E_c = (V * np.maximum(w, floor)) @ V.T
        A = _psd_cholesky(E_c) @ np.linalg.inv(_psd_cholesky(E))
        components.mean = centre + (means - centre) @ A.T
        out[f"debias{c:g}"] = est.sample_posterior(n_draws, random_state=0)
    components.mean = means
    return theta, out


def _nonlinear_eigenvalues(lam, n):
    """Ledoit & Wolf's (2020) analytical nonlinear shrinkage of sample eigenvalues
    ``lam`` (p < n samples): each moved to the population value it most likely
    comes from, through a kernel estimate of the sample spectrum's density and its
    Hilbert transform."""
    lam = np.maximum(np.asarray(lam, float), 1e-12)
    p = len(lam)
    c = p / n
    h = n ** (-1.0 / 3.0)
    H = h * lam
    x = (lam[:, None] - lam[None, :]) / H[None, :]
    root5 = np.sqrt(5.0)
    f = (3 / (4 * root5)) * np.maximum(1 - x**2 / 5, 0) / H[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        Hf = (-3 / (10 * np.pi)) * x + (3 / (4 * root5 * np.pi)) * (1 - x**2 / 5) * np.log(
            np.abs((root5 - x) / (root5 + x)))
    Hf = np.where(np.abs(np.abs(x) - root5) < 1e-12, (-3 / (10 * np.pi)) * x, Hf)
    f_tilde, Hf_tilde = f.mean(1), (Hf / H[None, :]).mean(1)
    return lam / ((np.pi * c * lam * f_tilde) ** 2 + (1 - c - np.pi * c * lam * Hf_tilde) ** 2)


def _whitened_shrinkage(whitened):
    """``shrink_wander_covariance`` replaced, in every matched fit: the wander
    covariance whitened by the uncorrelated target (each coordinate's window variance
    that its mean-field curvature implies), mapped by ``whitened(W, n_relax)``, and
    unwhitened. "dense_shrunk" (its effective relaxations positional) is unchanged."""
    from skdpvi.noise_aware import linear_response as lr

    original = lr.shrink_wander_covariance

    def shrink(covariance, steps, noise_var, n_steps, diagonal_curvature, *args, **kwargs):
        if args:
            return original(covariance, steps, noise_var, n_steps, diagonal_curvature,
                            *args, **kwargs)
        steps = np.asarray(steps, float)
        k = np.asarray(diagonal_curvature, float)
        n_relax = np.maximum(n_steps * steps * k, 1e-2)
        target = lr._window_factor(n_relax) * steps * np.asarray(noise_var, float) / (2 * k)
        w = 1 / np.sqrt(target)
        W = whitened(np.asarray(covariance, float) * np.outer(w, w), n_relax, w)
        return 0.5 * (W + W.T) / np.outer(w, w), {"intensity": np.nan, "n_kept": 0}

    return shrink


def _nonlinear_shrinkage(looks):
    """The whitened wander's eigenvalues shrunk nonlinearly for ``looks`` x the median
    relaxations samples (eigenvectors kept)."""
    def whitened(W, n_relax, w):
        lam, U = np.linalg.eigh(W)
        n = max(looks * float(np.median(n_relax)), len(W) + 1.0)
        return (U * _nonlinear_eigenvalues(lam, n)) @ U.T

    return _whitened_shrinkage(whitened)


def _structured_shrinkage(looks, x_bar):
    """The whitened wander by its posterior mean under the inverse-Wishart prior with
    mean ``I + beta u u^T`` (u the whitened window mean of the means; m0 and beta by
    marginal likelihood, :func:`_eb_structured`), for ``looks`` x the median
    relaxations looks."""
    def whitened(W, n_relax, w):
        p = len(W)
        nu = max(looks * float(np.median(n_relax)), p + 2.0)
        u = w * x_bar[:p]
        m0, T = _eb_structured(W, nu, u / np.linalg.norm(u))
        return ((m0 - p - 1) * T + nu * W) / (m0 + nu - p - 1)

    return _whitened_shrinkage(whitened)


def _every_matched_fit(cell, row, run_params, shrinkages, n_draws=1000):
    """(theta, draws): the default's, and the default's again with each of
    ``shrinkages`` (name: replacement of ``shrink_wander_covariance``) in every
    matched fit."""
    from skdpvi.linear_model import _logistic_dense
    from skdpvi.noise_aware import linear_response

    RUN_PARAMS.update(run_params)  # in the worker
    theta, _, est, _ = _refit(cell, row)
    out = {"default": est.sample_posterior(n_draws, random_state=0)}
    original = linear_response.shrink_wander_covariance, _logistic_dense.MATCHED_BULK_SHRINKAGE
    try:
        _logistic_dense.MATCHED_BULK_SHRINKAGE = (0.0, np.inf)  # in every matched fit
        for name, shrinkage in shrinkages.items():
            linear_response.shrink_wander_covariance = shrinkage
            _, _, est, _ = _refit(cell, row)
            out[name] = est.sample_posterior(n_draws, random_state=0)
    finally:
        linear_response.shrink_wander_covariance, _logistic_dense.MATCHED_BULK_SHRINKAGE = original
    return theta, out


def _nonlinear_one(cell, row, cs, run_params, n_draws=1000):
    return _every_matched_fit(cell, row, run_params,
                              {f"nonlinear{c:g}": _nonlinear_shrinkage(c) for c in cs}, n_draws)


def _ebpkg_one(cell, row, cs, run_params, n_draws=1000):
    stats = row["result"].stats
    x_bar = stats.shift + stats.sum_x / stats.count
    return _every_matched_fit(
        cell, row, run_params,
        {f"ebrpkg{c:g}": _structured_shrinkage(c, x_bar) for c in cs}, n_draws)


def _eb_prior_dof(W, nu):
    """The inverse-Wishart prior's degrees of freedom m0 (its mean I) that maximise the
    marginal likelihood of the whitened wander covariance W read from nu looks."""
    from scipy.optimize import minimize_scalar
    from scipy.special import multigammaln

    p = len(W)
    logdet = lambda A: np.linalg.slogdet(A)[1]  # noqa: E731

    def negative(log_excess):  # m0 = p + 1 + exp(log_excess)
        m0 = p + 1 + np.exp(log_excess)
        Psi = (m0 - p - 1) * np.eye(p)
        return -(0.5 * m0 * logdet(Psi) + multigammaln(0.5 * (m0 + nu), p)
                 - multigammaln(0.5 * m0, p) - 0.5 * (m0 + nu) * logdet(Psi + nu * W))

    best = minimize_scalar(negative, bounds=(-5.0, 12.0), method="bounded")
    return p + 1 + float(np.exp(best.x))


def _eb_structured(W, nu, u):
    """m0 and beta of an inverse-Wishart prior with mean ``I + beta u u^T`` (u unit)
    that maximise the marginal likelihood of W read from nu looks: (m0, mean)."""
    from scipy.optimize import minimize
    from scipy.special import multigammaln

    p = len(W)
    logdet = lambda A: np.linalg.slogdet(A)[1]  # noqa: E731

    def negative(x):
        m0, beta = p + 1 + np.exp(x[0]), np.exp(x[1]) - 1  # beta > -1: T stays PD
        T = np.eye(p) + beta * np.outer(u, u)
        Psi = (m0 - p - 1) * T
        return -(0.5 * m0 * logdet(Psi) + multigammaln(0.5 * (m0 + nu), p)
                 - multigammaln(0.5 * m0, p) - 0.5 * (m0 + nu) * logdet(Psi + nu * W))

    best = min((minimize(negative, x0, method="Nelder-Mead",
                         options=dict(xatol=1e-4, fatol=1e-6, maxiter=2000))
                for x0 in ([np.log(nu), 0.0], [np.log(nu), 1.0], [0.0, 0.5])),
               key=lambda r: r.fun)
    x = np.clip(best.x, [-5.0, -5.0], [12.0, 8.0])
    m0, beta = p + 1 + float(np.exp(x[0])), float(np.exp(x[1]) - 1)
    return m0, np.eye(p) + beta * np.outer(u, u)


def _eb_one(cell, row, cs, run_params, n_draws=1000):
    """The curvature's correlations drawn from their posterior under an inverse-Wishart
    prior centred on the uncorrelated target, its strength by marginal likelihood."""
    from scipy.stats import invwishart

    from skdpvi.noise_aware import mean_field_curvature
    from skdpvi.noise_aware.linear_response import _window_factor

    theta, X, est, info, out, result, K_hat, Q, x_bar, g_bar, shift = _default_release(
        cell, row, run_params, n_draws)
    p, n, kappa = len(theta), result.stats.count, result.sampling_rate
    steps = np.asarray(result.learning_rate, float)[:p]
    D = mean_field_curvature(result.stats, p, kappa)
    relax = n * steps * D
    target = _window_factor(np.maximum(relax, 1e-2)) * steps * Q / (2 * D)
    w = 1 / np.sqrt(target)
    W = result.stats.wander_covariance()[:p, :p] * np.outer(w, w)
    rng = np.random.default_rng(row["seed"])
    root_D = np.sqrt(D)
    lam, V = np.linalg.eigh(K_hat)
    root_hat = (V * np.sqrt(lam)) @ V.T

    def curvature(Sigma):  # unit-diagonal correlation of Sigma^-1, scaled by D
        P = np.linalg.inv(Sigma)
        d = np.sqrt(np.einsum("...ii->...i", P))
        return P / d[..., :, None] / d[..., None, :] * root_D[:, None] * root_D[None, :]

    def scored_components(K_m):
        K_m_inv = np.linalg.inv(K_m)
        mean, cov = _optima(K_m_inv, x_bar, g_bar, Q, n)
        means = mean + shift + np.einsum("mij,mj->mi", _roots(cov),
                                         rng.standard_normal((len(K_m), p)))
        L = _roots(kappa * 0.5 * (K_m_inv + K_m_inv.transpose(0, 2, 1)))
        return means + np.einsum("mij,mj->mi", L, rng.standard_normal((len(K_m), p)))

    for c in cs:
        nu = max(c * float(np.median(relax)), p + 2.0)
        m0 = _eb_prior_dof(W, nu)
        scale = (m0 - p - 1) * np.eye(p) + nu * W
        post_mean = scale / (m0 + nu - p - 1)
        K_point = np.broadcast_to(curvature(post_mean), (n_draws, p, p))
        out[f"eb_point{c:g}"] = scored_components(np.array(K_point))
        Sigmas = invwishart.rvs(df=m0 + nu, scale=scale, size=n_draws, random_state=rng)
        out[f"eb{c:g}"] = scored_components(curvature(np.asarray(Sigmas).reshape(n_draws, p, p)))
        # the package's curvature perturbed as in ``wishart``, with the posterior's
        # degrees of freedom m0 + nu (a reading the prior explains spreads less)
        dof = int(np.ceil(min(m0 + nu, 2000.0)))  # beyond: no spread worth drawing
        G = rng.standard_normal((n_draws, dof, p))
        K_m = root_hat @ (np.einsum("mki,mkj->mij", G, G) / dof) @ root_hat
        rescale = np.sqrt(np.diag(K_hat) / np.einsum("mii->mi", K_m))
        out[f"ebw{c:g}"] = scored_components(K_m * rescale[:, :, None] * rescale[:, None, :])
        out[f"_m0_over_nu{c:g}"] = m0 / nu
        # the prior's mean with the coupling along the means' own direction (whitened)
        u = w * x_bar
        u = u / np.linalg.norm(u)
        m0_r, T = _eb_structured(W, nu, u)
        scale_r = (m0_r - p - 1) * T + nu * W
        out[f"ebr_point{c:g}"] = scored_components(np.array(np.broadcast_to(
            curvature(scale_r / (m0_r + nu - p - 1)), (n_draws, p, p))))
        Sigmas = invwishart.rvs(df=m0_r + nu, scale=scale_r, size=n_draws, random_state=rng)
        out[f"ebr{c:g}"] = scored_components(curvature(np.asarray(Sigmas).reshape(n_draws, p, p)))
        out[f"_ebr_m0_over_nu{c:g}"] = m0_r / nu
        out[f"_ebr_beta{c:g}"] = float(T[0, 0] - 1) / u[0] ** 2 if u[0] else 0.0
    return theta, out


def scored(args, one):
    payload = {"machine": machine(), "c": args.c, "cells": {}}
    for cell in args.cells:
        key = rc._tagged(cell, args.tag)
        rows = rc.load(args.cache, key)[:args.max_sim]
        fits = Parallel(n_jobs=args.n_jobs)(delayed(one)(cell, r, args.c, args.run_params)
                                            for r in rows)
        theta = np.array([t for t, _ in fits])
        refs = rc.prior_scale(cell) * np.random.default_rng(12345).standard_normal(theta.shape)
        payload["cells"][key] = {}
        for name in [k for k in fits[0][1] if k.startswith("_")]:
            values = np.array([o[name] for _, o in fits])
            payload["cells"][key][name] = np.quantile(values, [0.1, 0.5, 0.9]).tolist()
            print(f"{key:<12} {name} quantiles 10/50/90 %:",
                  " ".join(f"{v:.2f}" for v in payload["cells"][key][name]))
        for name in [k for k in fits[0][1] if not k.startswith("_")]:
            row = rc.score(np.array([o[name] for _, o in fits]), theta, refs)
            payload["cells"][key][name] = row
            print(f"{key:<12} {name:<10} TARP {row['tarp_posterior']:.3f} / "
                  f"{row['tarp_prior']:.3f} (+- {row['tarp_prior_se']:.3f}), coverage "
                  f"{row['coverage_90'][0]:.2f}-{row['coverage_90'][1]:.2f}, z sd "
                  f"{row['z_sd'][0]:.2f}-{row['z_sd'][1]:.2f}, ellipsoids "
                  f"{row['ellipsoid_90']:.2f}, radial z {row['radial_z'][0]:+.2f} "
                  f"({row['radial_z'][1]:.2f})", flush=True)
        save(f"{args.save}_{args.command}" + (f"_{args.tag}" if args.tag else ""), payload)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["check", "wishart", "debias", "nonlinear", "eb", "ebpkg"])
    parser.add_argument("cells", nargs="+", choices=list(rc.CELLS))
    parser.add_argument("--c", type=float, nargs="+", default=[1.0, 2.0, 4.0],
                        help="degrees of freedom per median relaxation (wishart, debias)")
    parser.add_argument("--max-sim", type=int, default=None)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--cache", default="/tmp/release_cache")
    parser.add_argument("--save", default="ablation_logistic_curvature_noise")
    parser.add_argument("--set", nargs="+", default=[], metavar="PARAM=VALUE",
                        help="the --set of the cached runs (release_cache.py run); needs --tag")
    parser.add_argument("--tag", default=None, help="the cached runs' tag (cell@tag)")
    args = parser.parse_args()
    args.run_params = {k: rc._value(v) for k, v in (item.split("=", 1) for item in args.set)}
    if args.command == "check":
        check(args)
    else:
        scored(args, {"wishart": _wishart_one, "debias": _debias_one,
                      "nonlinear": _nonlinear_one, "eb": _eb_one,
                      "ebpkg": _ebpkg_one}[args.command])


if __name__ == "__main__":
    main()
