"""The window's mean-field scales against the exact mean-field optimum (twenty-ninth session).

For each cached release of a cell (``release_cache.py run``), the *non-private* exact
mean-field optimum of the same data under the same prior (Gauss-Hermite expectations
of the ELBO, L-BFGS) beside what the release says about it: the scales
``softplus(rho_bar)`` at the window's mean rho (the reading before the twenty-ninth
session), the scales whose averaged stationarity condition holds over the window's
wander of rho (``mean_field_curvature``'s default, ``H_jj = E[s' / s] / E[s s']``),
and the sd of rho over the window. Then, per simulation, the default posterior's
optimum against the exact optimum, in its stated error (chi^2 / p, 1 calibrated),
and the same with the true curvature ``kappa (X' W X + I / tau^2)`` at the Laplace MAP
in its formulas (the linear model of the release with its curvature known); and the
posterior's curvature along the MAP's own direction u (intercept 0) over the true one,
the same along 20 random directions orthogonal to u (median), and the true relaxation
counts in the window along both.

Results: doc/results.rst, "The scales' wander".
Run: python benchmarks/ablation_logistic/scale_wander.py gauss --max-sim 60
"""

import argparse
import os
import sys
import warnings

import numpy as np
from joblib import Parallel, delayed
from scipy.optimize import minimize

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import release_cache as rc  # noqa: E402
from _common import machine, save  # noqa: E402
from laplace_yardstick import laplace  # noqa: E402

NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(30)
WEIGHTS = WEIGHTS / WEIGHTS.sum()


def mean_field_optimum(X, y, prior_sd, start):
    """The exact optimum (means, scales) of the mean-field ELBO of logistic regression
    with an intercept (last), prior N(0, prior_sd^2) on every parameter."""
    A = np.c_[X, np.ones(len(X))]
    A2, p = A * A, A.shape[1]

    def negative_elbo(par):
        m, log_s = par[:p], par[p:]
        s = np.exp(log_s)
        z = (A @ m)[:, None] + np.sqrt(A2 @ (s * s))[:, None] * NODES
        sig = 1 / (1 + np.exp(-z))
        value = ((y[:, None] * z - np.logaddexp(0, z)) @ WEIGHTS).sum()
        value += -0.5 * (m @ m + s @ s) / prior_sd**2 + log_s.sum()
        grad_m = A.T @ ((y[:, None] - sig) @ WEIGHTS) - m / prior_sd**2
        grad_s = (A2.T @ (-(sig * (1 - sig)) @ WEIGHTS)) * s * s - s * s / prior_sd**2 + 1.0
        return -value, -np.r_[grad_m, grad_s]

    res = minimize(negative_elbo, np.r_[start, np.full(p, -3.0)], jac=True,
                   method="L-BFGS-B", options=dict(maxiter=3000, gtol=1e-9))
    return res.x[:p], np.exp(res.x[p:])


