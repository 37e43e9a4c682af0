"""Where the logistic posterior's joint miscalibration sits: its own eigen-directions.

For each cached release of a cell (``release_cache.py run``), the estimator's
posterior (a ``release_cache.py`` variant, ``default`` by default) and, not private,
the exact MAP and Laplace covariance of the same data under the same prior
(``laplace_yardstick.laplace``). Per simulation, in the eigenbasis of the posterior
draws' covariance (smallest variance first), the truth's error in posterior sds; over
the simulations, the root mean square per eigen-rank (1 calibrated), split by the
error model ``"auto"`` chose, and the same for the posterior mean's distance to the
MAP, and the Laplace sd over the posterior sd per rank (above 1: the private
posterior is narrower than the non-private one along that direction). Also along two
fixed directions: the common direction of the features (the stiff one of an
equicorrelated design) and the MAP's.

Results: doc/results.rst, "Designs not seen before, and where the joint gap sits".
Run: python benchmarks/ablation_logistic/eigen_directions.py rho07d10 [--variant default]
"""

import argparse
import contextlib
import os
import sys
import warnings

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import chi2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import release_cache as rc  # noqa: E402
from laplace_yardstick import laplace  # noqa: E402


def _posterior(cell, row, variant):
    warnings.simplefilter("ignore")
    params, context = rc.VARIANTS[variant]
    with (context() if context else contextlib.nullcontext()):
        draws, model, _ = rc._posterior(cell, row, params, {})
    return draws, model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell", choices=list(rc.CELLS))
    parser.add_argument("--variant", default="default", choices=list(rc.VARIANTS))
    parser.add_argument("--cache", default="/tmp/release_cache")
    parser.add_argument("--max-sim", type=int, default=None)
    args = parser.parse_args()
    rows = rc.load(args.cache, args.cell)[:args.max_sim]
    fits = Parallel(n_jobs=2)(delayed(_posterior)(args.cell, r, args.variant) for r in rows)
    truth_z, map_z, ratio, mahalanobis, fixed = [], [], [], [], []
    p = len(rows[0]["theta"])
    common = np.r_[np.ones(p - 1), 0.0] / np.sqrt(p - 1)
    for row, (draws, _) in zip(rows, fits):
        theta, X, y = rc.simulate(rc._rule_cell(args.cell), row["seed"])
        w_map, laplace_cov = laplace(X, y, rc.prior_scale(args.cell))
        mean, cov = draws.mean(0), np.cov(draws.T)
        var, U = np.linalg.eigh(cov)
        truth_z.append(U.T @ (theta - mean) / np.sqrt(var))
        map_z.append(U.T @ (mean - w_map) / np.sqrt(var))
        ratio.append(np.sqrt(np.einsum("ji,jk,ki->i", U, laplace_cov, U) / var))
        mahalanobis.append((theta - mean) @ np.linalg.solve(cov, theta - mean))
        along = []
        for v in (common, w_map / np.linalg.norm(w_map)):
            sd = (draws @ v).std()
            along += [(mean - w_map) @ v / sd, np.sqrt(v @ laplace_cov @ v) / sd]
        fixed.append(along)
    truth_z, map_z, ratio, fixed = map(np.array, (truth_z, map_z, ratio, fixed))
    models = np.array([str(m) for _, m in fits])
    rms = lambda z: np.sqrt((z**2).mean(0)).round(2)  # noqa: E731
    print(f"{args.cell} {args.variant} K={len(rows)}: 90 % ellipsoids "
          f"{np.mean(np.array(mahalanobis) < chi2.ppf(0.9, p)):.2f}, median Mahalanobis^2 "
          f"{np.median(mahalanobis):.1f} (calibrated {chi2.median(p):.1f})")
    print("  truth's error, rms by eigen-rank (smallest variance first):", rms(truth_z))
    for model in sorted(set(models)):
        print(f"    {model} ({np.sum(models == model)} fits):", rms(truth_z[models == model]))
    print("  posterior mean - MAP, rms by rank:                        ", rms(map_z))
    print("  Laplace sd / posterior sd, median by rank:                ",
          np.median(ratio, 0).round(2))
    print(f"  common feature direction: (mean - MAP) / sd {fixed[:, 0].mean():+.2f} "
          f"(sd {fixed[:, 0].std():.2f}), Laplace / posterior sd {np.median(fixed[:, 1]):.2f}; "
          f"the MAP's direction: {fixed[:, 2].mean():+.2f} ({fixed[:, 2].std():.2f}), "
          f"{np.median(fixed[:, 3]):.2f}")


if __name__ == "__main__":
    main()
