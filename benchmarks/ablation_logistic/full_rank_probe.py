"""Probe: a full-rank Gaussian variational family for the logistic model (issue 14).

The mean-field engine releases the curvature's diagonal through the scales' gradients
(a first moment, read to about 25 %), and its correlations only through the wander's
covariance (a second moment, read with a Marchenko-Pastur spread of 2-5 on the
correlated designs: results page, "A second set of hold-outs"). A full-rank family
``q = N(m, L L^T)`` with ``L = diag(softplus(rho)) (I + U)``, U strictly lower
triangular, releases the correlations through the gradients of U as well: at the
optimum ``(L L^T)^-1 = E_q[H]``, the curvature the posterior needs. The U coordinates
are dimensionless (curvature ~1 in the ELBO, like rho's ~2), so they take the scales'
preconditioner and step.

This is a stand-alone torch loop of the same DP-SGD (Poisson subsample, per-example
gradients of the negative ELBO with centred Monte Carlo draws shared by the batch,
clip, Gaussian noise, step), with the *default estimator's* settings for the cell
(noise multiplier with the clipping histogram composed in, its private clipping norm,
learning rate, preconditioner, burn-in), so the privacy is the default's. The
posterior: ``N(m*, K^-1 Q K^-1 / n + L L^T)`` with ``K = kappa (L L^T)^-1`` read off
the window's means of (m, rho, U) and ``m* = m_bar - K^-1 g_bar``.

Scored exactly as ``release_cache.py evaluate`` scores a variant (same simulations,
seeds and prior references), so its figures sit beside the default's on the cached
releases of the same cell.

Run: python benchmarks/ablation_logistic/full_rank_probe.py corrb --n-sim 200
"""

import argparse
import os
import pickle
import sys
import time

import numpy as np
import torch
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import machine, rmse_floor, save  # noqa: E402
from skdpvi.noise_aware import onehot_flat_directions  # noqa: E402
from release_cache import BLOCKS, CELLS, _rule_cell, describe, estimator, prior_scale, score, simulate  # noqa: E402


def engine_settings(cell, X, y, seed):
    est = estimator(cell).set_params(random_state=seed)
    X_checked, _ = est._fit_inputs(X, y)
    seeds = est._fit_seeds()
    return est._engine_settings(X.shape[0], X.shape[1], X_checked, seeds.engine).engine


