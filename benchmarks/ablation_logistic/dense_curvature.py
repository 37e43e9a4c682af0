"""A dense curvature from the trace for logistic regression: what it takes, what fails.

Prototype of the coupled gradient model of issue 14 on its correlated benchmark (six
equicorrelated features and a one-hot block of four beside the intercept), kept for
the ablation on the results page. From the released trace after burn-in it fits the
local quadratic model of :mod:`skdpvi.models.logistic_statistics` *centred at the
trace mean* (``E[g / kappa] = Lambda (mu - m) + c + prior terms``; with b = c - Lambda m
the package's parametrisation), with a flat prior on (Lambda, c), draws Lambda
(projected onto the PSD cone), and given each draw the location conjugately from the
prior predictive ``c ~ N(Lambda m, Lambda + tau^2 Lambda^2)``; the components are
``N((Lambda + I / tau^2)^-1 (Lambda m - c), (Lambda + I / tau^2)^-1)`` (linear
response). Variants:

- ``plain``: as above;
- ``oracle-null``: Lambda projected off the known collinear direction (one-hot up,
  intercept down), not available in practice: what knowing the null direction buys;
- ``trace-null``: directions of the trace covariance whose apparent number of
  relaxation times ``(lambda sigma C)^2 T / (2 var)`` is below 10 treated as
  prior-only.

``--learning-rate-mult`` scales the estimator's learning rate (more relaxation times
in the recording window identify Lambda better and make the wander larger).
``--diagnose`` prints, per simulation, the estimate of ``v^T Lambda v`` along the
collinear direction v (truth: 0) with its standard error: a least-squares fit with an
intercept on a near-unit-root direction is biased towards mean reversion
(Dickey-Fuller).

Run: python benchmarks/ablation_logistic/dense_curvature.py --epsilon 1 --k 32 \
         --learning-rate-mult 4 [--diagnose]
"""

import argparse
import os
import sys

import numpy as np
import torch
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from _common import _engine_settings  # noqa: E402
from logistic_correlated import MODEL, N, simulate  # noqa: E402
from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.dpvi import run_dpvi_batched  # noqa: E402
from skdpvi.models._quadrature import sigmoid, softplus  # noqa: E402
from skdpvi.models.logistic_statistics import LogisticRegressionStatistics  # noqa: E402
from skdpvi.models.statistics import unvech, vech_indices  # noqa: E402
from skdpvi.noise_aware import statistics as fit_module  # noqa: E402

P = MODEL.n_params
NULL = np.r_[np.zeros(6), np.ones(4), -1.0] / np.sqrt(5.0)


class CentredStatistics(LogisticRegressionStatistics):
    """The quadratic model expanded at the trace mean, flat prior, no shrinkage."""

    centre = None

    def _parts(self, phi):
        phi = np.atleast_2d(np.asarray(phi, float))
        p, prec = self.p, 1.0 / self.model.prior_scale**2
        mu, rho = phi[:, :p], phi[:, p:]
        s, sig = softplus(rho), sigmoid(rho)
        r = np.concatenate([prec * mu, sig * (prec * s - 1.0 / s)], 1)
        return mu - self.centre, s * sig, r

    def gaussian_prior(self, eta_hat):
        return None

    def shrinkage_groups(self):
        return np.zeros(0, int), None


def trace_fit(result):
    """Posterior mean and covariance of (vech Lambda, c) from the recording window."""
    st = CentredStatistics(MODEL, N)
    st.centre = result.trace_phi[result.burn_in:-1, :P].mean(0)
    phi, target, precision = fit_module._trace_regression(result, st)
    half = len(phi) // 2
    reg = fit_module._regression(st, phi, target, precision,
                                 (slice(0, half), slice(half, None)))
    return st, reg["fit"].means[0], reg["fit"].covs[0]


def prior_only_directions(result, variant):
    if variant == "oracle-null":
        return NULL[:, None]
    if variant != "trace-null":
        return np.zeros((P, 0))
    trace = result.trace_phi[result.burn_in:-1, :P]
    var, vectors = np.linalg.eigh(np.cov(trace.T))
    step = float(np.mean(result.learning_rate[:P])) * float(np.mean(result.noise_std[:P]))
    relaxations = step**2 * len(trace) / (2 * var)
    return vectors[:, relaxations < 10]


