"""The wander's Jensen bias of logistic regression: the probit estimate against the truth.

Per simulated data set (the designs of ``designs.py``, the estimator's settings, one
DP-SGD run each, the trace recorded):

- the shift of the means' optimum that :func:`skdpvi.noise_aware.logistic_wander_width`
  and :func:`~skdpvi.noise_aware.remove_wander_bias` read off the release (``probit``),
  against the first-order shift ``H^-1 b`` computed from the private data
  (``b = 1/2 sum_i E_q[sigma''_i] x_i^T S x_i x_i`` at the trace mean, S the means'
  sample covariance over the window: the oracle), both along the true coefficient
  vector in units of the posterior sd ``(u^T H u)^-1/2``, with their cosine and
  norm ratio;
- the lag (``--lag``): the trace's position along its mean direction in the four
  quarters of the recording window, and the asymptote of an exponential relaxation
  fitted to the whole trace (burn-in included) against the window mean and against
  the gradient model's extrapolation (emcee's phi* mean), in sds of emcee's phi*.

Run: python benchmarks/ablation_logistic/wander_bias.py --design gaussian --d 20 \
         --n 10000 --epsilon 1 --k 6 [--lag]
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
from scipy.optimize import curve_fit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import designs  # noqa: E402
from _common import _engine_settings  # noqa: E402
from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.dpvi import run_dpvi_batched  # noqa: E402
from skdpvi.noise_aware import (logistic_wander_width, remove_wander_bias,  # noqa: E402
                                sample_phi_star)

NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(32)
WEIGHTS = WEIGHTS / WEIGHTS.sum()


def oracle_shift(X, y, mean, scale, S, tau2):
    """H^-1 b from the private data (first order in S, at the trace mean)."""
    Xa = np.column_stack([X, np.ones(len(X))])
    m, v = Xa @ mean, (Xa**2) @ scale**2
    s = 1 / (1 + np.exp(-(m[:, None] + np.sqrt(v)[:, None] * NODES)))
    d1 = (s * (1 - s)) @ WEIGHTS
    d2 = (s * (1 - s) * (1 - 2 * s)) @ WEIGHTS
    w = np.einsum("ij,jk,ik->i", Xa, S, Xa)
    H = (Xa * d1[:, None]).T @ Xa + np.eye(len(mean)) / tau2
    return np.linalg.solve(H, 0.5 * Xa.T @ (d2 * w)), H


def relaxation_lag(result, p, emcee_mean, sd):
    """Quarters of the window and the fitted asymptote along the trace's mean direction."""
    trace = np.asarray(result.trace_phi, float)[:, :p]
    burn = result.burn_in
    v = trace[burn:].mean(0)
    v /= np.linalg.norm(v)
    r = trace @ v
    window = r[burn:]
    quarters = [q.mean() for q in np.array_split(window, 4)]
    block = 50
    t = np.arange(len(r) // block * block).reshape(-1, block).mean(1)
    rb = r[: len(t) * block].reshape(-1, block).mean(1)
    keep = t > 100
    try:
        (a, _, lam), _ = curve_fit(lambda t, a, b, lam: a - b * np.exp(-lam * t), t[keep],
                                   rb[keep], p0=[rb[-1], rb[-1] - rb[keep][0], 1e-3],
                                   maxfev=20000)
    except RuntimeError:
        a, lam = np.nan, np.nan
    wmean = window.mean()
    return {"quarters": [(q - wmean) / sd for q in quarters],
            "relaxations_in_run": lam * len(r), "lag": (a - wmean) / sd,
            "extrapolated": (emcee_mean @ v - wmean) / sd}


def main():
    parser = designs.design_arguments(
        argparse.ArgumentParser(description=__doc__.splitlines()[0]), k=6)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--lag", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    simulate, model, n = designs.design_of(args)
    p, tau2 = model.n_params, model.prior_scale**2
    settings = _engine_settings(
        model, epsilon=args.epsilon, clip_norm=2.0 * math.sqrt(p), n_steps=10_000,
        sampling_rate=0.1, delta=1e-5, burn_in=0.2, preconditioner=None,
        learning_rate_scale=DPBayesianLogisticRegression._default_learning_rate_scale(2 * p),
        n_examples=n, record_trace=True)
    seeds = list(range(args.seed, args.seed + args.k))
    sims = [simulate(np.random.default_rng(s)) for s in seeds]
    runs = run_dpvi_batched(model, [(X, y) for X, y, _ in sims], random_states=seeds,
                            **settings)
    ratios = []
    for (X, y, theta), r in zip(sims, runs):
        trace = np.asarray(r.trace_phi[r.burn_in:-1], float)
        mean, scale = trace[:, :p].mean(0), np.logaddexp(0, trace[:, p:].mean(0))
        oracle, H = oracle_shift(X, y, mean, scale, np.cov(trace[:, :p].T), tau2)
        width = logistic_wander_width(r.stats, n_means=p, sampling_rate=r.sampling_rate,
                                      prior_scale=model.prior_scale)
        probit = remove_wander_bias(mean[None], width, prior_scale=model.prior_scale,
                                    covariance=np.linalg.inv(H))[0] - mean
        u = theta / np.linalg.norm(theta)
        sd = 1 / math.sqrt(u @ H @ u)
        ratio = np.linalg.norm(probit) / np.linalg.norm(oracle)
        ratios.append(ratio)
        line = (f"w {width:.3f}  radial shift "
                f"(posterior sds): probit {probit @ u / sd:+.2f}, oracle {oracle @ u / sd:+.2f}"
                f"  cosine {probit @ oracle / np.linalg.norm(probit) / np.linalg.norm(oracle):+.2f}"
                f"  norm ratio {ratio:.2f}")
        if args.lag:
            phi, _ = sample_phi_star(r, "emcee", 1000, random_state=0, check=False)
            sd_phi = (phi[:, :p] @ u).std()
            lag = relaxation_lag(r, p, phi[:, :p].mean(0), sd_phi)
            line += ("\n    window quarters (phi* sds from the window mean): "
                     + " ".join(f"{q:+.2f}" for q in lag["quarters"])
                     + f"; relaxations in the run {lag['relaxations_in_run']:.1f}, fitted "
                       f"asymptote {lag['lag']:+.2f}, gradient model's extrapolation "
                       f"{lag['extrapolated']:+.2f}")
        print(line)
    print(f"norm ratio probit / oracle: median {np.median(ratios):.2f}, "
          f"range {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    main()
