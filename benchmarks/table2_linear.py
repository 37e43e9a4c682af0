"""Paper Table 2 (and configurations beyond it): TARP coverage of Bayesian linear regression.

Default configuration, the paper's: theta = (10 coefficients, intercept, noise variance)
~ NIG(0, 1/4, 20, 1/2), N = 5000, x ~ N(0, I), delta = 1e-5, kappa = 0.1, T = 10,000,
the estimator's defaults for everything else (clip norm, learning rate, preconditioning,
clip groups). Other configurations (``--config``) change the dimension, N, the prior or
the design (equicorrelated features), to check that the default generalises.

For every simulation one DP-SGD run is post-processed by every method, so the methods
are compared on identical privatised traces:

- ``statistics``: the estimator's default (:func:`skdpvi.noise_aware.statistics_posterior`);
- ``exact``: the paper's gradient model of phi* with exact inference (emcee gives the
  same to 0.002, previous runs);
- ``last_iterate``: the naive baseline.

TARP in the unconstrained space (softplus-inverse of the noise variance) with two
reference schemes: the authors' (posterior mean +- 4 sd, uniform) and draws from the
prior; error bars: bootstrap over simulations. Also the per-coordinate z-scores
(posterior mean - truth) / posterior sd: mean 0 and sd 1 for a calibrated posterior.

Run: python benchmarks/table2_linear.py --quick                  (K=25, T=2000)
     python benchmarks/table2_linear.py --n-sim 500               (the paper's scale)
     python benchmarks/table2_linear.py --config d5_n1000 --n-sim 200 --epsilons 0.3 1
     python benchmarks/table2_linear.py --n-sim 200 --epsilons 0.1 --model-clipping
"""

import argparse
import math

import numpy as np
import torch

from _common import (fit_all_backends_batched, load_cells, machine, print_tarp, rmse_floor,
                     run_batched_study, save, tarp_table)
from skdpvi import DPBayesianLinearRegression
from skdpvi.models import LinearRegressionModel
from skdpvi.models.linear_statistics import LinearRegressionStatistics

METHODS = ("statistics", "exact", "last_iterate")

#: name -> (n_features, n_samples, weight_scale, noise_shape, noise_scale, rho)
CONFIGS = {
    "paper": (10, 5000, 2.0, 20.0, 0.5, 0.0),
    # another dimension and N, a vaguer prior on the noise
    "d5_n1000": (5, 1000, 2.0, 5.0, 0.5, 0.0),
    # a correlated design (equicorrelated features), more features, the paper's prior
    "d20_rho0.5": (20, 5000, 1.0, 20.0, 0.5, 0.5),
    # few features, many rows, a tight weight prior and a vague noise prior (sd ~ 0.7)
    "d3_n20000": (3, 20000, 0.5, 3.0, 1.0, 0.2),
    # chosen 2026-11-25 before any run: strong correlation; tiny data; many features and
    # rows; a strong signal (coefficients five noise sds a priori)
    "d10_rho0.9": (10, 5000, 2.0, 20.0, 0.5, 0.9),
    "d2_n300": (2, 300, 2.0, 5.0, 0.5, 0.0),
    "d40_n10000": (40, 10000, 1.0, 10.0, 1.0, 0.0),
    "d10_ws5": (10, 5000, 5.0, 20.0, 0.5, 0.0),
}


def simulate(config, rng):
    """(X, y, theta) with theta drawn from the configuration's prior."""
    p, n, ws, shape, scale, rho = CONFIGS[config]
    var = scale / rng.gamma(shape)
    w = rng.normal(0.0, ws * math.sqrt(var), p + 1)
    z = rng.standard_normal((n, p))
    X = math.sqrt(1 - rho) * z + math.sqrt(rho) * rng.standard_normal((n, 1)) if rho else z
    y = X @ w[:p] + w[p] + rng.normal(0.0, math.sqrt(var), n)
    return X, y, np.r_[w, var]


def model_of(config):
    p, _, ws, shape, scale, _ = CONFIGS[config]
    return LinearRegressionModel(p, ws, shape, scale)


def clip_of(config):
    """The estimator's clip_norm="auto" for this configuration."""
    est = DPBayesianLinearRegression(prior_weight_scale=CONFIGS[config][2],
                                     prior_noise_shape=CONFIGS[config][3],
                                     prior_noise_scale=CONFIGS[config][4])
    return est._default_clip_norm(model_of(config))


