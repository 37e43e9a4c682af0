"""Probes of the linear default on configurations no benchmark was tuned to.

Each probe is one TARP study through the public API (:func:`skdpvi.metrics.run_tarp_study`,
K simulations, ``unconstrained=True``), the estimator at its defaults unless
``--param`` sets one, and reports TARP with the authors' and with prior references
(in the unconstrained space: the noise variance as ``softplus^-1``) beside the
calibrated range at this K, and the per-coordinate z-scores (the noise variance
last). The results page's "Generalisation probes" quotes them.

Configurations (``y = X w + b + N(0, sigma^2)``, ``sigma^2 ~ InvGamma(shape, scale)``,
``(w, b) | sigma^2 ~ N(0, (ws sigma)^2)``; features N(0, 1) unless said):

- ``scales``: 5 features with standard deviations 1, 10, 0.1, 1, 3 (unscaled data);
- ``scale3`` / ``scale0.3``: the second of 5 features with sd 3 / 0.3, the others 1;
- ``prior0.5``: 5 features, N = 2,000, weight prior scale 0.5;
- ``small``: 3 features, N = 500;
- ``shift1`` / ``shift2``: 5 features with mean 1 / 2 (uncentred, intercept inflation 6 /
  21);
- ``d30``: 30 features, equicorrelation 0.3, N = 10,000;
- ``noise_vague``: 4 features, N = 3,000, a vague noise prior InvGamma(3, 2);
- ``n30k`` / ``n100k``: the paper's 10 features and priors with N = 30,000 / 100,000
  (the means' relaxation rate per step grows with N);
- ``n50k_rho0.9``: 10 features with equicorrelation 0.9, N = 50,000;
- ``d30_rho0.9_n20k``: 30 features with equicorrelation 0.9, N = 20,000 (more than 20
  features: no step matrix);
- ``onehot``: 3 Gaussian features and a one-hot block of 4 categories beside the
  intercept, N = 5,000 (the likelihood is flat along the block-up, intercept-down
  direction; its z-score is printed as ``flat``);
- ``unif01`` / ``unif01_centred``: 5 features uniform on [0, 1] (min-max scaled with
  public bounds), as they are / centred at the public 0.5, N = 5,000.

Usage (from ``benchmarks/``)::

    python ablation_linear/probes.py scales 1 --k 100
    python ablation_linear/probes.py d30 1 --k 60 --param learning_rate_scale=2.5
"""

import argparse
import json
import os
import time
import warnings

import numpy as np

from skdpvi import DPBayesianLinearRegression
from skdpvi.metrics import coverage_rmse_floor, run_tarp_study, tarp_coverage


class Simulator:
    """theta = (w, b, sigma^2) from the prior, then (X, y); picklable for joblib."""

    def __init__(self, n, d, *, scales=None, shift=0.0, weight_scale=2.0, shape=20.0,
                 scale=0.5, rho=0.0, categories=0, uniform=False):
        self.n, self.d, self.shift, self.rho = n, d, shift, rho
        self.uniform = uniform  # features U(0, 1) (then shifted) instead of N(0, 1)
        self.categories = categories  # a one-hot block of this many last columns
        self.scales = np.ones(d) if scales is None else np.asarray(scales, float)
        self.weight_scale, self.shape, self.scale = weight_scale, shape, scale

    def __call__(self, rng):
        var = 1.0 / rng.gamma(self.shape, 1.0 / self.scale)
        w = rng.normal(0.0, self.weight_scale * np.sqrt(var), self.d + 1)
        z = rng.standard_normal((self.n, self.d))
        X = np.sqrt(1 - self.rho) * z + np.sqrt(self.rho) * rng.standard_normal((self.n, 1))
        if self.uniform:
            X = rng.random((self.n, self.d))
        X = X * self.scales + self.shift
        if self.categories:
            X[:, -self.categories:] = np.eye(self.categories)[
                rng.integers(self.categories, size=self.n)]
        y = X @ w[:-1] + w[-1] + rng.normal(0.0, np.sqrt(var), self.n)
        return np.r_[w, var], X, y

    def prior_unconstrained(self, n, rng):
        """Prior draws with the noise variance as softplus^-1 (the estimator's space)."""
        var = 1.0 / rng.gamma(self.shape, 1.0 / self.scale, n)
        w = rng.standard_normal((n, self.d + 1)) * self.weight_scale * np.sqrt(var)[:, None]
        return np.column_stack([w, np.log(np.expm1(var))])


