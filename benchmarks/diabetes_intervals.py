"""Small real data: 90 % predictive intervals on scikit-learn's diabetes data.

442 rows, 10 features; each of ``--n-splits`` random 75/25 splits fits on about 330
rows. Public scalings only (no statistic of the private rows): scikit-learn ships the
features scaled to unit L2 norm per column, so ``X * sqrt(442)`` has unit variance by
construction, and the target's documented range [25, 346] is mapped to [-1, 1]. The
noise prior follows the user guide's recipe from a guess of the residual sd made
without the data: half the target's range, s0 = 0.5, with shape 3 (a rough guess), so
``prior_noise_scale = s0**2 * (3 - 1) = 0.5``. ``BayesianRidge`` (no privacy) is the
reference. delta = 1e-4 (< 1 / 330).

Run: python benchmarks/diabetes_intervals.py --n-splits 10
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import BayesianRidge
from sklearn.model_selection import train_test_split

from _common import machine, save
from skdpvi import DPBayesianLinearRegression


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-splits", type=int, default=10)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 3.0])
    args = parser.parse_args()
    X, y = load_diabetes(return_X_y=True)
    X = X * np.sqrt(len(X))
    y = (y - 185.5) / 160.5
    rows = {"bayesian_ridge": []}
    for split in range(args.n_splits):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=split)
        br = BayesianRidge().fit(Xtr, ytr)
        mean, sd = br.predict(Xte, return_std=True)
        rows["bayesian_ridge"].append(
            {"coverage": float(np.mean(np.abs(yte - mean) <= 1.645 * sd)),
             "width": float(2 * 1.645 * sd.mean())})
        for eps in args.epsilons:
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                reg = DPBayesianLinearRegression(epsilon=eps, delta=1e-4, prior_noise_shape=3.0,
                                                 prior_noise_scale=0.5, random_state=split)
                reg.fit(Xtr, ytr)
            draws = reg.sample_y(Xte, 2000, random_state=0)
            lo, hi = np.quantile(draws, [0.05, 0.95], axis=1)
            rows.setdefault(str(eps), []).append(
                {"coverage": float(np.mean((yte >= lo) & (yte <= hi))),
                 "width": float(np.mean(hi - lo)), "seconds": time.perf_counter() - start,
                 "warnings": sorted({w.category.__name__ for w in caught})})
            print(split, eps, rows[str(eps)][-1], flush=True)
    summary = {}
    for key, values in rows.items():
        cov = np.array([v["coverage"] for v in values])
        width = np.array([v["width"] for v in values])
        summary[key] = {"coverage_mean": float(cov.mean()), "coverage_min": float(cov.min()),
                        "coverage_max": float(cov.max()), "width_mean": float(width.mean())}
        print(f"{key:>15}: 90 % interval coverage {cov.mean():.3f} (splits {cov.min():.3f}-"
              f"{cov.max():.3f}), mean width {width.mean():.3f} (target range 2)")
    save("diabetes_intervals", {"machine": machine(), "n_splits": args.n_splits,
                                "rows": rows, "summary": summary})


if __name__ == "__main__":
    main()
