"""A non-private yardstick for the large-coefficient cells: the Laplace posterior.

For each simulation of a ``release_cache.py`` cell (the same truths and data sets),
the exact MAP of the logistic posterior with the cell's N(0, prior_scale^2) prior and
its Laplace covariance (inverse Hessian at the MAP), computed from the data without
privacy, scored by ``release_cache.score`` against the same prior references. It
says how calibrated a Gaussian posterior can be on the cell when the optimisation is
exact (the mean-field posterior is not the Laplace one, but sits near it); where the
private fits are far worse, the gap is the DP-SGD's, not the posterior family's.
``--seeds`` prints, for single simulations, the truth, the Laplace posterior and the
cached private fits along the truth's direction (mean and sd).

Run::

    python benchmarks/ablation_logistic/laplace_yardstick.py d10ps2 rho05ps2 d3ps3
    python benchmarks/ablation_logistic/laplace_yardstick.py d10ps2 --seeds 5021 \\
        --tags "" bi4
"""

import argparse
import os
import sys
import warnings

import numpy as np
from scipy.optimize import minimize

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import release_cache as rc  # noqa: E402
from _common import save  # noqa: E402


def laplace(X, y, prior_sd):
    """MAP and Laplace covariance of logistic regression with an intercept (last)."""
    A = np.c_[X, np.ones(len(X))]

    def objective(w):
        z = A @ w
        value = np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * w @ w / prior_sd ** 2
        return value, A.T @ (1.0 / (1.0 + np.exp(-z)) - y) + w / prior_sd ** 2

    w = minimize(objective, np.zeros(A.shape[1]), jac=True, method="L-BFGS-B").x
    p = 1.0 / (1.0 + np.exp(-(A @ w)))
    H = (A * (p * (1 - p))[:, None]).T @ A + np.eye(A.shape[1]) / prior_sd ** 2
    return w, np.linalg.inv(H)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", choices=list(rc.CELLS))
    parser.add_argument("--n-sim", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=None)
    parser.add_argument("--tags", nargs="+", default=[""],
                        help="with --seeds: cached runs to compare ('' = the default's)")
    parser.add_argument("--cache", default="/tmp/release_cache")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.seeds:
        for cell in args.cells:
            for seed in args.seeds:
                theta, X, y = rc.simulate(rc._rule_cell(cell), seed)
                u = theta / np.linalg.norm(theta)
                w, C = laplace(X, y, rc.prior_scale(cell))
                line = (f"{cell} seed {seed}: truth {theta @ u:.2f}, Laplace {w @ u:.2f} "
                        f"(sd {np.sqrt(u @ C @ u):.2f})")
                for tag in args.tags:
                    row = [r for r in rc.load(args.cache, rc._tagged(cell, tag or None))
                           if r["seed"] == seed][0]
                    draws = rc._posterior(cell, row, {}, {})[0] @ u
                    line += f", {tag or 'default'} {draws.mean():.2f} (sd {draws.std():.3f})"
                print(line)
        return
    payload = {"cells": {}}
    out = os.path.join(os.path.dirname(HERE), "results", "ablation_logistic_laplace_yardstick.json")
    if os.path.exists(out):  # add to the cells kept
        import json
        with open(out) as f:
            payload["cells"].update(json.load(f).get("cells", {}))
    for cell in args.cells:
        rng = np.random.default_rng(0)
        draws, thetas = [], []
        for seed in range(5000, 5000 + args.n_sim):
            theta, X, y = rc.simulate(rc._rule_cell(cell), seed)
            w, C = laplace(X, y, rc.prior_scale(cell))
            draws.append(rng.multivariate_normal(w, C, size=1000))
            thetas.append(theta)
        thetas = np.array(thetas)
        refs = rc.prior_scale(cell) * np.random.default_rng(12345).standard_normal(thetas.shape)
        row = rc.score(np.array(draws), thetas, refs)
        payload["cells"][cell] = row
        print(f"{cell:<8} Laplace (not private) TARP {row['tarp_posterior']:.3f} / "
              f"{row['tarp_prior']:.3f}, coverage {row['coverage_90'][0]:.2f}-"
              f"{row['coverage_90'][1]:.2f}, z sd {row['z_sd'][0]:.2f}-{row['z_sd'][1]:.2f}, "
              f"ellipsoids {row['ellipsoid_90']:.2f}, radial z {row['radial_z'][0]:+.2f}",
              flush=True)
    save("ablation_logistic_laplace_yardstick", payload)


if __name__ == "__main__":
    main()
