"""Calibration per eigen-direction of the true posterior precision (results page, dense errors).

For K simulated data sets of a design, one DP-SGD run each (the estimator's settings,
as in ``designs.py``), the posterior draws of the chosen methods are projected on the
eigenvectors of the true precision ``H + I / tau^2`` (H = sum_i E_q[p_i (1 - p_i)]
x_i x_i^T at the trace mean, from the private data: a yardstick, not a method) and
the z-scores (posterior mean - truth) / posterior sd are summarised per direction,
from the least to the most curved. ``--variance-ratios`` prints instead, for six runs,
the variance along each of those directions implied by the window-corrected and by
the stationary curvature of the trace, relative to the truth. ``--random-walk``
prints quantiles of a random walk's sample variance over one window (in units of its
mean), which is what a direction without curvature shows.

Run: python benchmarks/ablation_logistic/directions.py --design correlated --k 40 \
         --methods emcee emcee+hess dense+oracle dense+wander emcee+dense
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import designs as D  # noqa: E402
from _common import _engine_settings  # noqa: E402
from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.dpvi import run_dpvi_batched  # noqa: E402
from skdpvi.noise_aware import wander_curvature, window_curvature  # noqa: E402


def _settings(model, n, epsilon):
    est = DPBayesianLogisticRegression()
    return _engine_settings(
        model, epsilon=epsilon, clip_norm=2 * math.sqrt(model.n_params), n_steps=10_000,
        sampling_rate=0.1, delta=1e-5, burn_in=0.2, preconditioner=None,
        learning_rate_scale=est._default_learning_rate_scale(2 * model.n_params), n_examples=n)


def _runs(design, seeds, epsilon):
    simulate, model, n = design
    torch.set_num_threads(1)
    sims = [simulate(np.random.default_rng(s)) for s in seeds]
    runs = run_dpvi_batched(model, [(X, y) for X, y, _ in sims], random_states=seeds,
                            **_settings(model, n, epsilon))
    return sims, runs


def _precision(result, model, X):
    H, _ = D.released_hessian(result, model, X, 0, None)
    return H + np.eye(model.n_params) / model.prior_scale**2


def _batch(design, seeds, epsilon, methods):
    _, model, n = design
    sims, runs = _runs(design, seeds, epsilon)
    return [({m: D.posterior_draws(r, model, n, m, X=X) for m in methods}, theta,
             _precision(r, model, X)) for (X, _, theta), r in zip(sims, runs)]


def variance_ratios(design, epsilon):
    _, model, _ = design
    p = model.n_params
    sims, runs = _runs(design, list(range(1000, 1006)), epsilon)
    for (X, _, _), r in zip(sims, runs):
        st = r.stats
        steps, noise = np.asarray(r.learning_rate)[:p], np.asarray(r.noise_std)[:p] ** 2
        S = st.wander_covariance()[:p, :p]
        K_true = r.sampling_rate * _precision(r, model, X)
        lam, U = np.linalg.eigh(K_true)
        K_window, _ = window_curvature(S, steps, noise, st.count, floor=r.sampling_rate)
        K_stat = wander_curvature(S, steps, noise)
        ratio = {name: np.array([u @ np.linalg.solve(K, u) for u in U.T]) * lam
                 for name, K in (("window", K_window), ("stationary", K_stat))}
        print(f"relaxation times (true) {np.round(steps[0] * lam * st.count, 1)}\n"
              f"  variance / truth, window-corrected {np.round(ratio['window'], 2)}\n"
              f"  variance / truth, stationary       {np.round(ratio['stationary'], 2)}")


def random_walk(n_points=512, n_paths=3000, seed=0):
    rng = np.random.default_rng(seed)
    paths = np.cumsum(rng.standard_normal((n_paths, n_points)), 1)
    r = paths.var(1) / (n_points / 6)
    q = np.quantile(r, [0.05, 0.25, 0.5, 0.75, 0.95])
    print("random walk's sample variance / its mean, quantiles 5/25/50/75/95 %:",
          np.round(q / r.mean(), 2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", choices=["gaussian", "correlated"], default="correlated")
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rho", type=float, default=0.0)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--k", type=int, default=40)
    parser.add_argument("--methods", nargs="+", default=["emcee", "dense+oracle"])
    parser.add_argument("--variance-ratios", action="store_true")
    parser.add_argument("--random-walk", action="store_true")
    args = parser.parse_args()
    if args.random_walk:
        return random_walk()
    design = (D.gaussian_design(args.d, args.n, args.rho) if args.design == "gaussian"
              else D.correlated_design())
    if args.variance_ratios:
        return variance_ratios(design, args.epsilon)
    seeds = list(range(1000, 1000 + args.k))
    out = Parallel(n_jobs=2)(delayed(_batch)(design, seeds[i::2], args.epsilon, args.methods)
                             for i in range(2))
    out = [o for part in out for o in part]
    for method in args.methods:
        z = []
        for draws, theta, precision in out:
            _, U = np.linalg.eigh(precision)
            proj = draws[method] @ U
            z.append((proj.mean(0) - theta @ U) / proj.std(0))
        z = np.array(z)
        print(f"{method:<14} z mean {np.round(z.mean(0), 2)}\n{'':<14} z sd   {np.round(z.std(0), 2)}")


if __name__ == "__main__":
    main()
