"""Paper Table 2: TARP coverage RMSE of the 10-D Bayesian linear regression.

theta = (10 coefficients, intercept, noise variance) ~ NIG(0, 1/4, 20, 1/2), N = 5000,
x ~ N(0, I), delta = 1e-5, kappa = 0.1, T = 10,000; skdpvi's defaults for the clip norm
and preconditioning. TARP in the unconstrained space (softplus-inverse of the noise
variance), with two reference schemes: the authors' (posterior mean +- 4 sd, uniform)
and draws from the prior. Error bars: bootstrap over simulations.

Rows: "emcee" and "exact" are the paper's post-processing
(noise_variance_correction="none" in DPBayesianLinearRegression); the estimator's
default, noise_variance_correction="wander", is the "exact_wander_scale" row (exact
inference; emcee and exact agree to 0.002 in every cell).

Run: python benchmarks/table2_linear.py --quick            (K=25, T=2000: a minute)
     python benchmarks/table2_linear.py --n-sim 500        (paper scale: about 15 min per epsilon)
"""

import argparse

import numpy as np
import torch

from _common import (METHODS, fit_all_backends_batched, machine, print_tarp, rmse_floor,
                     run_batched_study, save, tarp_table)
from skdpvi import DPBayesianLinearRegression
from skdpvi.datasets import make_nig_linear_regression
from skdpvi.models import LinearRegressionModel

MODEL = LinearRegressionModel(10)
CLIP = 3.0 * np.sqrt(11) / np.sqrt(0.5 / 19)  # the estimator's clip_norm="auto"


def one_batch(seeds, epsilon, n_steps, n_draws):
    torch.set_num_threads(1)
    sims = [make_nig_linear_regression(5000, random_state=s) for s in seeds]
    lam_c = DPBayesianLinearRegression._default_learning_rate_scale(2 * MODEL.n_params)
    fits = fit_all_backends_batched(MODEL, [(X, y) for X, y, _ in sims],
                                    [s % (2**31 - 16) for s in seeds], epsilon=epsilon,
                                    clip_norm=CLIP, learning_rate_scale=lam_c,
                                    n_steps=n_steps, n_draws=n_draws,
                                    methods=METHODS + ("exact_wander_offset",
                                                                "exact_wander_scale"))
    out = []
    for seed, (_, _, theta), (posts, diag) in zip(seeds, sims, fits):
        theta_u = posts["exact"].to_unconstrained(theta)
        draws = {m: p.sample(n_draws, random_state=seed % 1000, unconstrained=True)
                 for m, p in posts.items()}
        out.append((draws, theta_u, diag["clipped_fraction"]))
    return out


def prior_sampler(n, rng):
    out = np.empty((n, 12))
    for i in range(n):
        _, _, theta = make_nig_linear_regression(2, random_state=rng)
        out[i] = theta
    return MODEL.unconstrain(torch.tensor(out)).numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n-sim", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 0.3, 1.0])
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
    if args.quick:
        args.n_sim, args.steps = 25, 2000
    payload = {"machine": machine(), "n_sim": args.n_sim, "steps": args.steps, "cells": {},
               "floor": rmse_floor(args.n_sim)}
    for eps in args.epsilons:
        out, seconds = run_batched_study(lambda s: one_batch(s, eps, args.steps, 1000),
                                         args.n_sim, seed=int(eps * 1000), n_jobs=args.n_jobs)
        samples = {m: np.stack([o[0][m] for o in out]) for m in out[0][0]}
        theta = np.stack([o[1] for o in out])
        rows = tarp_table(samples, theta, prior_sampler)
        clipped = float(np.mean([o[2] for o in out]))
        print_tarp(rows, f"epsilon={eps} ({args.n_sim} simulations, {seconds:.0f} s, "
                         f"clipped fraction {clipped:.3f})", args.n_sim)
        payload["cells"][str(eps)] = {"rows": rows, "seconds": seconds, "clipped": clipped}
        save("table2_linear" + ("_quick" if args.quick else ""), payload)


if __name__ == "__main__":
    main()
