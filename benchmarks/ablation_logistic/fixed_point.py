"""Where DP-SGD's trace settles for logistic regression, against the exact VI optimum.

For K simulated data sets (d uncorrelated Gaussian features, theta from N(0, I)),
the trace mean of the variational means after burn-in against (a) the MAP and (b)
the exact optimum of the same mean-field ELBO (computed without privacy, with
40-point Gauss-Hermite expectations): the *outward shift* is
``(m - ref) . ref / |ref|^2``, a relative error along the coefficient vector
(positive: the trace overstates |theta|). Settings are the estimator's (clip norm
``sqrt(n_params)``, the default learning rate and preconditioner), scaled by
``--clip-mult`` and ``--lr-mult``; epsilon = 1000 makes the DP noise negligible, so
that what is left is clipping and the subsampling noise.

This is the measurement that separates the causes of the logistic posterior's
outward bias (results page): clipping at the default clip norm, not the
variational approximation.

Run: python benchmarks/ablation_logistic/fixed_point.py --epsilon 1 --k 64 [--clip-mult 2]
"""

import argparse
import os
import sys

import numpy as np
import torch
from scipy.optimize import minimize
from scipy.special import expit, log_expit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from _common import _engine_settings  # noqa: E402
from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.dpvi import run_dpvi_batched  # noqa: E402
from skdpvi.models import LogisticRegressionModel  # noqa: E402

NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(40)
WEIGHTS = WEIGHTS / WEIGHTS.sum()


def simulate(rng, d, n):
    X = rng.standard_normal((n, d))
    theta = rng.standard_normal(d + 1)
    y = (rng.random(n) < expit(X @ theta[:-1] + theta[-1])).astype(float)
    return X, y, theta


def map_and_vi(X, y):
    """MAP and the exact mean-field VI optimum (means) under the N(0, I) prior."""
    Xi = np.column_stack([X, np.ones(len(X))])
    p = Xi.shape[1]

    def neg_log_post(t):
        z = Xi @ t
        return (np.sum(np.logaddexp(0, z) - y * z) + 0.5 * t @ t,
                Xi.T @ (expit(z) - y) + t)

    t_map = minimize(neg_log_post, np.zeros(p), jac=True, method="L-BFGS-B").x
    w = expit(Xi @ t_map)
    H = (Xi * (w * (1 - w))[:, None]).T @ Xi + np.eye(p)

    def neg_elbo(params):
        mu, s = params[:p], np.exp(params[p:])
        z = (Xi @ mu)[:, None] + np.sqrt((Xi**2) @ s**2)[:, None] * NODES
        ll = (y[:, None] * log_expit(z) + (1 - y[:, None]) * log_expit(-z)) @ WEIGHTS
        return -(ll.sum() - 0.5 * np.sum(mu**2 + s**2 - 1 - 2 * params[p:]))

    start = np.concatenate([t_map, 0.5 * np.log(1 / np.diag(H))])
    return t_map, minimize(neg_elbo, start, method="L-BFGS-B").x[:p]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=5)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--clip-mult", type=float, default=1.0)
    parser.add_argument("--lr-mult", type=float, default=1.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = LogisticRegressionModel(args.d)
    est = DPBayesianLogisticRegression()
    settings = _engine_settings(
        model, epsilon=args.epsilon, clip_norm=est._default_clip_norm(model) * args.clip_mult,
        n_steps=10_000, sampling_rate=0.1, delta=1e-5, burn_in=0.2, preconditioner=None,
        learning_rate_scale=est._default_learning_rate_scale(2 * model.n_params) * args.lr_mult,
        n_examples=args.n, record_trace=True)
    seeds = list(range(200, 200 + args.k))
    sims = [simulate(np.random.default_rng(s), args.d, args.n) for s in seeds]
    runs = run_dpvi_batched(model, [(X, y) for X, y, _ in sims], random_states=seeds,
                            **settings)
    p = model.n_params
    trace_mean = np.array([r.trace_phi[r.burn_in:, :p].mean(0) for r in runs])
    refs = np.array([map_and_vi(X, y) for X, y, _ in sims])  # (K, 2, p)

    def shift(m, ref):
        per = np.einsum("kd,kd->k", m - ref, ref) / np.einsum("kd,kd->k", ref, ref)
        return per.mean(), per.std() / np.sqrt(len(per))

    clipped = np.mean([r.diagnostics["clipped_fraction"] for r in runs])
    s_map, s_vi = shift(trace_mean, refs[:, 0]), shift(trace_mean, refs[:, 1])
    s_vi_map = shift(refs[:, 1], refs[:, 0])
    print(f"d={args.d} N={args.n} epsilon={args.epsilon} K={args.k} clip x{args.clip_mult} "
          f"lr x{args.lr_mult}: clipped fraction {clipped:.4f}")
    print(f"  outward shift of the trace mean: vs MAP {s_map[0]:+.4f} (se {s_map[1]:.4f}), "
          f"vs exact VI {s_vi[0]:+.4f} (se {s_vi[1]:.4f}); exact VI vs MAP "
          f"{s_vi_map[0]:+.4f} (se {s_vi_map[1]:.4f})")


if __name__ == "__main__":
    main()