#: name -> (simulator, estimator parameters that match its prior)
CONFIGS = {
    "scales": (Simulator(5000, 5, scales=[1, 10, 0.1, 1, 3]), {}),
    "scale3": (Simulator(5000, 5, scales=[1, 3, 1, 1, 1]), {}),
    "scale0.3": (Simulator(5000, 5, scales=[1, 0.3, 1, 1, 1]), {}),
    "prior0.5": (Simulator(2000, 5, weight_scale=0.5), dict(prior_weight_scale=0.5)),
    "small": (Simulator(500, 3), {}),
    "shift1": (Simulator(5000, 5, shift=1.0), {}),
    "shift2": (Simulator(5000, 5, shift=2.0), {}),
    "d30": (Simulator(10000, 30, rho=0.3), {}),
    "n100k": (Simulator(100_000, 10), {}),
    "n30k": (Simulator(30_000, 10), {}),
    "n50k_rho0.9": (Simulator(50_000, 10, rho=0.9), {}),
    "d30_rho0.9_n20k": (Simulator(20_000, 30, rho=0.9), {}),
    "onehot": (Simulator(5000, 7, categories=4), {}),
    "unif01": (Simulator(5000, 5, uniform=True), {}),
    "unif01_centred": (Simulator(5000, 5, uniform=True, shift=-0.5), {}),
    "noise_vague": (Simulator(3000, 4, shape=3.0, scale=2.0),
                    dict(prior_noise_shape=3.0, prior_noise_scale=2.0)),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", choices=sorted(CONFIGS))
    parser.add_argument("epsilon", type=float)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--param", action="append", default=[],
                        help="an estimator parameter, name=value (value read as JSON)")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--save", default=None, help="an .npz for the draws and the truth")
    args = parser.parse_args()
    simulator, params = CONFIGS[args.config]
    for item in args.param:
        key, value = item.split("=", 1)
        params = dict(params, **{key: json.loads(value)})
    est = DPBayesianLinearRegression(epsilon=args.epsilon, **params)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = run_tarp_study(est, simulator, n_simulations=args.k, n_jobs=args.n_jobs,
                               random_state=0, unconstrained=True)
    draws, theta = study.samples, study.theta_true
    prior = tarp_coverage(draws, theta, references="prior",
                          prior_sampler=simulator.prior_unconstrained, random_state=0)
    floor, (low, high) = coverage_rmse_floor(args.k, random_state=0)
    z = (draws.mean(1) - theta) / draws.std(1)
    print(f"{args.config}, epsilon {args.epsilon}, K = {args.k}, {params} "
          f"({time.perf_counter() - start:.0f} s)")
    print(f"  TARP authors' refs {study.tarp.rmse:.3f}, prior refs {prior.rmse:.3f} "
          f"(calibrated: {floor:.3f}, 90 % {low:.3f}-{high:.3f})")
    with np.printoptions(precision=2, suppress=True, linewidth=120):
        print(f"  z mean {z.mean(0)}\n  z sd   {z.std(0)}")
        if simulator.categories:  # the flat direction: the block up, the intercept down
            v = np.zeros(theta.shape[1])
            v[simulator.d - simulator.categories:simulator.d] = 1.0
            v[simulator.d] = -1.0
            along = draws @ v
            zf = (along.mean(1) - theta @ v) / along.std(1)
            print(f"  flat direction: z mean {zf.mean():.2f}, sd {zf.std():.2f}")
    if args.save:
        np.savez(os.path.expanduser(args.save), draws=draws, theta=theta)


if __name__ == "__main__":
    main()
