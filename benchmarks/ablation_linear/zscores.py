"""Per-coordinate z-scores of the linear model's default, and variants of the X^T X step.

The quick ablation behind the public-statistics step (results page, "Ablation of the
X^T X step"): K simulated data sets of a Table 2 style configuration, each fitted with
``DPBayesianLinearRegression`` defaults, and the z-scores (posterior mean - truth) /
posterior sd pooled over the coefficients. Variants (one at a time):

- ``--no-known``: the intercept's (X^T X)_pp estimated from the trace like the rest
  (the default before it was fixed at N);
- ``--plugin-offdiagonal``: the off-diagonal of X^T X fixed at its posterior mean
  (conditioning the trace Gaussian), which removes its uncertainty.

Run: python benchmarks/ablation_linear/zscores.py --d 5 --n 1000 --epsilon 0.3 --k 24
"""

import argparse
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from skdpvi import DPBayesianLinearRegression  # noqa: E402
from skdpvi.models import linear_statistics  # noqa: E402
from skdpvi.noise_aware import statistics as stats_module  # noqa: E402


def _plugin_offdiagonal():
    original = stats_module.StatisticsFit.__init__

    def init(self, P, h, shrink_index, shrink_scale, gammas=stats_module.GAMMA_GRID,
             known=None):
        original(self, P, h, shrink_index, shrink_scale, gammas, known)
        index = np.asarray(shrink_index, int)
        if not len(index) or len(self.gammas) < 2:
            return  # the preliminary fits
        keep = np.setdiff1d(np.arange(len(h)), index)
        for g, cov in enumerate(self.covs):
            Cro = cov[np.ix_(keep, index)]
            new = np.zeros_like(cov)
            new[np.ix_(keep, keep)] = (cov[np.ix_(keep, keep)]
                                       - Cro @ np.linalg.pinv(cov[np.ix_(index, index)]) @ Cro.T)
            self.covs[g] = 0.5 * (new + new.T)

    stats_module.StatisticsFit.__init__ = init


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=5)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--epsilon", type=float, default=0.3)
    parser.add_argument("--rho", type=float, default=0.0)
    parser.add_argument("--k", type=int, default=24)
    parser.add_argument("--no-known", action="store_true")
    parser.add_argument("--plugin-offdiagonal", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.no_known:
        linear_statistics.LinearRegressionStatistics.known_statistics = (
            lambda self: (np.zeros(0, int), np.zeros(0)))
    if args.plugin_offdiagonal:
        _plugin_offdiagonal()
    d, n = args.d, args.n
    z = []
    for seed in range(args.k):
        rng = np.random.default_rng(seed + 100)
        var = 0.5 / rng.gamma(20.0)
        theta = rng.normal(0, 2 * np.sqrt(var), d + 1)
        X = (np.sqrt(1 - args.rho) * rng.standard_normal((n, d))
             + np.sqrt(args.rho) * rng.standard_normal((n, 1)))
        y = X @ theta[:-1] + theta[-1] + rng.normal(0, np.sqrt(var), n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = DPBayesianLinearRegression(epsilon=args.epsilon, random_state=seed).fit(X, y)
        draws = est.sample_posterior(4000, random_state=0)
        z.append((draws.mean(0) - np.r_[theta, var]) / draws.std(0))
    z = np.array(z)
    with np.printoptions(precision=2, suppress=True):
        print(f"d={d} N={n} epsilon={args.epsilon} rho={args.rho} K={args.k}"
              f"{' no-known' if args.no_known else ''}"
              f"{' plugin-offdiagonal' if args.plugin_offdiagonal else ''}")
        print("  z sd per coordinate", z.std(0))
        print(f"  coefficients pooled: z mean {z[:, :-1].mean():+.3f}, z sd "
              f"{z[:, :-1].std():.3f}; noise variance: z mean {z[:, -1].mean():+.2f}, "
              f"sd {z[:, -1].std():.2f}")


if __name__ == "__main__":
    main()
