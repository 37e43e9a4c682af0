"""Probe: where a hold-out design's joint miscalibration sits, in the posterior's own eigen-directions.

Runs the default estimator of one ``holdout_public_api.py`` design through
:func:`skdpvi.metrics.run_tarp_study` (its simulator, its prior) and, per simulation,
expresses the truth's error in the eigenbasis of the posterior draws' covariance
(narrowest direction first), in posterior sds. Over the simulations it reports the
root mean square of that z per eigen-rank (1 is calibrated; above 1 the posterior is
too narrow along that rank's directions), the 90 % ellipsoid coverage, and the same
z root mean square for the coefficients alone (the noise variance left out, linear
designs), whose joint shape the statistics posterior takes from its estimate of
X^T X.

Run: python benchmarks/holdout_eigen_directions.py lin_d25_toep05_n10000_e1 --n-sim 64
"""

import argparse
import time

import numpy as np
import torch

from _common import machine, save
from holdout_public_api import DESIGNS, PriorSampler, Simulator, estimator
from skdpvi.metrics import ellipsoid_coverage, run_tarp_study


def eigen_z(samples, theta):
    """(K, p) truth errors in posterior sds along each simulation's eigen-directions,
    narrowest first."""
    out = []
    for draws, truth in zip(samples, theta):
        mean = draws.mean(0)
        lam, V = np.linalg.eigh(np.cov(draws, rowvar=False))
        out.append(V.T @ (truth - mean) / np.sqrt(lam))
    return np.array(out)


def summary(samples, theta):
    z = eigen_z(samples, theta)
    rms = np.sqrt((z**2).mean(0))
    # the truth's squared Mahalanobis distance over the draws' own 90 % quantile: at
    # most 1 where the ellipsoid covers it; its spread over the simulations says
    # whether misses come from a direction (all too far) or from single simulations
    ratio = []
    for draws, truth in zip(samples, theta):
        mean, cov = draws.mean(0), np.cov(draws, rowvar=False)
        inv = np.linalg.inv(cov)
        d2 = np.einsum("ki,ij,kj->k", draws - mean, inv, draws - mean)
        ratio.append(float((truth - mean) @ inv @ (truth - mean) / np.quantile(d2, 0.9)))
    ratio = np.array(ratio)
    return {"eigen_z_rms": rms.tolist(), "ellipsoid_90": ellipsoid_coverage(samples, theta, 0.9),
            "distance_ratio_quantiles": np.quantile(ratio, [0.1, 0.5, 0.9, 0.99]).tolist()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("design", choices=list(DESIGNS))
    parser.add_argument("--n-sim", type=int, default=64)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--set", nargs="*", default=[], help="estimator params, k=v")
    args = parser.parse_args()
    torch.set_num_threads(1)
    est = estimator(args.design)
    extra = {}
    for item in args.set:
        key, value = item.split("=", 1)
        extra[key] = eval(value)
    est.set_params(**extra)
    start = time.perf_counter()
    res = run_tarp_study(est, Simulator(args.design), n_simulations=args.n_sim,
                         n_draws=2000, references="prior",
                         prior_sampler=PriorSampler(args.design), unconstrained=True,
                         n_jobs=args.n_jobs, random_state=args.seed)
    samples, theta = np.asarray(res.samples, float), np.asarray(res.theta_true, float)
    rows = {"all": summary(samples, theta)}
    if DESIGNS[args.design][0] == "linear":
        rows["coefficients"] = summary(samples[:, :, :-1], theta[:, :-1])
    for label, row in rows.items():
        r = np.array(row["eigen_z_rms"])
        print(f"{args.design} {extra} [{label}] ellipsoids {row['ellipsoid_90']:.2f}; eigen-z rms "
              f"narrowest 5: {np.round(r[:5], 2).tolist()}, widest 5: "
              f"{np.round(r[-5:], 2).tolist()}; truth's distance / draws' 90 % quantile, "
              f"quantiles 10/50/90/99 %: {np.round(row['distance_ratio_quantiles'], 2).tolist()}",
              flush=True)
    save(f"holdout_eigen_directions_{args.design}" + "".join(f"_{k}" for k in extra),
         {"machine": machine(), "args": vars(args), "tarp_prior": res.rmse,
          "seconds": time.perf_counter() - start, **rows})


if __name__ == "__main__":
    main()
