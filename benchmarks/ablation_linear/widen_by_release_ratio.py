"""Offline evaluation of a repair for the small-data over-confidence (not in the package).

The statistics posterior reads the curvature X^T X too large where the recording
window holds few relaxations (results page, "Small data at small epsilon"), so its
optimum's spread is too narrow by about the factor r = (the release's relaxation
count, from the posterior mean of X^T X) / (the scale rows' count,
``inference_diagnostics_["window_relaxations"]``). This script fits K simulations of
``feedback_bias.simulate`` (the paper's priors) with the default estimator, scales the
coefficient draws of each fit about their mean by r (capped at 5; only where the
scale rows' count is below 25, the warning's threshold) and scores both posteriors
with TARP (authors' and prior references, 200 bootstrap replicates) and per-parameter
90 % coverage, in the unconstrained space (log noise variance).

Run from ``benchmarks/``:
python ablation_linear/widen_by_release_ratio.py --d 10 --n 300 --epsilon 0.3 --k 120
"""

import argparse
import json
import os
import sys
import warnings

import numpy as np
import torch
from joblib import Parallel, delayed

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

#: the repair's cap on r and the count below which it acts
CAP, BELOW = 5.0, 25.0


def one(seed, d, n, epsilon):
    from feedback_bias import simulate
    from relaxation_grid import release_relaxations
    from skdpvi import DPBayesianLinearRegression

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    X, y, theta, var = simulate(seed, d, n)
    est = DPBayesianLinearRegression(epsilon=epsilon, random_state=seed).fit(X, y)
    draws = est.sample_posterior(2000, random_state=0)
    inv_var = np.mean(1 / draws[:, -1])
    release = float(np.median(release_relaxations(est, est.dpvi_result_, inv_var)[0]))
    scale_rows = est.inference_diagnostics_["window_relaxations"]
    r = CAP if scale_rows <= 0 else min(max(release / scale_rows, 1.0), CAP)
    if scale_rows >= BELOW:
        r = 1.0
    u = np.column_stack([draws[:, :-1], np.log(draws[:, -1])])
    mean = u[:, :-1].mean(0)
    repaired = u.copy()
    repaired[:, :-1] = mean + r * (u[:, :-1] - mean)
    return u, repaired, np.r_[theta, np.log(var)], r


def main():
    from skdpvi.metrics import interval_coverage, tarp_coverage

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--epsilon", type=float, default=0.3)
    parser.add_argument("--k", type=int, default=120)
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
    d = args.d
    out = Parallel(n_jobs=args.n_jobs)(delayed(one)(s, d, args.n, args.epsilon)
                                       for s in range(args.k))
    truth = np.stack([o[2] for o in out])

    def prior(n, rng):  # the paper's priors, unconstrained
        v = 0.5 / rng.gamma(20.0, size=n)
        return np.column_stack([rng.normal(0, 1, (n, d + 1)) * 2 * np.sqrt(v)[:, None],
                                np.log(v)])

    payload = dict(d=d, n=args.n, epsilon=args.epsilon, k=args.k,
                   r=[float(o[3]) for o in out])
    for name, k in (("default", 0), ("repaired", 1)):
        samples = np.stack([o[k] for o in out])
        a = tarp_coverage(samples, truth, references="posterior", n_bootstrap=200,
                          random_state=1)
        b = tarp_coverage(samples, truth, references="prior", prior_sampler=prior,
                          n_bootstrap=200, random_state=1)
        coverage = interval_coverage(samples, truth, level=0.9)
        payload[name] = dict(tarp_posterior=float(a.rmse), tarp_posterior_se=float(a.rmse_se),
                             tarp_prior=float(b.rmse), tarp_prior_se=float(b.rmse_se),
                             coverage=[float(c) for c in coverage])
        print(f"{name}: TARP {a.rmse:.3f} +- {a.rmse_se:.3f} / {b.rmse:.3f} +- "
              f"{b.rmse_se:.3f}, coefficients' 90 % coverage {coverage[:-1].min():.2f}-"
              f"{coverage[:-1].max():.2f}, noise variance {coverage[-1]:.2f}", flush=True)
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results",
                        f"widen_by_release_ratio_d{d}_n{args.n}_eps{args.epsilon:g}.json")
    with open(path, "w") as fh:
        json.dump(payload, fh, indent=1)


if __name__ == "__main__":
    main()
