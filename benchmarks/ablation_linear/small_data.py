"""Few rows for the budget: which public statistic says a linear fit's intervals are
too narrow? (thirty-second session)

The linear estimator's few-relaxations warning reads the window's relaxation count off
the release, and with a few dozen rows that reading is itself noise (a new user's
probe: 20 rows, 3 features, epsilon 1, coefficient z-scores 3-7, a read count of
about 750, no warning). This script fits the default ``DPBayesianLinearRegression`` K
times per cell of a grid of rows, epsilon and features, on data drawn from its own
default prior (:func:`~skdpvi.datasets.make_nig_linear_regression`), and records per
fit the z-scores of the coefficients, the intercept and the noise variance against the
truth (2,000 posterior draws) and the posterior's noise-variance quantiles, through
:func:`~skdpvi.metrics.run_tarp_study` (lockstep DP-SGD), and the public ratio
``sampling_rate * n_samples / noise_multiplier`` (``ratio``; ``batch_over_noise``
divides it by sqrt(p), p the coefficients with the intercept, as the estimator's
check does; no data read). It prints per cell the z-scores' root mean square and the
90 % coverage.

Results: doc/results.rst, "Few rows for the budget, and a noise prior the data
contradict (thirty-second session)". Run from ``benchmarks/``::

    python ablation_linear/small_data.py --k 40
"""

import argparse
import json
import os
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
#: (n_features, n_rows, epsilon)
CELLS = ([(3, n, 0.3) for n in (20, 100, 400)] + [(3, n, 1.0) for n in (20, 50, 100, 200, 400)]
         + [(3, n, 3.0) for n in (20, 50, 100)] + [(8, 100, 1.0), (8, 400, 0.3), (8, 400, 1.0)])


class Simulator:
    """Data from the estimator's default prior: ``make_nig_linear_regression(n, d)``."""

    def __init__(self, n, d):
        self.n, self.d = n, d

    def __call__(self, rng):
        from skdpvi.datasets import make_nig_linear_regression

        X, y, theta = make_nig_linear_regression(self.n, self.d, random_state=rng)
        return theta, X, y


def cell(d, n, eps, k, n_jobs):
    """Through the public study API (lockstep DP-SGD): z-scores per simulation."""
    from skdpvi import DPBayesianLinearRegression
    from skdpvi.metrics import run_tarp_study

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = run_tarp_study(DPBayesianLinearRegression(epsilon=eps), Simulator(n, d),
                               n_simulations=k, n_draws=2000, n_jobs=n_jobs,
                               random_state=20_000 + n + int(100 * eps) + d)
    draws, theta = study.samples, study.theta_true
    z = (draws.mean(1) - theta) / draws.std(1)
    noise = np.quantile(draws[:, :, -1], [0.05, 0.5, 0.95], axis=1).T
    return z, noise, theta


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=40)
    parser.add_argument("--features", type=int, nargs="+", default=None,
                        help="only the cells with these numbers of features")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "results",
                                                      "linear_small_data.json"))
    args = parser.parse_args()
    payload = {}
    if os.path.exists(args.out):  # add to the cells run before
        with open(args.out) as f:
            payload = json.load(f)
    for d, n, eps in CELLS:
        if args.features and d not in args.features:
            continue
        from skdpvi import DPBayesianLinearRegression
        from skdpvi.accounting import noise_multiplier as calibrate

        est = DPBayesianLinearRegression(epsilon=eps)  # its defaults: delta, q, T
        noise_multiplier = calibrate(eps, est.delta, est.sampling_rate, est.max_iter)[0]
        z, noise, theta = cell(d, n, eps, args.k, args.n_jobs)
        coef = z[:, :d + 1]
        ratio = est.sampling_rate * n / noise_multiplier
        key = f"d{d}_n{n}_eps{eps:g}"
        payload[key] = {"ratio": ratio, "batch_over_noise": ratio / np.sqrt(d + 1),
                        "z": z.tolist(), "noise_quantiles": noise.tolist(),
                        "noise_truth": theta[:, -1].tolist(),
                        "coef_z_rms": float(np.sqrt(np.mean(coef**2))),
                        "noise_z_rms": float(np.sqrt(np.mean(z[:, -1]**2))),
                        "coverage_90": float(np.mean(np.abs(coef) < 1.645))}
        print(f"{key:<18} ratio {ratio:7.3f} (over sqrt(p) {ratio / np.sqrt(d + 1):.3f})  coef z rms {payload[key]['coef_z_rms']:.2f}  "
              f"noise z rms {payload[key]['noise_z_rms']:.2f}  90% cov "
              f"{payload[key]['coverage_90']:.2f}", flush=True)
        with open(args.out, "w") as f:
            json.dump(payload, f)


if __name__ == "__main__":
    main()
