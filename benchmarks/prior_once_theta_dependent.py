"""Probe: the prior applied once when the DP error grows along the truth's direction.

:mod:`prior_once_synthetic` with a fixed DP error shows the plug-in mixture failing
prior references and the prior applied once passing them. In logistic regression the
likelihood is flattest along the coefficient vector, so the DP error of the released
mode is largest along theta and grows with |theta|. Here the error covariance is
``E(theta) = B diag(0.05 |theta|^2 / 2.5, 0.04, ..., 0.003) B^T`` (B's first column
theta's direction), the likelihood's variance 0.005 in every direction, the prior
N(0, I). Three posteriors of the release c:

- *plug-in* and *prior once* with the error read at the estimate, ``E(c)`` (as a
  release reads its curvature where it ended, not at the truth);
- *exact*: ``p(theta | c)`` with ``c | theta ~ N(S A^-1 theta, S A^-1 S + E(theta))``,
  by importance resampling (4,000 proposals from the plug-in widened 1.5 times).

``--oracle`` gives the first two ``E(theta)`` instead (the truth's error).

Run: python benchmarks/prior_once_theta_dependent.py [--oracle]
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import machine, save  # noqa: E402
from skdpvi.metrics import tarp_coverage  # noqa: E402
from skdpvi.noise_aware.full_rank import _prior_once  # noqa: E402


def _error(v, rng_unused=None):
    """E at the point v: its largest variance along v, growing with |v|^2."""
    p = len(v)
    B = np.linalg.qr(np.c_[v, np.eye(p)[:, :p - 1]])[0]
    return B @ np.diag([0.05 * (v @ v) / 2.5, 0.04, 0.02, 0.012, 0.008, 0.005, 0.003][:p]) @ B.T


def _log_normal(x, mean, cov):
    diff = x - mean
    sign, logdet = np.linalg.slogdet(cov)
    return -0.5 * (diff @ np.linalg.solve(cov, diff) + logdet)


def study(seed, n_sim=300, p=7, oracle=False):
    rng = np.random.default_rng(seed)
    refs = rng.standard_normal((n_sim, p))
    thetas, draws = [], {"plug-in": [], "prior once": [], "exact": []}
    A = 0.005 * np.eye(p)
    S = np.linalg.inv(np.linalg.inv(A) + np.eye(p))
    H = np.linalg.inv(S)
    gain = S @ np.linalg.inv(A)
    for _ in range(n_sim):
        theta = rng.standard_normal(p)
        m = gain @ (theta + rng.multivariate_normal(np.zeros(p), A))
        c = m + rng.multivariate_normal(np.zeros(p), _error(theta))
        E = _error(theta if oracle else c)
        draws["plug-in"].append(rng.multivariate_normal(c, S + E, size=1000))
        draws["prior once"].append(rng.multivariate_normal(*_prior_once(c, E, H, 1.0),
                                                           size=1000))
        proposal = rng.multivariate_normal(c, 2.25 * (S + E), size=4000)
        log_q = np.array([_log_normal(t, c, 2.25 * (S + E)) for t in proposal])
        log_p = np.array([_log_normal(c, gain @ t, gain @ A @ gain.T + _error(t))
                          - 0.5 * t @ t for t in proposal])
        w = np.exp(log_p - log_q - np.max(log_p - log_q))
        draws["exact"].append(proposal[rng.choice(4000, size=1000, p=w / w.sum())])
        thetas.append(theta)
    thetas = np.array(thetas)
    return {name: (tarp_coverage(np.array(d), thetas, random_state=0).rmse,
                   tarp_coverage(np.array(d), thetas, references=refs, random_state=0).rmse)
            for name, d in draws.items()}


def main():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oracle", action="store_true")
    parser.add_argument("--n-sim", type=int, default=300)
    args = parser.parse_args()
    results = {}
    for seed in range(3):
        results[seed] = study(seed, args.n_sim, oracle=args.oracle)
        for name, (a, b) in results[seed].items():
            print(f"seed {seed}  {name:<10} TARP {a:.3f} / {b:.3f}", flush=True)
    save("prior_once_theta_dependent" + ("_oracle" if args.oracle else ""),
         {"machine": machine(), "args": vars(args), "results": results})


if __name__ == "__main__":
    main()
