"""Uncentred features: the intercept's z-score against the release's inflation estimate.

The results page's paragraph "The fit now says so" quotes these runs. For each shift,
``--n-rep`` data sets of ``make_nig_linear_regression`` (5,000 rows, the paper's
priors) with every feature (or, with ``--one``, the first) shifted by ``shift`` sds,
fitted with the estimator's defaults; prints the release's intercept variance
inflation (``inference_diagnostics_["intercept_inflation"]``), the intercept's
z-score against the truth, the coefficients' root mean square z and the warnings.
A handful of fits per row, not a study.

Usage (from ``benchmarks/``)::

    python ablation_linear/uncentred.py 0 0.5 1 2 --n-rep 6 --d 5
    python ablation_linear/uncentred.py 0.7 1 --n-rep 4 --d 10
    python ablation_linear/uncentred.py 3 --n-rep 4 --d 5 --one
"""

import argparse
import warnings

import numpy as np

from skdpvi import DPBayesianLinearRegression
from skdpvi.datasets import make_nig_linear_regression


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("shifts", type=float, nargs="+")
    parser.add_argument("--n-rep", type=int, default=4)
    parser.add_argument("--d", type=int, default=5)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--one", action="store_true", help="shift the first feature only")
    args = parser.parse_args()
    d = args.d
    for shift in args.shifts:
        rows = []
        for rep in range(args.n_rep):
            X, y, theta = make_nig_linear_regression(5000, d, random_state=100 + rep)
            offset = np.zeros(d)
            offset[:1 if args.one else d] = shift
            b_true = theta[d] - offset @ theta[:d]  # y is unchanged: the intercept absorbs it
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                est = DPBayesianLinearRegression(epsilon=args.epsilon, random_state=rep)
                est.fit(X + offset, y)
            draws = est._theta_draws
            z_b = (draws[:, d].mean() - b_true) / draws[:, d].std()
            z_w = (draws[:, :d].mean(0) - theta[:d]) / draws[:, :d].std(0)
            inflation = est.inference_diagnostics_.get("intercept_inflation", np.nan)
            names = sorted({type(w.message).__name__ for w in caught})
            rows.append((inflation, z_b, np.sqrt(np.mean(z_w**2))))
            print(f"shift {shift} rep {rep}: inflation {inflation:.2f} z_b {z_b:+.2f} "
                  f"rms z_w {rows[-1][2]:.2f} {names}", flush=True)
        r = np.array(rows)
        print(f"== shift {shift}: inflation {r[:, 0].min():.2f}-{r[:, 0].max():.2f}, intercept "
              f"z rms {np.sqrt(np.mean(r[:, 1] ** 2)):.2f} (mean {r[:, 1].mean():+.2f}), "
              f"coefficients' rms z {r[:, 2].mean():.2f}", flush=True)


if __name__ == "__main__":
    main()
