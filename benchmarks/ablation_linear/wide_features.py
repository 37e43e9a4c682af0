"""Calibration of the linear estimator on wide data (tens of features).

The statistics posterior (the default) refuses more than
``skdpvi.linear_model._linear._STATISTICS_MAX_FEATURES`` features (its
post-processing grows as the fourth power of d or faster), and its error message
points to ``inference="exact"``, the paper's gradient model. This study measures
both: the public ``run_tarp_study`` on ``make_nig_linear_regression`` data (the
paper's NIG prior, Gaussian features) with the chosen ``inference`` and every other
parameter at its default; TARP under both reference schemes, per-parameter z-scores
and 90 % interval coverage (the last parameter is the noise variance).

Run: python benchmarks/ablation_linear/wide_features.py [--d 50] [--n 5000] [--k 100]
     [--epsilon 1.0] [--inference statistics|exact] [--save NAME]
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import save  # noqa: E402
from skdpvi import DPBayesianLinearRegression  # noqa: E402
from skdpvi.datasets import make_nig_linear_regression  # noqa: E402
from skdpvi.metrics import coverage_rmse_floor, run_tarp_study, tarp_coverage  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=50)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--inference", default="statistics", choices=["statistics", "exact"])
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--save", default=None)
    args = parser.parse_args()

    def simulate(rng):
        X, y, theta = make_nig_linear_regression(args.n, args.d, random_state=rng)
        return theta, X, y

    def prior(n, rng):
        # the simulator's NIG prior, for TARP's prior reference points
        sigma2 = 0.5 / rng.gamma(20.0, size=n)
        w = 2.0 * np.sqrt(sigma2)[:, None] * rng.standard_normal((n, args.d + 1))
        return np.column_stack([w, sigma2])

    est = DPBayesianLinearRegression(epsilon=args.epsilon, inference=args.inference)
    start = time.perf_counter()
    study = run_tarp_study(est, simulate, n_simulations=args.k, n_jobs=args.n_jobs,
                           random_state=0)
    seconds = time.perf_counter() - start
    pri = tarp_coverage(study.samples, study.theta_true, references="prior",
                        prior_sampler=prior, random_state=0)
    z = study.z_scores()
    coverage = study.interval_coverage(0.9)
    floor, (lo, hi) = coverage_rmse_floor(args.k, random_state=0)
    print(f"inference={args.inference} d={args.d} N={args.n} epsilon={args.epsilon} "
          f"K={args.k}, {seconds:.0f} s; "
          f"calibrated TARP at this K: {floor:.3f} ({lo:.3f}-{hi:.3f})")
    print(f"  TARP {study.rmse:.3f} (authors' references) / {pri.rmse:.3f} (prior)")
    print(f"  coefficients: z mean {z[:, :-1].mean(0).min():+.2f}..{z[:, :-1].mean(0).max():+.2f},"
          f" z sd {z[:, :-1].std(0).min():.2f}-{z[:, :-1].std(0).max():.2f}, 90 % coverage "
          f"{coverage[:-1].min():.2f}-{coverage[:-1].max():.2f}")
    print(f"  noise variance: z mean {z[:, -1].mean():+.2f}, sd {z[:, -1].std():.2f}, "
          f"90 % coverage {coverage[-1]:.2f}")
    if args.save:
        save(args.save, {"args": vars(args), "seconds": seconds,
                         "floor": [floor, float(lo), float(hi)],
                         "tarp_posterior": float(study.rmse), "tarp_prior": float(pri.rmse),
                         "z_mean": z.mean(0).tolist(), "z_sd": z.std(0).tolist(),
                         "coverage_90": coverage.tolist()})


if __name__ == "__main__":
    main()
