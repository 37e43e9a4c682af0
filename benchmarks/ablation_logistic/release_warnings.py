"""Where the logistic release checks fire, beside the calibration they guard.

The measurements behind the results page's "Small data for the budget, and features
above unit scale" (nineteenth session): K data sets of Gaussian features multiplied
by ``--x-scale`` (the coefficients and intercept from the prior N(0, I), the logits
from the scaled features), one DP-SGD run each with the estimator's defaults, the
default (dense) posterior, and for every run what the estimator's two release checks
read: the features' scale relative to the intercept's column, lowered by the
window's wander (``check_logistic_scales``; it warns above 1.5, 4 before), and the
expected batch per unit of noise ``q N / (sigma C)`` (``check_logistic_batch_noise``;
it warns below 0.3). Prints TARP (authors' / prior references), the radial z-score,
the coordinate z sds and the fraction of fits each check flags.

Run: python benchmarks/ablation_logistic/release_warnings.py --d 3 --n 5000 --epsilon 1 \
         --k 100 --x-scale 3 [--save NAME]
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
sys.path.insert(0, HERE)

from _common import _engine_settings, save  # noqa: E402
from designs import (describe, design_arguments, gaussian_design,  # noqa: E402
                     posterior_draws, summarise)
from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.dpvi import run_dpvi_batched  # noqa: E402
from skdpvi.metrics import coverage_rmse_floor  # noqa: E402


def scaled_design(d, n, rho, prior_scale, x_scale):
    """Gaussian features times ``x_scale``; the labels follow the scaled features."""
    simulate, model, _ = gaussian_design(d, n, rho, prior_scale)

    def scaled(rng):
        X, _, theta = simulate(rng)
        X = x_scale * X
        logits = X @ theta[:-1] + theta[-1]
        label_rng = np.random.default_rng(rng.integers(2**32))
        y = (label_rng.random(n) < 1 / (1 + np.exp(-logits))).astype(float)
        return X, y, theta
    return scaled, model


def lowered_scales(result, n_params, prior_sd):
    """The scale check's reading (``check_logistic_scales``), lowered by the wander."""
    st = result.stats
    rho = st.shift[n_params:] + st.sum_x[n_params:] / st.count
    curvature = np.logaddexp(0.0, rho) ** -2.0 - prior_sd ** -2.0
    scales = np.sqrt(np.maximum(curvature[:-1], 0.0) / curvature[-1])
    wander = np.sqrt(np.maximum(st.sum_xx[n_params:] / st.count
                                - (st.sum_x[n_params:] / st.count) ** 2, 0.0))
    return scales * np.exp(-(wander[:-1] + wander[-1]))


def one_batch(seeds, simulate, model, n_examples, settings):
    torch.set_num_threads(1)
    sims = [simulate(np.random.default_rng(s)) for s in seeds]
    runs = run_dpvi_batched(model, [(X, y) for X, y, _ in sims], random_states=seeds,
                            **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [(posterior_draws(r, model, n_examples, "emcee+dense"), theta,
                 lowered_scales(r, model.n_params, model.prior_scale))
                for (_, _, theta), r in zip(sims, runs)]


def main():
    parser = design_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]),
                              k=100)
    parser.add_argument("--x-scale", type=float, default=1.0)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7000)
    parser.add_argument("--save", default=None, help="name of a JSON in benchmarks/results")
    args = parser.parse_args()
    if args.design != "gaussian":
        parser.error("release_warnings.py simulates the gaussian design only")
    simulate, model = scaled_design(args.d, args.n, args.rho, args.prior_scale, args.x_scale)
    settings = _engine_settings(
        model, epsilon=args.epsilon, clip_norm=2 * math.sqrt(model.n_params), n_steps=10_000,
        sampling_rate=0.1, delta=1e-5, burn_in=0.2, preconditioner=None,
        learning_rate_scale=DPBayesianLogisticRegression._default_learning_rate_scale(
            2 * model.n_params), n_examples=args.n)
    seeds = list(range(args.seed, args.seed + args.k))
    start = time.perf_counter()
    out = Parallel(n_jobs=args.n_jobs)(
        delayed(one_batch)(seeds[i:i + 25], simulate, model, args.n, settings)
        for i in range(0, args.k, 25))
    out = [o for part in out for o in part]
    draws = np.array([o[0] for o in out])
    theta = np.array([o[1] for o in out])
    lows = np.array([o[2] for o in out])
    s = summarise(draws, theta, model.n_params, model.prior_scale)
    ratio = settings["sampling_rate"] * args.n / (settings["noise_multiplier"]
                                                  * settings["clip_norm"])
    floor, (lo, hi) = coverage_rmse_floor(args.k, random_state=0)
    row = {"args": vars(args), "floor": [floor, float(lo), float(hi)], "dense": s,
           "scale_warned": {"4": float(np.mean((lows > 4).any(1))),
                            "1.5": float(np.mean((lows > 1.5).any(1)))},
           "lowered_scale_max": float(lows.max()), "batch_over_noise": ratio}
    print(f"d{args.d} N{args.n} eps{args.epsilon} x{args.x_scale} K={args.k} "
          f"({time.perf_counter() - start:.0f} s; calibrated {floor:.3f}, {lo:.3f}-{hi:.3f}): "
          f"{describe(s)}; scale check at 4 / 1.5: {row['scale_warned']['4']:.2f} / "
          f"{row['scale_warned']['1.5']:.2f}; q N / (sigma C) {ratio:.3f}")
    if args.save:
        save(args.save, row)


if __name__ == "__main__":
    main()
