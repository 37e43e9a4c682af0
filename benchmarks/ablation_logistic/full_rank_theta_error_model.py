"""Probe: the DP error's dependence on theta without the oracle, from a Gaussian design.

``full_rank_theta_error_oracle.py`` computes the curvature ``H(t)`` away from the
release's point from the private rows. This probe asks whether a model can stand in
for them: rows ``x = (z, 1)`` with ``z ~ N(mu, Sigma)`` have the expected logistic
curvature ``n E[sigmoid'(x t) x x^T]``, a function of ``(mu, Sigma)`` and t through
three one-dimensional integrals (the moments of z given the logit, Stein's lemma);
``(mu, Sigma)`` are solved so that the model reproduces the release's curvature at
its estimate ``c`` (``fit_design``: exactly determined but for one equation, solved by
least squares over the logit's mean and sd). Then the posterior of the oracle probe
with the model's ``H(t)`` in place of the data's, by importance resampling. Modes:

- ``gauss``: the model's ``H(t)``;
- ``gauss_anchor``: the same mapped so that it equals the release's curvature at c
  (``R H_model(t) R^T``, ``R = H_lik^1/2 H_model(c)^-1/2``);
- ``fixed``: ``H(t) = H(c)`` everywhere (the prior applied once, by sampling);
- ``oracle``: the data's ``H(t)`` (as the oracle probe).

Post-processing of cached releases (the model reads only the release and the number
of rows); scored as ``full_rank.py`` scores, beside the default on the same fits.

Run::

    python benchmarks/ablation_logistic/full_rank.py toep06d6e05 --n-sim 200 \\
        --variants shrunk_radial --cache /tmp/fits
    python benchmarks/ablation_logistic/full_rank_theta_error_model.py toep06d6e05 /tmp/fits
"""

import argparse
import glob
import os
import sys
import warnings

import numpy as np
from joblib import Parallel, delayed
from scipy.optimize import least_squares

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import full_rank as fr  # noqa: E402
from _common import machine, save  # noqa: E402
from full_rank_centre_probe import load_fit  # noqa: E402
from full_rank_theta_error_oracle import release_estimate  # noqa: E402
from release_cache import describe, prior_scale, score  # noqa: E402

_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(48)
_GH_W = _GH_W / _GH_W.sum()
_GRID = np.linspace(-1.0, 1.0, 801)


def _f_moments(m, s):
    """``E[sigmoid'(eta) (eta - m)^k]``, k = 0, 1, 2, for eta ~ N(m, s^2) (1-D arrays):
    Gauss-Hermite where s is small, a uniform grid in eta over sigmoid''s support
    where it is wide (Gauss-Hermite's nodes would step over it)."""
    m, s = np.atleast_1d(m).astype(float), np.atleast_1d(s).astype(float)
    out = np.empty((3, len(m)))
    narrow = s < 0.5
    if narrow.any():
        r = s[narrow, None] * _GH_X
        p = 1 / (1 + np.exp(-(m[narrow, None] + r)))
        F = p * (1 - p) * _GH_W
        out[:, narrow] = [F.sum(1), (F * r).sum(1), (F * r * r).sum(1)]
    if (~narrow).any():
        mw, sw = m[~narrow, None], s[~narrow, None]
        lo, hi = np.maximum(mw - 9 * sw, -40.0), np.minimum(mw + 9 * sw, 40.0)
        hi = np.maximum(hi, lo + 1e-6)
        eta = (lo + hi) / 2 + (hi - lo) / 2 * _GRID
        r = eta - mw
        dens = np.exp(-0.5 * (r / sw) ** 2) / (np.sqrt(2 * np.pi) * sw) \
            * (hi - lo) / (len(_GRID) - 1)
        p = 1 / (1 + np.exp(-eta))
        F = p * (1 - p) * dens
        out[:, ~narrow] = [F.sum(1), (F * r).sum(1), (F * r * r).sum(1)]
    return out


def model_hessian(t, mu, Sigma, n):
    """``n E[sigmoid'(x t) x x^T]`` for ``x = (z, 1)``, ``z ~ N(mu, Sigma)``, at each row
    of t, through the moments of z given the logit (positive semi-definite)."""
    t = np.atleast_2d(t)
    w, b = t[:, :-1], t[:, -1]
    u = w @ Sigma
    s2 = np.maximum(np.einsum("kd,kd->k", u, w), 1e-12)
    S0, S1, S2 = _f_moments(w @ mu + b, np.sqrt(s2))
    uu = u[:, :, None] * u[:, None, :]
    mu_u = mu[None, :, None] * u[:, None, :]
    out = np.empty((len(t), len(mu) + 1, len(mu) + 1))
    out[:, :-1, :-1] = (S0[:, None, None] * (Sigma - uu / s2[:, None, None] + np.outer(mu, mu))
                        + (S1 / s2)[:, None, None] * (mu_u + np.swapaxes(mu_u, 1, 2))
                        + (S2 / s2**2)[:, None, None] * uu)
    out[:, :-1, -1] = out[:, -1, :-1] = S0[:, None] * mu + (S1 / s2)[:, None] * u
    out[:, -1, -1] = S0
    return n * out