def one(cell, row):
    warnings.simplefilter("ignore")
    from skdpvi.noise_aware import mean_field_curvature
    from skdpvi.noise_aware.coupling import _optimum_of_means

    dense = rc._dense()
    original = dense.linear_response_posterior
    captured = {}

    def posterior(stats, **kw):
        components, info = original(stats, **kw)
        captured.update(info, stats=stats)
        return components, info

    with rc._patched((dense, "linear_response_posterior", posterior)):
        _, model, _ = rc._posterior(cell, row, {}, {}, n_draws=10)
    theta, X, y = rc.simulate(rc._rule_cell(cell), row["seed"])
    tau = rc.prior_scale(cell)
    w_map, laplace_cov = laplace(X, y, tau)
    m_vi, s_vi = mean_field_optimum(X, y, tau, w_map)
    result = row["result"]
    stats, p, n = result.stats, len(w_map), result.stats.count
    kappa = result.sampling_rate
    rho = stats.shift[p:2 * p] + stats.sum_x[p:2 * p] / n
    rho_sd = np.sqrt(np.maximum(stats.sum_xx[p:2 * p] / n - (stats.sum_x[p:2 * p] / n) ** 2, 0))
    out = {"model": str(model), "plain": np.logaddexp(0.0, rho) / s_vi,
           "corrected": np.sqrt(kappa / mean_field_curvature(stats, p, kappa)) / s_vi,
           "rho_sd": rho_sd}
    if "covariance" in captured:  # a dense model: its optimum against the exact one
        noise_var = np.asarray(result.noise_std[:p]) ** 2
        true_K = kappa * np.linalg.inv(laplace_cov)
        for key, K in (("stated", captured["curvature"]), ("true_curvature", true_K)):
            # the optimum's posterior as the estimator forms it (the gradient model's
            # N(x_bar, I) prior included), with this curvature
            estimate, error = _optimum_of_means(stats, np.linalg.inv(K), noise_var, 1.0)
            d = estimate - m_vi
            out[key] = float(d @ np.linalg.solve(error, d) / p)
        out["diagonal_over_true"] = np.diag(captured["curvature"]) / np.diag(true_K)
        out["components_over_laplace"] = (np.diag(captured["component_covariance"])
                                          / np.diag(laplace_cov))
        # the two halves' optima (the same curvature) differ by twice the full window's
        # stated error if the model's noise is all there is: chi^2 / p of their
        # half-difference against the stated error
        halves = [_optimum_of_means(h, np.linalg.inv(captured["curvature"]), noise_var, 1.0)[0]
                  for h in stats.halves]
        d = 0.5 * (halves[0] - halves[1])
        error = captured["covariance"]
        out["halves"] = float(d @ np.linalg.solve(error, d) / p)
        K_hat, steps = captured["curvature"], np.asarray(result.learning_rate[:p])
        u = np.r_[w_map[:-1], 0.0]
        u /= np.linalg.norm(u)
        V = np.random.default_rng(0).standard_normal((p, 20))
        V[-1] = 0.0
        V -= np.outer(u, u @ V)
        V /= np.linalg.norm(V, axis=0)

        def form(K, v):
            return np.einsum("ik,ij,jk->k", v, K, v)

        out["radial_over_true"] = float(u @ K_hat @ u / (u @ true_K @ u))
        out["orthogonal_over_true"] = float(np.median(form(K_hat, V) / form(true_K, V)))
        out["relaxations_radial"] = float(n * (u * steps) @ true_K @ u)
        out["relaxations_orthogonal"] = float(np.median(n * form(true_K * steps[:, None], V)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", choices=list(rc.CELLS))
    parser.add_argument("--max-sim", type=int, default=60)
    parser.add_argument("--cache", default="/tmp/release_cache")
    parser.add_argument("--save", default="ablation_logistic_scale_wander_diagnosis")
    args = parser.parse_args()
    payload = {"machine": machine(), "cells": {}}
    for cell in args.cells:
        rows = rc.load(args.cache, cell)[:args.max_sim]
        fits = Parallel(n_jobs=2)(delayed(one)(cell, r) for r in rows)
        median = {k: np.median([f[k] for f in fits], 0).tolist()
                  for k in ("plain", "corrected", "rho_sd")}
        entry = {"n_sim": len(fits), "scales_over_exact_plain": median["plain"],
                 "scales_over_exact_corrected": median["corrected"],
                 "rho_sd_in_window": median["rho_sd"], "by_model": {}}
        for m in sorted({f["model"] for f in fits}):
            F = [f for f in fits if f["model"] == m and "stated" in f]
            if not F:
                continue
            entry["by_model"][m] = {
                "n": len(F), "chi2_per_p_stated": float(np.mean([f["stated"] for f in F])),
                "chi2_per_p_true_curvature": float(np.mean([f["true_curvature"] for f in F])),
                "chi2_per_p_halves": float(np.mean([f["halves"] for f in F])),
                "components_over_laplace": np.median([f["components_over_laplace"] for f in F],
                                                     0).tolist(),
                "diagonal_over_true": np.median([f["diagonal_over_true"] for f in F], 0).tolist(),
                **{k: float(np.median([f[k] for f in F])) for k in (
                    "radial_over_true", "orthogonal_over_true", "relaxations_radial",
                    "relaxations_orthogonal")}}
        payload["cells"][cell] = entry
        fmt = np.array2string(np.array(median["plain"]), precision=2)
        print(f"{cell}: scales / exact, plain {fmt}")
        fmt = np.array2string(np.array(median["corrected"]), precision=2)
        print(f"{cell}: scales / exact, corrected {fmt}")
        print(f"{cell}: sd of rho in the window {np.array2string(np.array(median['rho_sd']), precision=2)}")
        for m, e in entry["by_model"].items():
            comp = np.array2string(np.array(e["components_over_laplace"]), precision=2)
            print(f"  {m} ({e['n']}): optimum chi2/p {e['chi2_per_p_stated']:.2f} stated, "
                  f"{e['chi2_per_p_true_curvature']:.2f} with the true curvature, halves "
                  f"{e['chi2_per_p_halves']:.2f}; components / Laplace {comp}; diagonal / "
                  f"true {np.array2string(np.array(e['diagonal_over_true']), precision=2)}; "
                  f"curvature / true along u {e['radial_over_true']:.2f}, orthogonal "
                  f"{e['orthogonal_over_true']:.2f}; true relaxations along u "
                  f"{e['relaxations_radial']:.1f}, orthogonal {e['relaxations_orthogonal']:.1f}",
                  flush=True)
    save(args.save, payload)


if __name__ == "__main__":
    main()
