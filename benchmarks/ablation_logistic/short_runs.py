"""Short runs and the variational scales: calibration of the logistic fit against T.

The variational scales start at 0.01 and relax about ``2 kappa sqrt(T)`` times in a
run with the default preconditioning (``scale_relaxations`` of
``skdpvi.linear_model._logistic_release_checks``): 20 at the defaults (T = 10,000,
kappa = 0.1), 10 at T = 2,500. This study fits each family (``variational_family``
"full_rank" and "mean_field", everything else at the estimator's defaults) at several
``max_iter`` through the public ``run_tarp_study`` (coefficients and intercept drawn
from the prior N(0, I)) and reports TARP with the authors' and prior references (the
calibrated range at this K beside it), the 90 % intervals' and ellipsoids' coverage
and the coordinates' z-score sds: what sets ``FULL_RANK_MIN_SCALE_RELAXATIONS``, the
bound below which "auto" fits the mean field and a full-rank fit warns.

Designs: ``n1k`` (4 Gaussian features on 1,000 rows: the scales climb farthest),
``g4`` (the same on 5,000 rows), ``r7`` (6 equicorrelated features, rho 0.7, 5,000
rows) and ``i14`` (issue 14's: 6 equicorrelated features and a declared one-hot
block of 4, 10,000 rows).

``--prior-scale`` draws the coefficients from N(0, s^2 I) and fits with that prior
(the Gaussian designs only).

Run: python benchmarks/ablation_logistic/short_runs.py --designs n1k i14 \
         --max-iter 2500 6400 --k 200 [--prior-scale 2]
"""

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from _common import machine, rmse_floor, save, tarp_table  # noqa: E402
from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.metrics import (ellipsoid_coverage, interval_coverage,  # noqa: E402
                            posterior_z_scores, run_tarp_study)

DESIGNS = {"n1k": (4, 1_000, 0.0), "g4": (4, 5_000, 0.0), "r7": (6, 5_000, 0.7)}


class GaussianDesign:
    """d equicorrelated Gaussian features on n rows, theta (coefficients, intercept)
    from N(0, prior_scale^2 I); picklable for the study's workers."""

    def __init__(self, d, n, rho, prior_scale=1.0):
        self.d, self.n, self.rho, self.prior_scale = d, n, rho, prior_scale

    def __call__(self, rng):
        z = rng.standard_normal((self.n, self.d))
        X = math.sqrt(1 - self.rho) * z + math.sqrt(self.rho) * rng.standard_normal((self.n, 1))
        theta = self.prior_scale * rng.standard_normal(self.d + 1)
        y = (rng.random(self.n) < 1 / (1 + np.exp(-(X @ theta[:-1] + theta[-1])))).astype(int)
        return theta, X, y


class Issue14Design:
    def __call__(self, rng):
        from logistic_correlated import simulate
        X, y, theta = simulate(rng)
        return theta, X, y.astype(int)


def design(name, prior_scale=1.0):
    if name == "i14":
        if prior_scale != 1.0:
            raise ValueError("issue 14's design draws its coefficients from N(0, I).")
        return Issue14Design(), 11, {"onehot_blocks": [[6, 7, 8, 9]]}
    d, n, rho = DESIGNS[name]
    return GaussianDesign(d, n, rho, prior_scale), d + 1, {"prior_scale": prior_scale}


def prior_sampler_for(n_params, prior_scale=1.0):
    def sample(n, rng):
        return prior_scale * rng.standard_normal((n, n_params))
    return sample


def cell(name, max_iter, family, k, seed, prior_scale=1.0, burn_in=0.2):
    simulator, n_params, options = design(name, prior_scale)
    est = DPBayesianLogisticRegression(max_iter=max_iter, variational_family=family,
                                       burn_in=burn_in, **options)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = run_tarp_study(est, simulator, n_simulations=k, n_draws=1000, n_jobs=2,
                               random_state=seed)
    seconds = time.perf_counter() - start
    samples, theta = study.samples, study.theta_true
    z = posterior_z_scores(samples, theta)
    tarp = tarp_table({family: samples}, theta, prior_sampler_for(n_params, prior_scale),
                      n_bootstrap=200, seed=seed)[family]
    return {"design": name, "max_iter": max_iter, "family": family, "k": k,
            "prior_scale": prior_scale, "burn_in": burn_in,
            "scale_relaxations": 2 * 0.1 * math.sqrt(max_iter),
            "tarp_posterior": tarp["posterior"]["rmse"], "tarp_posterior_se": tarp["posterior"]["se"],
            "tarp_prior": tarp["prior"]["rmse"], "tarp_prior_se": tarp["prior"]["se"],
            "interval_coverage_90": interval_coverage(samples, theta, 0.9).tolist(),
            "ellipsoid_coverage_90": float(ellipsoid_coverage(samples, theta, 0.9)),
            "z_sd": z.std(0).tolist(), "z_mean": z.mean(0).tolist(), "seconds": seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--designs", nargs="+", default=["n1k", "i14"],
                        choices=[*DESIGNS, "i14"])
    parser.add_argument("--max-iter", nargs="+", type=int, default=[2500, 6400])
    parser.add_argument("--families", nargs="+", default=["full_rank", "mean_field"])
    parser.add_argument("--k", type=int, default=200)
    parser.add_argument("--seed", type=int, default=8000)
    parser.add_argument("--prior-scale", type=float, default=1.0,
                        help="the coefficients' prior sd, in the simulation and the fit")
    parser.add_argument("--burn-in", type=float, default=0.2)
    parser.add_argument("--out", default="ablation_logistic_short_runs")
    args = parser.parse_args()
    rows = []
    floor = rmse_floor(args.k)
    print(f"calibrated TARP RMSE at K = {args.k}: {floor['mean']:.3f} "
          f"({floor['q05']:.3f}-{floor['q95']:.3f})")
    for name in args.designs:
        for max_iter in args.max_iter:
            for family in args.families:
                row = cell(name, max_iter, family, args.k, args.seed, args.prior_scale,
                           args.burn_in)
                rows.append(row)
                print(f"{name:4s} T={max_iter:6d} R={row['scale_relaxations']:5.1f} "
                      f"{family:10s} TARP {row['tarp_posterior']:.3f} / {row['tarp_prior']:.3f}"
                      f"  intervals {min(row['interval_coverage_90']):.2f}-"
                      f"{max(row['interval_coverage_90']):.2f}  ellipsoids "
                      f"{row['ellipsoid_coverage_90']:.2f}  z sd {min(row['z_sd']):.2f}-"
                      f"{max(row['z_sd']):.2f}  ({row['seconds']:.0f} s)", flush=True)
                save(args.out, {"machine": machine(), "floor": floor, "args": vars(args),
                                "rows": rows})


if __name__ == "__main__":
    main()