def full_rank_dpvi(X, y, engine, tau, seed, u_preconditioning=1.0, scale_noise=1.0):
    """DP-SGD on the full-rank ELBO; returns the window's means and diagnostics."""
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(int(seed))
    rng = np.random.default_rng(seed)
    N = X.shape[0]
    Xa = torch.as_tensor(np.c_[X, np.ones(N)], dtype=torch.float64)
    yt = torch.as_tensor(y, dtype=torch.float64)
    n = Xa.shape[1]
    J, Kk = np.tril_indices(n, -1)
    J, Kk = torch.as_tensor(J), torch.as_tensor(Kk)
    sigma, C = engine["noise_multiplier"], engine["clip_norm"]
    q, T, S = engine["sampling_rate"], engine["n_steps"], engine["n_mc_samples"]
    burn = engine["burn_in"]
    lam, beta_r = engine["learning_rate"], float(engine["preconditioner"])
    # scale_noise < 1: the scales' and U's preconditioners 1 / scale_noise times larger
    # and their steps unchanged (their noise scale_noise times smaller, their per-example
    # rows larger inside the clip)
    beta_u = beta_r * u_preconditioning / scale_noise
    step_u = lam * beta_r * u_preconditioning
    step_r = lam * beta_r
    beta_r = beta_r / scale_noise
    block_sq = torch.zeros(3, dtype=torch.float64)
    window_rows = 0
    m = torch.zeros(n, dtype=torch.float64)
    rho = torch.full((n,), float(np.log(np.expm1(0.01))), dtype=torch.float64)
    U = torch.zeros(len(J), dtype=torch.float64)
    sums = {"m": torch.zeros(n, dtype=torch.float64), "rho": torch.zeros(n, dtype=torch.float64),
            "U": torch.zeros(len(J), dtype=torch.float64), "g": torch.zeros(n, dtype=torch.float64),
            "M1": torch.zeros(n, n, n, dtype=torch.float64),
            "M2": torch.zeros(n, dtype=torch.float64)}
    lower = torch.tril(torch.ones(n, n, dtype=torch.float64), -1)
    clipped, count = 0, 0
    for t in range(T):
        idx = torch.as_tensor(np.flatnonzero(rng.random(N) < q))
        Xb, yb = Xa[idx], yt[idx]
        eps = torch.randn(S, n, generator=g, dtype=torch.float64)
        eps = eps - eps.mean(0)
        s = torch.nn.functional.softplus(rho)
        A = torch.eye(n, dtype=torch.float64)
        A[J, Kk] = U
        L = s[:, None] * A
        theta = m + eps @ L.T                        # (S, n)
        w = torch.sigmoid(Xb @ theta.T) - yb[:, None]  # (B, S): d(-log lik)/dz
        reg_theta = theta / (tau**2 * N)             # (S, n): (1/N) d(-log prior)/dtheta
        mean_rows = Xb * w.mean(1, keepdim=True) + reg_theta.mean(0)
        V = w @ eps / S                              # (B, n)
        R = reg_theta.T @ eps / S                    # (n, n)
        dsig = torch.sigmoid(rho)
        rho_rows = dsig * (Xb * (V @ A.T) + (R * A).sum(1) - 1.0 / (N * s))
        u_rows = s[J] * (Xb[:, J] * V[:, Kk] + R[J, Kk])
        sq = (mean_rows**2).sum(1) + beta_r**2 * (rho_rows**2).sum(1) \
            + beta_u**2 * (u_rows**2).sum(1)
        f = torch.clamp(C / torch.sqrt(sq), max=1.0)
        clipped += int((f < 1).sum())
        if t >= burn:
            block_sq += torch.stack([(mean_rows**2).sum(), beta_r**2 * (rho_rows**2).sum(),
                                     beta_u**2 * (u_rows**2).sum()])
            window_rows += len(idx)
        count += len(idx)
        noise = sigma * C * torch.randn(2 * n + len(J), generator=g, dtype=torch.float64)
        g_m = f @ mean_rows + noise[:n]
        g_r = (beta_r * (f @ rho_rows) + noise[n:2 * n]) / beta_r
        g_u = (beta_u * (f @ u_rows) + noise[2 * n:]) / beta_u
        if t >= burn:
            sums["m"] += m
            sums["rho"] += rho
            sums["U"] += U
            sums["g"] += g_m
            # the stationarity of the average released gradient in L (text of
            # stationary_curvature): weights of each entry's gradient, times L
            sums["M1"] += (lower * s[:, None])[:, :, None] * L.T[None, :, :]
            diag = torch.arange(n)
            sums["M1"][diag, diag, :] += dsig[:, None] * (L @ A.T).T
            sums["M2"] += dsig / s
        m = m - lam * g_m
        rho = rho - step_r * g_r
        U = U - step_u * g_u
    n_window = T - burn
    out = {k: (v / n_window).numpy() for k, v in sums.items()}
    out.update(step_m=lam, block_rms=(block_sq / max(window_rows, 1)).sqrt().numpy() / C, n_window=n_window, clipped=clipped / max(count, 1), noise_std=sigma * C,
               kappa=q, J=J.numpy(), K=Kk.numpy())
    return out


def stationary_curvature(run):
    """H solving the window-averaged stationarity of the released gradient in L.

    For a quadratic negative ELBO ``1/2 tr(H L L^T) - log|L|`` the gradient in L is
    ``G = H L - L^-T``; U_jk (k < j) releases ``s_j G_jk`` and rho_j releases
    ``sigmoid(rho_j) sum_k G_jk A_jk`` (A = I + U), and constant-step SGD settles where
    their window averages vanish: ``sum_l H_jl E[s_j L_lk] = 0`` and
    ``sum_l H_jl E[sigmoid(rho_j) (L A^T)_lj] = E[sigmoid(rho_j) / s_j]``, n (n + 1) / 2
    linear equations in the symmetric H. Reading ``L_bar L_bar^T`` instead ignores the wander of U, which
    makes the diagonal 1.4-1.9 times too stiff at epsilon 1.
    """
    n = len(run["m"])
    M1, M2 = run["M1"], run["M2"]
    pairs = [(j, k) for j in range(n) for k in range(j + 1)]
    index = {pair: i for i, pair in enumerate(pairs)}
    A = np.zeros((len(pairs), len(pairs)))
    b = np.zeros(len(pairs))
    for row, (j, k) in enumerate(pairs):
        for l in range(n):
            A[row, index[(max(j, l), min(j, l))]] += M1[j, k, l]
        b[row] = M2[j] if j == k else 0.0
    h = np.linalg.solve(A, b)
    H = np.zeros((n, n))
    for (j, k), v in zip(pairs, h):
        H[j, k] = H[k, j] = v
    return H


