"""Nearly duplicate features in the linear default: are its intervals still right?
(thirty-second session)

The logistic default is confidently wrong when two features are nearly collinear (the
results page, "Nearly collinear features"); the linear estimator does not take that
design check because its posterior reads X^T X off the release. This runs the linear
default through :func:`~skdpvi.metrics.run_tarp_study` on 4 features of which the
first two have correlation rho (coefficients, intercept and noise variance from the
default NIG prior), 2,000 rows, epsilon 1, and prints the z-scores' sds, the 90 %
coverage and the TARP RMSE per rho (``results/linear_collinear_pair.json``). Run from
``benchmarks/``::

    python ablation_linear/collinear_pair.py --k 40
"""

import argparse
import json
import os
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


class Simulator:
    """The default NIG prior (InvGamma(20, 0.5), weights N(0, 4 sigma^2)); the second
    feature ``rho x_0 + sqrt(1 - rho^2) e``."""

    def __init__(self, rho, n):
        self.rho, self.n = rho, n

    def __call__(self, rng):
        sigma2 = 0.5 / rng.gamma(20.0)
        w = rng.normal(0, 2 * np.sqrt(sigma2), 5)
        X = rng.standard_normal((self.n, 4))
        X[:, 1] = self.rho * X[:, 0] + np.sqrt(1 - self.rho**2) * X[:, 1]
        y = X @ w[:4] + w[4] + rng.normal(0, np.sqrt(sigma2), self.n)
        return np.r_[w, sigma2], X, y


def main():
    from skdpvi import DPBayesianLinearRegression
    from skdpvi.metrics import run_tarp_study

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=40)
    parser.add_argument("--rho", type=float, nargs="+", default=[0.98, 0.999])
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
    payload = {}
    for rho in args.rho:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study = run_tarp_study(DPBayesianLinearRegression(epsilon=1.0), Simulator(rho, 2000),
                                   n_simulations=args.k, n_draws=2000, n_jobs=args.n_jobs,
                                   random_state=7)
        z = study.z_scores()
        payload[str(rho)] = {"z_sd": z.std(0).tolist(), "z_mean": z.mean(0).tolist(),
                             "coverage_90": study.interval_coverage(0.9).tolist(),
                             "tarp_rmse": float(study.rmse), "k": args.k}
        print(rho, "z sd", z.std(0).round(2), "coverage 90", study.interval_coverage(0.9).round(2),
              "TARP", round(study.rmse, 3), flush=True)
    with open(os.path.join(os.path.dirname(HERE), "results", "linear_collinear_pair.json"), "w") as f:
        json.dump(payload, f, indent=1)


if __name__ == "__main__":
    main()
