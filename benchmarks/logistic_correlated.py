"""Logistic regression on correlated features, with known truth (issue 14's benchmark).

Design: 6 equicorrelated Gaussian features (rho = 0.5) and a one-hot block of 4
categories (10 features), an intercept, coefficients drawn from the prior N(0, I),
N = 10,000, kappa = 0.1, T = 10,000, delta = 1e-5, the estimator's defaults
(clip_norm="auto", learning_rate_scale = sqrt(d / 2), preconditioning). The one-hot
block sums to the intercept column, so the posterior is strongly coupled, as on
Adult. Methods on the same DP-SGD runs: ``statistics`` (dense curvature with
shrinkage, linear-response components), ``emcee`` (the paper's diagonal gradient
model and mean-field components) and ``last_iterate`` (naive). TARP with both
reference schemes and per-coordinate z-scores.

Run: python benchmarks/logistic_correlated.py --quick
     python benchmarks/logistic_correlated.py --n-sim 300 --epsilons 0.3 1
"""

import argparse
import math

import numpy as np
import torch

from _common import (fit_all_backends_batched, machine, print_tarp, rmse_floor,
                     run_batched_study, save, tarp_table)
from skdpvi import DPBayesianLogisticRegression
from skdpvi.models import LogisticRegressionModel
from table2_linear import z_scores

METHODS = ("statistics", "emcee", "last_iterate")
N_GAUSSIAN, N_CATEGORIES, RHO, N = 6, 4, 0.5, 10_000
MODEL = LogisticRegressionModel(N_GAUSSIAN + N_CATEGORIES)


def simulate(rng, n=N):
    z = rng.standard_normal((n, N_GAUSSIAN))
    gaussian = math.sqrt(1 - RHO) * z + math.sqrt(RHO) * rng.standard_normal((n, 1))
    onehot = np.eye(N_CATEGORIES)[rng.integers(N_CATEGORIES, size=n)]
    X = np.c_[gaussian, onehot]
    theta = rng.standard_normal(MODEL.n_params)
    logits = X @ theta[:-1] + theta[-1]
    y = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(float)
    return X, y, theta


def one_batch(seeds, epsilon, n_steps, n_draws):
    torch.set_num_threads(1)
    sims = [simulate(np.random.default_rng(s)) for s in seeds]
    est = DPBayesianLogisticRegression()
    lam_c = est._default_learning_rate_scale(2 * MODEL.n_params)
    fits = fit_all_backends_batched(MODEL, [(X, y) for X, y, _ in sims],
                                    [s % (2**31 - 16) for s in seeds], epsilon=epsilon,
                                    clip_norm=est._default_clip_norm(MODEL),
                                    learning_rate_scale=lam_c, n_steps=n_steps,
                                    n_draws=n_draws, methods=METHODS)
    out = []
    for seed, (_, _, theta), (posts, diag) in zip(seeds, sims, fits):
        draws = {m: p.sample(n_draws, random_state=seed % 1000, unconstrained=True)
                 for m, p in posts.items()}
        out.append((draws, theta, diag))
    return out


def prior_sampler(n, rng):
    return rng.standard_normal((n, MODEL.n_params))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n-sim", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.3, 1.0])
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
    if args.quick:
        args.n_sim, args.steps = 25, 2000
    name = "logistic_correlated" + ("_quick" if args.quick else "")
    payload = {"machine": machine(), "n_sim": args.n_sim, "steps": args.steps, "cells": {},
               "floor": rmse_floor(args.n_sim)}
    for eps in args.epsilons:
        out, seconds = run_batched_study(lambda s: one_batch(s, eps, args.steps, 1000),
                                         args.n_sim, seed=int(eps * 1000) + 7,
                                         n_jobs=args.n_jobs, batch_size=32)
        samples = {m: np.stack([o[0][m] for o in out]) for m in out[0][0]}
        theta = np.stack([o[1] for o in out])
        rows = tarp_table(samples, theta, prior_sampler)
        clipped = float(np.mean([o[2]["clipped_fraction"] for o in out]))
        warned = float(np.mean([o[2].get("convergence_warning", False) for o in out]))
        print_tarp(rows, f"correlated logistic, epsilon={eps} ({args.n_sim} simulations, "
                         f"{seconds:.0f} s, clipped fraction {clipped:.3f}, "
                         f"ConvergenceWarning in {warned:.1%})", args.n_sim)
        zs = z_scores(samples, theta)
        with np.printoptions(precision=2, suppress=True, linewidth=150):
            for method, z in zs.items():
                print(f"  z {method:<14} mean {np.array(z['mean'])}\n"
                      f"    {'':<14} sd   {np.array(z['sd'])}")
        payload["cells"][str(eps)] = {"rows": rows, "seconds": seconds, "clipped": clipped,
                                      "convergence_warning": warned, "z": zs}
        save(name, payload)


if __name__ == "__main__":
    main()