def posterior_draws(run, n_draws, seed, prior_sd=1.0, flat=None, tau=1.0, reading="mean"):
    """The mixture posterior (one Gaussian here); ``flat`` (k, n): orthonormal
    directions the declared one-hot blocks leave flat, whose curvature is the prior's
    (the window does not relax along them)."""
    n = len(run["m"])
    s = np.logaddexp(0.0, run["rho"])
    A = np.eye(n)
    A[run["J"], run["K"]] = run["U"]
    L = s[:, None] * A
    Sigma = L @ L.T
    if reading == "stationary":
        lam, V = np.linalg.eigh(stationary_curvature(run))
        Sigma = (V / np.maximum(lam, 1e-3 / tau**2)) @ V.T
    if flat is not None and len(flat):
        P = np.eye(n) - flat.T @ flat
        H = P @ np.linalg.inv(Sigma) @ P + flat.T @ flat / tau**2
        Sigma = np.linalg.inv(H)
        Sigma = 0.5 * (Sigma + Sigma.T)
    K_inv = Sigma / run["kappa"]
    m_star = run["m"] - K_inv @ run["g"]
    err = run["noise_std"] ** 2 * K_inv @ K_inv / run["n_window"]
    # combined with the gradient model's prior N(m_bar, prior_sd^2 I), as the package does
    precision = np.linalg.inv(err) + np.eye(n) / prior_sd**2
    err = np.linalg.inv(precision)
    m_star = err @ (np.linalg.solve(run["noise_std"] ** 2 * K_inv @ K_inv / run["n_window"],
                                    m_star) + run["m"] / prior_sd**2)
    cov = err + Sigma
    rng = np.random.default_rng(seed)
    return rng.multivariate_normal(m_star, 0.5 * (cov + cov.T), size=n_draws), \
        {"clipped": run["clipped"], "error_share": float(np.trace(err) / np.trace(cov))}


READINGS = ("stationary", "mean")


def one(cell, seed, u_preconditioning, scale_noise):
    import warnings
    warnings.simplefilter("ignore")
    theta, X, y = simulate(_rule_cell(cell), seed)
    engine = engine_settings(cell, X, y, seed)
    run = full_rank_dpvi(X, y, engine, prior_scale(cell), seed, u_preconditioning, scale_noise)
    blocks = BLOCKS.get(cell)
    flat = None if not blocks else onehot_flat_directions(blocks, X.shape[1])
    out = {r: posterior_draws(run, 1000, seed, flat=flat, tau=prior_scale(cell), reading=r)
           for r in READINGS}
    return out, theta, run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", choices=list(CELLS))
    parser.add_argument("--n-sim", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=5000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--u-preconditioning", type=float, default=1.0,
                        help="U's step relative to the scales'")
    parser.add_argument("--scale-noise", type=float, default=0.25,
                        help="the scales' and U's preconditioner 1 / this times the "
                             "default's, their steps unchanged")
    parser.add_argument("--save", default="ablation_logistic_full_rank_probe")
    args = parser.parse_args()
    payload = {"machine": machine(), "args": vars(args), "cells": {}}
    for cell in args.cells:
        start = time.time()
        seeds = range(args.first_seed, args.first_seed + args.n_sim)
        fits = Parallel(n_jobs=args.n_jobs)(
            delayed(one)(cell, s, args.u_preconditioning, args.scale_noise) for s in seeds)
        with open(f"/tmp/full_rank_{cell}_sn{args.scale_noise}.pkl", "wb") as fh:
            pickle.dump(fits, fh)
        theta = np.array([f[1] for f in fits])
        K, p = theta.shape
        refs = prior_scale(cell) * np.random.default_rng(12345).standard_normal((K, p))
        for reading in READINGS:
            draws = np.array([f[0][reading][0] for f in fits])
            row = score(draws, theta, refs)
            row["clipped"] = float(np.mean([f[2]["clipped"] for f in fits]))
            row["error_share"] = float(np.median([f[0][reading][1]["error_share"] for f in fits]))
            row["floor"] = rmse_floor(K)
            row["seconds"] = time.time() - start
            payload["cells"].setdefault(cell, {})[reading] = row
            print(f"{cell:<10} {reading:<11} {describe(row)}, clipped {row['clipped']:.4f}, "
                  f"error share {row['error_share']:.2f}, {row['seconds']:.0f} s", flush=True)
        save(args.save, payload)


if __name__ == "__main__":
    main()
