"""Probe: the prior applied once when the DP error grows along the truth's direction.

:mod:`prior_once_synthetic` with a fixed DP error shows the plug-in mixture failing
prior references and the prior applied once passing them. In logistic regression the
likelihood is flattest along the coefficient vector, so the DP error of the released
mode is largest along theta and grows with |theta|. Here the error covariance is
``B diag(0.05 |theta|^2 / 2.5, 0.04, ..., 0.003) B^T`` (B's first column theta's
direction), the likelihood's variance 0.005 in every direction, the prior N(0, I).
The posteriors are given the error covariance at the truth (an oracle: the release's
would be read at its estimate), which is enough to show that the fixed-error
reasoning no longer holds: which posterior prior references accept depends on how
the error varies with theta, not only on its size.

Run: python benchmarks/prior_once_theta_dependent.py
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import machine, save  # noqa: E402
from skdpvi.metrics import tarp_coverage  # noqa: E402
from skdpvi.noise_aware.full_rank import _prior_once  # noqa: E402


def study(seed, n_sim=300, p=7):
    rng = np.random.default_rng(seed)
    refs = rng.standard_normal((n_sim, p))
    thetas, draws = [], {"plug-in": [], "prior once": []}
    A = 0.005 * np.eye(p)
    S = np.linalg.inv(np.linalg.inv(A) + np.eye(p))
    H = np.linalg.inv(S)
    for _ in range(n_sim):
        theta = rng.standard_normal(p)
        B = np.linalg.qr(np.c_[theta, rng.standard_normal((p, p - 1))])[0]
        E = B @ np.diag([0.05 * (theta @ theta) / 2.5, 0.04, 0.02, 0.012, 0.008, 0.005,
                         0.003]) @ B.T
        m = S @ np.linalg.solve(A, theta + rng.multivariate_normal(np.zeros(p), A))
        c = m + rng.multivariate_normal(np.zeros(p), E)
        draws["plug-in"].append(rng.multivariate_normal(c, S + E, size=1000))
        draws["prior once"].append(rng.multivariate_normal(*_prior_once(c, E, H, 1.0),
                                                           size=1000))
        thetas.append(theta)
    thetas = np.array(thetas)
    return {name: (tarp_coverage(np.array(d), thetas, random_state=0).rmse,
                   tarp_coverage(np.array(d), thetas, references=refs, random_state=0).rmse)
            for name, d in draws.items()}


def main():
    results = {}
    for seed in range(3):
        results[seed] = study(seed)
        for name, (a, b) in results[seed].items():
            print(f"seed {seed}  {name:<10} TARP {a:.3f} / {b:.3f}", flush=True)
    save("prior_once_theta_dependent", {"machine": machine(), "results": results})


if __name__ == "__main__":
    main()
