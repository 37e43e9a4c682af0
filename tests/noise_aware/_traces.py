"""Simulated linear-Gaussian DP-SGD traces shared by the noise_aware tests."""

import numpy as np

from skdpvi.dpvi import DPVIResult, TraceStatistics
from skdpvi.noise_aware import sample_phi_star


KAPPA, TAU, LAM = 0.1, 1000.0, 1e-6
A_TRUE = np.array([3e4, 1e5, 3e5, 1e6])
PHI_STAR = np.array([0.3, -1.0, 2.0, 0.0])


def simulate_traces(n_traces, a=A_TRUE, phi_star=PHI_STAR, n_steps=6000, burn_in=1200, seed=0,
                    offset=0.0):
    """Linear-Gaussian DP-SGD (paper eq. 20 with Sigma_sub = 0), vectorised over traces.

    ``offset`` is added to the mean of every gradient (a known non-linear part).
    """
    rng = np.random.default_rng(seed)
    d = len(a)
    phi = np.empty((n_traces, n_steps + 1, d))
    grads = np.empty((n_traces, n_steps, d))
    phi[:, 0] = phi_star + rng.normal(0, 0.3, (n_traces, d))
    for t in range(n_steps):
        grads[:, t] = (KAPPA * a * (phi[:, t] - phi_star) + offset
                       + TAU * rng.standard_normal((n_traces, d)))
        phi[:, t + 1] = phi[:, t] - LAM * grads[:, t]
    results = [
        DPVIResult(phi=phi[k, -1], stats=TraceStatistics.from_trace(phi[k], grads[k], burn_in),
                   noise_multiplier=TAU, clip_norm=1.0, sampling_rate=KAPPA,
                   preconditioner=np.ones(d), learning_rate=np.full(d, LAM),
                   n_steps=n_steps, burn_in=burn_in)
        for k in range(n_traces)
    ]
    return results, phi, grads


def _coverage(results, method, level=0.9, **kwargs):
    hits = []
    for k, res in enumerate(results):
        draws, _ = sample_phi_star(res, method, 2000, random_state=k, **kwargs)
        lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
        hits.append((lo <= PHI_STAR) & (PHI_STAR <= hi))
    return np.mean(hits)