def fit_design(H_lik, t, n):
    """``(mu, Sigma)`` whose model curvature at t is ``H_lik`` (intercept last)."""
    w, b = t[:-1], t[-1]
    A = H_lik / n
    h, g, M = A[-1, -1], A[:-1, -1], A[:-1, :-1]
    Mc = M - np.outer(g, g) / h          # = a0 Sigma + beta u u^T, u = Sigma w
    q, gw = w @ Mc @ w, g @ w

    def parts(x):
        m, s = x[0], np.exp(x[1])
        S0, S1, S2 = (v[0] for v in _f_moments(m, s))
        a0, a1, a2 = S0, S1 / s**2, (S2 - s**2 * S0) / s**4   # E f, E f', E f''
        return m, s, a0, a1, a2 - a1**2 / a0

    def residuals(x):
        m, s, a0, a1, beta = parts(x)
        return [(a0 - h) / h, (s**2 * (a0 + beta * s**2) - q) / max(q, 1e-12),
                m - b - (gw - a1 * s**2) / a0]

    s0 = np.sqrt(max(q / h, 1e-6))
    best = min((least_squares(residuals, [m0, np.log(s0 * f)])
                for m0 in (b, b + gw / h, 0.0) for f in (0.5, 1.0, 2.0)),
               key=lambda r: r.cost)
    m, s, a0, a1, beta = parts(best.x)
    u = Mc @ w / (a0 + beta * s**2)
    lam, V = np.linalg.eigh((Mc - beta * np.outer(u, u)) / a0)
    return (g - a1 * u) / a0, (V * np.clip(lam, 0, None)) @ V.T


def _psd(A):
    lam, V = np.linalg.eigh(0.5 * (A + np.swapaxes(A, -1, -2)))
    return (V * np.clip(lam, 0, None)[..., None, :]) @ np.swapaxes(V, -1, -2)


def _sqrt(A, power):
    lam, V = np.linalg.eigh(0.5 * (A + A.T))
    return (V * np.clip(lam, 1e-12, None) ** power) @ V.T


def _log_normal(x, mean, cov):
    L = np.linalg.cholesky(cov)
    z = np.linalg.solve(L, (x - mean)[..., None])[..., 0]
    return -0.5 * np.sum(z * z, -1) - np.sum(np.log(np.diagonal(L, axis1=-2, axis2=-1)), -1)


def one(cell, path, n_proposals, modes):
    warnings.simplefilter("ignore")
    seed, est, theta, rows, _ = load_fit(cell, path, exact=False)
    tau = prior_scale(cell)
    release = est.dpvi_result_
    n, kappa = release.n_params, release.sampling_rate
    noise_var = float(release.noise_std[0]) ** 2
    H, H_inv, c = release_estimate(release, tau)
    eye = np.eye(n)
    H_lik_c = _psd(H - eye / tau**2)
    rng = np.random.default_rng(seed)
    proposal_cov = 2.25 * (H_inv + noise_var / kappa**2 * H_inv @ H_inv / release.count)
    proposals = rng.multivariate_normal(c, proposal_cov, size=n_proposals)
    log_q = _log_normal(proposals, c, proposal_cov)
    draws = {"default": fr._draws(est, fr.CORRECTIONS["shrunk_radial"])}
    ess = {}
    for mode in modes:
        if mode == "oracle":
            P = 1 / (1 + np.exp(-proposals @ rows.T))
            H_lik = np.einsum("ki,ia,ib->kab", P * (1 - P), rows, rows)
        elif mode == "fixed":
            H_lik = np.broadcast_to(H_lik_c, (n_proposals, n, n))
        else:
            mu, Sigma = fit_design(H_lik_c, c, len(rows))
            H_lik = model_hessian(proposals, mu, Sigma, len(rows))
            if mode == "gauss_anchor":
                R = _sqrt(H_lik_c + 1e-9 * eye, 0.5) @ _sqrt(
                    model_hessian(c, mu, Sigma, len(rows))[0], -0.5)
                H_lik = R @ H_lik @ R.T
        H_lik = _psd(H_lik)
        Ht_inv = np.linalg.inv(H_lik + eye / tau**2)
        mode_t = proposals - np.einsum("kab,kb->ka", Ht_inv, proposals) / tau**2
        cov = Ht_inv @ H_lik @ Ht_inv + noise_var / kappa**2 * Ht_inv @ Ht_inv / release.count
        log_w = (_log_normal(c, mode_t, 0.5 * (cov + np.swapaxes(cov, 1, 2)))
                 - 0.5 * np.sum(proposals**2, 1) / tau**2 - log_q)
        w = np.exp(log_w - log_w.max())
        w /= w.sum()
        draws[mode] = proposals[rng.choice(n_proposals, size=1000, p=w)]
        ess[mode] = float(1 / np.sum(w**2))
    return theta, draws, ess


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell")
    parser.add_argument("cache")
    parser.add_argument("--modes", nargs="+", default=["gauss", "gauss_anchor"],
                        choices=["gauss", "gauss_anchor", "fixed", "oracle"])
    parser.add_argument("--proposals", type=int, default=4000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--save", default="ablation_logistic_full_rank_theta_error_model")
    args = parser.parse_args()
    paths = sorted(glob.glob(os.path.join(args.cache, f"{args.cell}_*.pkl")))
    out = Parallel(n_jobs=args.n_jobs)(delayed(one)(args.cell, p, args.proposals, args.modes)
                                       for p in paths)
    thetas = np.array([o[0] for o in out])
    refs = prior_scale(args.cell) * np.random.default_rng(12345).standard_normal(thetas.shape)
    rows = {}
    for label in ["default"] + args.modes:
        rows[label] = score(np.array([o[1][label] for o in out]), thetas, refs)
        if label != "default":
            ess = [o[2][label] for o in out]
            rows[label]["effective_sample_size"] = [float(np.median(ess)), float(np.min(ess))]
        print(f"{args.cell} {label:<13} {describe(rows[label])}", flush=True)
    save(f"{args.save}_{args.cell}", {"machine": machine(), "args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
