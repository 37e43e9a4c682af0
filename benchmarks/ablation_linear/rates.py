"""The means' relaxation rate per step at the linear estimator's settings.

DP-SGD's step along a direction of curvature h moves the means by the fraction
``lambda kappa h`` of their distance to the optimum; above 2 the plain step diverges.
For each configuration (one simulation, the true X^T X and noise variance) this
prints the range of the plain per-coordinate rates and of the eigen-rates of the
means' block with the correlation step matrix (before the rate cap), and the largest
after :func:`skdpvi.noise_aware.rate_cap`. The results page's "A cap on the
relaxation rate" quotes it.

Usage (from ``benchmarks/``)::

    python ablation_linear/rates.py
"""

import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import table2_linear  # noqa: E402
from probes import CONFIGS as PROBES  # noqa: E402

from skdpvi import DPBayesianLinearRegression  # noqa: E402
from skdpvi.noise_aware.preconditioning import correlation_step_matrix, rate_cap  # noqa: E402


def rates(X, noise_variance, params, epsilon):
    """(plain rates, eigen-rates with the correlation matrix, largest after the cap)."""
    est = DPBayesianLinearRegression(epsilon=epsilon, **params)
    est.n_features_in_ = X.shape[1]
    engine = est._engine_settings(*X.shape).engine
    Xi = np.column_stack([X, np.ones(len(X))])
    hessian = engine["learning_rate"] * engine["sampling_rate"] * (Xi.T @ Xi) / noise_variance
    p = X.shape[1]
    matrix = np.eye(p + 1)
    matrix[:p, :p] = correlation_step_matrix(Xi[:, :p].T @ Xi[:, :p])
    K = matrix @ hessian
    capped = rate_cap(K) @ K
    return (np.diag(hessian), np.sort(np.linalg.eigvals(K).real),
            np.max(np.linalg.eigvals(capped).real))


def main():
    rng = np.random.default_rng(0)
    rows = []
    for config in ("paper", "d5_n1000", "d20_rho0.5", "d3_n20000", "d10_rho0.9", "d2_n300",
                   "d40_n10000", "d10_ws5"):
        X, y, theta = table2_linear.simulate(config, rng)
        _, _, ws, shape, scale, _ = table2_linear.CONFIGS[config]
        params = dict(prior_weight_scale=ws, prior_noise_shape=shape, prior_noise_scale=scale)
        for epsilon in (0.1, 1.0):
            rows.append((config, epsilon, *rates(X, theta[-1], params, epsilon)))
    for config, epsilon in (("scales", 1.0), ("scale3", 1.0), ("shift1", 1.0), ("shift2", 1.0),
                            ("d30", 1.0), ("n100k", 1.0), ("n100k", 3.0), ("n50k_rho0.9", 1.0),
                            ("d30_rho0.9_n20k", 1.0)):
        simulator, params = PROBES[config]
        theta, X, y = simulator(rng)
        rows.append((config, epsilon, *rates(X, theta[-1], params, epsilon)))
    print(f"{'configuration':18s} {'eps':>4s}  {'plain rates':>15s}  {'with the matrix':>15s}  capped")
    for config, epsilon, plain, eigen, capped in rows:
        print(f"{config:18s} {epsilon:4g}  {plain.min():6.3f}-{plain.max():7.3f}  "
              f"{eigen[0]:6.3f}-{eigen[-1]:7.3f}  {capped:6.3f}")


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        main()