def one_batch(seeds, config, epsilon, n_steps, n_draws, model_clipping=False, n_nodes=256,
              quadrature="nodes", lr_scale=None, methods=METHODS):
    torch.set_num_threads(1)
    # ablation: the linear model's clipping correction (off by default)
    LinearRegressionStatistics.correct_clipping = model_clipping
    LinearRegressionStatistics.n_nodes = n_nodes
    LinearRegressionStatistics.clipping_quadrature = quadrature
    model = model_of(config)
    sims = [simulate(config, np.random.default_rng(s)) for s in seeds]
    lam_c = (DPBayesianLinearRegression()._default_learning_rate_scale(2 * model.n_params)
             if lr_scale is None else lr_scale)
    fits = fit_all_backends_batched(model, [(X, y) for X, y, _ in sims],
                                    [s % (2**31 - 16) for s in seeds], epsilon=epsilon,
                                    clip_norm=clip_of(config), learning_rate_scale=lam_c,
                                    n_steps=n_steps, n_draws=n_draws, methods=tuple(methods))
    out = []
    for seed, (_, _, theta), (posts, diag) in zip(seeds, sims, fits):
        theta_u = next(iter(posts.values())).to_unconstrained(theta)
        draws = {m: p.sample(n_draws, random_state=seed % 1000, unconstrained=True)
                 for m, p in posts.items()}
        out.append((draws, theta_u, diag))
    return out


def prior_sampler_of(config):
    model = model_of(config)

    def sample(n, rng):
        out = np.stack([simulate_prior(config, rng) for _ in range(n)])
        return model.unconstrain(torch.tensor(out)).numpy()

    return sample


def simulate_prior(config, rng):
    p, _, ws, shape, scale, _ = CONFIGS[config]
    var = scale / rng.gamma(shape)
    return np.r_[rng.normal(0.0, ws * math.sqrt(var), p + 1), var]


def z_scores(samples, theta):
    """Per-coordinate mean and sd over simulations of (posterior mean - truth) / sd."""
    out = {}
    for method, draws in samples.items():
        z = (draws.mean(1) - theta) / draws.std(1)
        out[method] = {"mean": z.mean(0).tolist(), "sd": z.std(0).tolist()}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--config", default="paper", choices=sorted(CONFIGS))
    parser.add_argument("--n-sim", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 0.3, 1.0])
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--lr-scale", type=float, default=None,
                        help="learning_rate_scale (ablation; default: the estimator's)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--model-clipping", action="store_true",
                        help="ablation: correct the linear model's design for clipping")
    parser.add_argument("--clipping-nodes", type=int, default=256,
                        help="nodes of the per-example predictive (with --model-clipping)")
    parser.add_argument("--clipping-quadrature", choices=("nodes", "residual"), default="nodes",
                        help="with --model-clipping: every group on the nodes (the results "
                             "page's table) or exact in the residual (the package's)")
    args = parser.parse_args()
    if args.quick:
        args.n_sim, args.steps = 25, 2000
    name = "table2_linear" + ("" if args.config == "paper" else "_" + args.config)
    name += f"_model_clipping{args.clipping_nodes}" if args.model_clipping else ""
    name += "_residual" if args.model_clipping and args.clipping_quadrature == "residual" else ""
    name += "_quick" if args.quick else ""
    name += f"_lr{args.lr_scale:g}" if args.lr_scale is not None else ""
    name += "_" + "_".join(args.methods) if list(args.methods) != list(METHODS) else ""
    payload = {"machine": machine(), "config": args.config, "settings": CONFIGS[args.config],
               "n_sim": args.n_sim, "steps": args.steps,
               "cells": load_cells(name, config=args.config, n_sim=args.n_sim,
                                   steps=args.steps),
               "floor": rmse_floor(args.n_sim)}
    for eps in args.epsilons:
        out, seconds = run_batched_study(
            lambda s: one_batch(s, args.config, eps, args.steps, 1000, args.model_clipping,
                                args.clipping_nodes, args.clipping_quadrature, args.lr_scale,
                                args.methods),
            args.n_sim,
            seed=int(eps * 1000), n_jobs=args.n_jobs, batch_size=32)
        samples = {m: np.stack([o[0][m] for o in out]) for m in out[0][0]}
        theta = np.stack([o[1] for o in out])
        rows = tarp_table(samples, theta, prior_sampler_of(args.config))
        clipped = float(np.mean([o[2]["clipped_fraction"] for o in out]))
        warned = float(np.mean([o[2].get("convergence_warning", False) for o in out]))
        fallbacks = int(sum(bool(o[2].get("fallback")) for o in out))
        corrections = [str(o[2].get("clipping_correction")) for o in out]
        correction = {k: corrections.count(k) for k in sorted(set(corrections))}
        print_tarp(rows, f"{args.config}, epsilon={eps} ({args.n_sim} simulations, "
                         f"{seconds:.0f} s, clipped fraction {clipped:.3f}, "
                         f"ConvergenceWarning in {warned:.1%}, clipping correction "
                         f"{correction}, fallbacks to the gradient model {fallbacks})",
                   args.n_sim)
        zs = z_scores(samples, theta)
        with np.printoptions(precision=2, suppress=True, linewidth=150):
            for method, z in zs.items():
                print(f"  z {method:<14} mean {np.array(z['mean'])}\n"
                      f"    {'':<14} sd   {np.array(z['sd'])}")
        payload["cells"][str(eps)] = {"rows": rows, "seconds": seconds, "clipped": clipped,
                                      "convergence_warning": warned, "z": zs,
                                      "clipping_correction": correction,
                                      "fallbacks": fallbacks}
        save(name, payload)


if __name__ == "__main__":
    main()