def dense_draws(result, variant, n_draws=1000, seed=0):
    rng = np.random.default_rng(seed)
    st, mean, cov = trace_fit(result)
    nv = st.n_vech
    etas = mean + rng.standard_normal((n_draws, len(mean))) @ fit_module._psd_cholesky(cov).T
    W = prior_only_directions(result, variant)
    keep = np.eye(P) - W @ W.T
    V_inv = np.linalg.inv(cov[nv:, nv:])
    draws = np.empty((n_draws, P))
    for k in range(n_draws):
        lam = unvech(etas[k, :nv], P)
        lam = keep @ (0.5 * (lam + lam.T)) @ keep
        w, v = np.linalg.eigh(lam)
        w = np.maximum(w, 0.0)
        lam = (v * w) @ v.T
        spread = w + w**2 + 1e-9 * max(w.max(), 1.0)          # tau = 1
        B_inv = (v / spread) @ v.T
        prior_draw = lam @ st.centre + v @ (np.sqrt(spread) * rng.standard_normal(P))
        c = np.linalg.solve(V_inv + B_inv, V_inv @ etas[k, nv:] + B_inv @ prior_draw)
        cov_k = np.linalg.inv(lam + np.eye(P))
        cov_k = 0.5 * (cov_k + cov_k.T)
        draws[k] = cov_k @ (lam @ st.centre - c) + np.linalg.cholesky(cov_k) @ rng.standard_normal(P)
    return draws


def diagnose(result):
    st, mean, cov = trace_fit(result)
    lam = unvech(mean[:st.n_vech], P)
    rows, cols = vech_indices(P)
    outer = np.outer(NULL, NULL)
    a = (2 * outer - np.diag(np.diag(outer)))[rows, cols]
    return float(NULL @ lam @ NULL), float(np.sqrt(a @ cov[:st.n_vech, :st.n_vech] @ a))


def one_batch(seeds, settings, variants, run_diagnosis):
    torch.set_num_threads(1)
    sims = [simulate(np.random.default_rng(s)) for s in seeds]
    runs = run_dpvi_batched(MODEL, [(X, y) for X, y, _ in sims], random_states=seeds,
                            **settings)
    out = []
    for (_, _, theta), r in zip(sims, runs):
        out.append(({v: dense_draws(r, v) for v in variants}, theta,
                    diagnose(r) if run_diagnosis else None))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--learning-rate-mult", type=float, default=4.0)
    parser.add_argument("--variants", nargs="+", default=["plain", "oracle-null", "trace-null"])
    parser.add_argument("--diagnose", action="store_true")
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
    est = DPBayesianLogisticRegression()
    settings = _engine_settings(
        MODEL, epsilon=args.epsilon, clip_norm=est._default_clip_norm(MODEL), n_steps=10_000,
        sampling_rate=0.1, delta=1e-5, burn_in=0.2, preconditioner=None,
        learning_rate_scale=est._default_learning_rate_scale(2 * P) * args.learning_rate_mult,
        n_examples=N, record_trace=True)
    seeds = list(range(100, 100 + args.k))
    chunks = [seeds[i:i + 8] for i in range(0, args.k, 8)]
    out = Parallel(n_jobs=args.n_jobs)(
        delayed(one_batch)(c, settings, args.variants, args.diagnose) for c in chunks)
    out = [o for part in out for o in part]
    theta = np.array([o[1] for o in out])
    print(f"correlated benchmark, epsilon={args.epsilon}, K={args.k}, "
          f"learning rate x{args.learning_rate_mult}")
    with np.printoptions(precision=2, suppress=True, linewidth=150):
        for variant in args.variants:
            draws = np.array([o[0][variant] for o in out])
            z = (draws.mean(1) - theta) / draws.std(1)
            print(f"  {variant:<12} z mean {z.mean(0)}\n  {'':<12} z sd   {z.std(0)}")
    if args.diagnose:
        for k, o in enumerate(out):
            est_, se = o[2]
            print(f"  simulation {k}: v^T Lambda v = {est_:.1f} +- {se:.1f} (truth 0)")


if __name__ == "__main__":
    main()
