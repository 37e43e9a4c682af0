"""Ablation prototype: the optimum's error read off segments of the recording window.

The dense error models state the error of the means' optimum as ``K^-1 Q K^-1 / n``
with K read off the wander; where K is read too stiff (in the noise bulk of the soft
directions) that error is understated twice over, which is where the logistic
posterior is jointly too narrow (results page, "Designs not seen before, and where
the joint gap sits"). The window's own segments measure it without inverting K: per
segment m of the recording window the extrapolated optimum ``x_m - K^-1 g_m`` (the
same formula on the segment's means), whose average over equal segments *is* the
model's optimum, and whose scatter over M segments estimates M times its error
covariance (batch means, the MCMC output-analysis estimate of a time average's
variance). The segments need to be about as long as the relaxation time for their
scatter to be that of independent estimates, so ``M = clip(n_relax / c, 2, M_max)``
with ``n_relax`` the window's median relaxation count; the scatter's few degrees of
freedom then update the model's error covariance as an inverse-Wishart prior with
``nu0`` degrees of freedom would: ``(nu0 E + (M - 1) V) / (nu0 + M - 1)``.

Segment sums need the trace (or the engine's recorder extended to keep them), so
this script reruns DP-SGD with ``record_trace=True`` on a ``release_cache.py`` cell's
simulations (the single-fit engine reproduces the cached lockstep releases for the
same seeds up to float rounding: the window's sums within 1.1e-4 on the first fits,
which the script prints) and post-processes each release with the
default and with the segment update. Not a package option.

Run: python benchmarks/ablation_logistic/segment_error.py toep06d6e05 --n-sim 200
"""

import argparse
import os
import sys
import warnings

import numpy as np
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import release_cache as rc  # noqa: E402
from curvature_noise import captured  # noqa: E402
from _common import machine, save  # noqa: E402

#: (name, nu0 in units of p, segments per relaxation divisor c, max segments)
VARIANTS = [("seg_nu1_c2", 1.0, 2.0, 40), ("seg_nu2_c2", 2.0, 2.0, 40),
            ("seg_nu1_c1", 1.0, 1.0, 40), ("seg_nu1_c4", 1.0, 4.0, 40),
            ("seg_nu05_c2", 0.5, 2.0, 40)]


def _segment_optima(trace_phi, trace_grad, burn_in, p, K_inv, n_segments):
    x, g = trace_phi[burn_in:-1, :p], trace_grad[burn_in:, :p]
    edges = np.linspace(0, len(g), n_segments + 1).astype(int)
    optima = [x[a:b].mean(0) - K_inv @ g[a:b].mean(0) for a, b in zip(edges[:-1], edges[1:])]
    return np.array(optima)


def one(cell, seed, n_draws=1000):
    from sklearn.base import clone

    from skdpvi.dpvi import run_dpvi

    warnings.simplefilter("ignore")
    import torch
    torch.set_num_threads(1)
    theta, X, y = rc.simulate(rc._rule_cell(cell), seed)
    est = clone(rc.estimator(cell)).set_params(random_state=seed)
    X_checked, y_checked = est._fit_inputs(X, y)
    seeds = est._fit_seeds()
    settings = est._engine_settings(X.shape[0], X.shape[1], X_checked, seeds.engine)
    engine = dict(settings.engine, record_trace=True)
    result = run_dpvi(data=(X_checked, y_checked), random_state=seeds.engine, **engine)
    with captured() as box:
        est._fit_from_result(result, settings, X.shape[0], seeds)
    out = {"seed": seed, "theta": theta, "model": est.error_model_,
           "sum_x": result.stats.sum_x, "draws": {}}
    out["draws"]["default"] = est.sample_posterior(n_draws, random_state=0)
    info = box.get("info")
    if info is None:  # not a dense model
        for name, *_ in VARIANTS:
            out["draws"][name] = out["draws"]["default"]
        return out
    p = len(info["curvature"])
    K_inv = np.linalg.inv(info["curvature"])
    E = info["covariance"]
    n_relax = float(np.median(info["relaxation_times"]))
    components = est.posterior_.components
    means0 = components.mean.copy()
    centre = means0.mean(0)
    out["n_relax"] = n_relax
    for name, nu0, c, m_max in VARIANTS:
        M = int(np.clip(np.floor(n_relax / c), 2, m_max))
        optima = _segment_optima(result.trace_phi, result.trace_grad, result.burn_in, p,
                                 K_inv, M)
        V = np.cov(optima.T) / M
        E_new = (nu0 * p * E + (M - 1) * V) / (nu0 * p + M - 1)
        A = np.linalg.cholesky(0.5 * (E_new + E_new.T) + 1e-12 * np.eye(p)) @ np.linalg.inv(
            np.linalg.cholesky(0.5 * (E + E.T) + 1e-12 * np.eye(p)))
        components.mean = centre + (means0 - centre) @ A.T
        out["draws"][name] = est.sample_posterior(n_draws, random_state=0)
        out.setdefault("segments", {})[name] = M
    components.mean = means0
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", choices=list(rc.CELLS))
    parser.add_argument("--n-sim", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=5000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--cache", default="/tmp/release_cache")
    parser.add_argument("--save", default="ablation_logistic_segment_error")
    args = parser.parse_args()
    payload = {"machine": machine(), "variants": [v[0] for v in VARIANTS], "cells": {}}
    for cell in args.cells:
        seeds = range(args.first_seed, args.first_seed + args.n_sim)
        fits = Parallel(n_jobs=args.n_jobs)(delayed(one)(cell, s) for s in seeds)
        try:  # the single-fit engine against the cached lockstep release
            cached = {r["seed"]: r for r in rc.load(args.cache, cell)}
            diffs = [np.max(np.abs(f["sum_x"] - cached[f["seed"]]["result"].stats.sum_x))
                     for f in fits[:5] if f["seed"] in cached]
            print(f"{cell}: max |sum_x - cached| over the first fits {max(diffs):.2e}")
        except Exception as error:  # noqa: BLE001 (a cell without a cache)
            print(f"{cell}: no cache check ({error})")
        theta = np.array([f["theta"] for f in fits])
        K, p = theta.shape
        refs = rc.prior_scale(cell) * np.random.default_rng(12345).standard_normal((K, p))
        models = [f["model"] for f in fits]
        payload["cells"][cell] = {"n_sim": K, "models": {m: models.count(m) for m in set(models)},
                                  "n_relax_median": float(np.median(
                                      [f.get("n_relax", np.nan) for f in fits])),
                                  "variants": {}}
        for name in ["default"] + [v[0] for v in VARIANTS]:
            draws = np.array([f["draws"][name] for f in fits])
            row = rc.score(draws, theta, refs)
            payload["cells"][cell]["variants"][name] = row
            print(f"{cell:<12} {name:<12} TARP {row['tarp_posterior']:.3f} / "
                  f"{row['tarp_prior']:.3f} (+- {row['tarp_prior_se']:.3f}), coverage "
                  f"{row['coverage_90'][0]:.2f}-{row['coverage_90'][1]:.2f}, z sd "
                  f"{row['z_sd'][0]:.2f}-{row['z_sd'][1]:.2f}, ellipsoids "
                  f"{row['ellipsoid_90']:.2f}, radial z {row['radial_z'][0]:+.2f} "
                  f"({row['radial_z'][1]:.2f})", flush=True)
        save(args.save, payload)


if __name__ == "__main__":
    main()
