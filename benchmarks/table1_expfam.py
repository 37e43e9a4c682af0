"""Paper Table 1: TARP coverage RMSE for the three exponential-family models.

M1 Gamma-Exponential, M2 Beta-Bernoulli, M3 Dirichlet-Categorical with this package's
priors (Gamma(2, 2), Beta(2, 2), Dirichlet(2, 2, 2); the paper does not give its own),
N = 5000, epsilon = 0.1, delta = 1e-5, kappa = 0.1, T = 10,000, C = 2 (the authors').
TARP in the unconstrained space, two reference schemes, bootstrap error bars, and the
z-scores (posterior mean - truth) / posterior sd. Methods: ``statistics`` (the default
post-processing: the sufficient statistic's posterior and the conjugate posterior
given it), ``exact`` and ``emcee`` (the paper's gradient model of phi*) and
``last_iterate`` (naive), all on the same DP-SGD runs.

``--exact`` runs DP-SGD with the models' exact expectations over q (Gauss-Hermite)
instead of Monte Carlo draws, on the same seeds.

Run: python benchmarks/table1_expfam.py --quick      (K=25, T=2000)
     python benchmarks/table1_expfam.py --n-sim 500  (paper scale)
"""

import argparse
import zlib

import numpy as np
import torch

from _common import (fit_all_backends_batched, load_cells, machine, print_tarp, rmse_floor,
                     run_batched_study, save, tarp_table)
from table2_linear import z_scores

METHODS = ("statistics", "exact", "emcee", "last_iterate")
from skdpvi.datasets import (
    make_beta_bernoulli,
    make_dirichlet_categorical,
    make_gamma_exponential,
)
from skdpvi.models import BetaBernoulliModel, DirichletCategoricalModel, GammaExponentialModel

MODELS = {
    "gamma_exponential": (GammaExponentialModel(), make_gamma_exponential),
    "beta_bernoulli": (BetaBernoulliModel(), make_beta_bernoulli),
    "dirichlet_categorical": (DirichletCategoricalModel(), make_dirichlet_categorical),
}


def one_batch(seeds, name, epsilon, n_steps, methods=METHODS, exact=False):
    torch.set_num_threads(1)
    model, simulate = MODELS[name]
    model.exact_expectations = exact
    sims = [simulate(5000, random_state=s) for s in seeds]
    fits = fit_all_backends_batched(model, [(np.asarray(x, float),) for x, _ in sims],
                                    [s % (2**31 - 16) for s in seeds], epsilon=epsilon,
                                    clip_norm=2.0, n_steps=n_steps, methods=tuple(methods))
    out = []
    for seed, (_, theta), (posts, diag) in zip(seeds, sims, fits):
        theta_u = next(iter(posts.values())).to_unconstrained(np.atleast_1d(theta))
        draws = {m: p.sample(1000, random_state=seed % 1000, unconstrained=True)
                 for m, p in posts.items()}
        out.append((draws, np.atleast_1d(theta_u), diag))
    return out


def prior_sampler_for(name):
    model, simulate = MODELS[name]

    def sampler(n, rng):
        thetas = [np.atleast_1d(simulate(1, random_state=rng)[1]) for _ in range(n)]
        return model.unconstrain(torch.tensor(np.array(thetas))).numpy().reshape(n, -1)

    return sampler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n-sim", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--exact", action="store_true",
                        help="DP-SGD with exact expectations over q, not Monte Carlo draws")
    parser.add_argument("--save", default=None, help="results name (default table1_expfam)")
    parser.add_argument("--seed-offset", type=int, default=0,
                        help="added to each model's study seed: a second, independent study")
    args = parser.parse_args()
    if args.quick:
        args.n_sim, args.steps = 25, 2000
    name = args.save or ("table1_expfam" + ("_quick" if args.quick else ""))
    payload = {"machine": machine(), "n_sim": args.n_sim, "steps": args.steps,
               "epsilon": args.epsilon,
               "cells": load_cells(name, n_sim=args.n_sim, steps=args.steps,
                                   epsilon=args.epsilon),
               "floor": rmse_floor(args.n_sim)}
    for model in args.models:
        out, seconds = run_batched_study(
            lambda s: one_batch(s, model, args.epsilon, args.steps, args.methods, args.exact),
            args.n_sim, seed=zlib.crc32(model.encode()) % 10_000 + args.seed_offset,
            n_jobs=args.n_jobs)
        samples = {m: np.stack([o[0][m] for o in out]) for m in out[0][0]}
        theta = np.stack([o[1] for o in out])
        rows = tarp_table(samples, theta, prior_sampler_for(model))
        clipped = float(np.mean([o[2]["clipped_fraction"] for o in out]))
        warned = float(np.mean([o[2].get("convergence_warning", False) for o in out]))
        corrections = [str(o[2].get("clipping_correction")) for o in out]
        correction = {k: corrections.count(k) for k in sorted(set(corrections))}
        print_tarp(rows, f"{model}, epsilon={args.epsilon} ({args.n_sim} simulations, "
                         f"{seconds:.0f} s, clipped fraction {clipped:.3f}, "
                         f"ConvergenceWarning in {warned:.1%}, clipping correction "
                         f"{correction})", args.n_sim)
        zs = z_scores(samples, theta)
        for method, z in zs.items():
            print(f"  z {method:<14} mean {np.round(z['mean'], 2)}  sd {np.round(z['sd'], 2)}")
        payload["cells"][model] = {"rows": rows, "seconds": seconds, "clipped": clipped,
                                  "convergence_warning": warned, "z": zs,
                                  "clipping_correction": correction}
        save(name, payload)


if __name__ == "__main__":
    main()
