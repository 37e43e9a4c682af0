"""The full-rank DPVI engine (skdpvi.dpvi.full_rank): gradients, clipping, noise,
and the curvature its release gives (skdpvi.noise_aware.full_rank)."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from skdpvi.dpvi.full_rank import (FullRankRelease, _FullRankStep, full_rank_size,
                                   run_dpvi_full_rank)
from skdpvi.noise_aware import full_rank_curvature, full_rank_posterior


def _autograd_rows(step, m, rho, U, eps, X, y):
    """Per-example gradients of the negative ELBO, by autograd, one example at a time."""
    n, N = len(m), step.N
    rows, cols = np.tril_indices(n, -1)

    def loss(i, m, rho, U):
        s = torch.nn.functional.softplus(rho)
        A = torch.eye(n, dtype=torch.float64).index_put(
            (torch.as_tensor(rows), torch.as_tensor(cols)), U)
        theta = m + eps @ (s[:, None] * A).T
        z = theta @ X[i]
        nll = (torch.nn.functional.softplus(z) - y[i] * z).mean()
        reg = ((theta**2).sum(1) / (2 * step.prior_var)).mean() / N - torch.log(s).sum() / N
        return nll + reg

    out = []
    for i in range(len(X)):
        params = [t.clone().requires_grad_() for t in (m, rho, U)]
        out.append(torch.autograd.grad(loss(i, *params), params))
    return out


@pytest.mark.parametrize("clip_norm", [0.5, 1e6], ids=["clipped", "unclipped"])
def test_step_equals_autograd_per_example_gradients_clipped(clip_norm):
    torch.manual_seed(0)
    n, B, S, N = 5, 40, 10, 1000
    X = torch.randn(B, n, dtype=torch.float64)
    y = (torch.rand(B) < 0.5).double()
    m = 0.3 * torch.randn(n, dtype=torch.float64)
    rho = torch.randn(n, dtype=torch.float64) - 2
    U = 0.5 * torch.randn(n * (n - 1) // 2, dtype=torch.float64)
    eps = torch.randn(S, n, dtype=torch.float64)
    eps -= eps.mean(0)
    beta_rho, beta_u = 300.0, 500.0
    step = _FullRankStep(n, N, 1.3, beta_rho, beta_u, clip_norm)
    sum_m, sum_rho, sum_u, n_clipped = step(m, rho, step.factors(rho, U), eps, X, y)
    rows = _autograd_rows(step, m, rho, U, eps, X, y)
    # the preconditioned row's norm, and every row scaled to norm at most C
    norms = torch.stack([torch.sqrt((g[0]**2).sum() + beta_rho**2 * (g[1]**2).sum()
                                    + beta_u**2 * (g[2]**2).sum()) for g in rows])
    f = torch.clamp(clip_norm / norms, max=1.0)
    assert torch.all(f * norms <= clip_norm * (1 + 1e-12))
    assert n_clipped == int((f < 1).sum()) == (B if clip_norm < 1 else 0)
    for got, k in ((sum_m, 0), (sum_rho, 1), (sum_u, 2)):
        want = sum(f[i] * rows[i][k] for i in range(B))
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-14)


def test_released_gradient_noise_has_the_mechanism_scale():
    # rows of zeros and the means at 0: every clipped sum in m is exactly 0 (centred
    # draws), so the released gradient in m is the noise alone, sd sigma C
    sigma, C = 1.7, 2.5
    draws = []
    for seed in range(300):
        release = run_dpvi_full_rank(np.zeros((30, 3)), np.zeros(30), prior_scale=1.0,
                                     noise_multiplier=sigma, clip_norm=C, sampling_rate=0.5,
                                     n_steps=2, burn_in=0, learning_rate=0.0,
                                     preconditioner=10.0, random_state=seed)
        draws.append(release.mean_gradient * 2)  # the two steps' sum
    sd = np.std(np.asarray(draws)) / np.sqrt(2)
    assert abs(sd / (sigma * C) - 1) < 0.06
    assert np.allclose(release.noise_std[:3], sigma * C)
    assert np.allclose(release.noise_std[3:], sigma * C / (10.0 / 0.25))
    assert len(release.phi) == full_rank_size(3) == 9


def _release_at(L, A_scales, n_params):
    """A release whose iterates sat still at L = diag(s) A (no wander)."""
    s, A = A_scales
    n = n_params
    dsig = 1 / (1 + np.exp(-np.log(np.expm1(s))))
    scale_moments = s[:, None, None] * L[None, :, :]
    diagonal_moments = (L @ A.T) * dsig[None, :]
    return FullRankRelease(phi=np.zeros(full_rank_size(n)), mean_phi=np.zeros(full_rank_size(n)),
                           mean_gradient=np.zeros(n), mean_outer=np.zeros((n, n)),
                           scale_moments=scale_moments,
                           diagonal_moments=diagonal_moments, entropy=dsig / s, n_params=n,
                           count=1000, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.1,
                           learning_rate=np.ones(full_rank_size(n)),
                           preconditioner=np.ones(full_rank_size(n)), n_steps=1000, burn_in=0)


def test_curvature_solves_the_stationarity_exactly_without_wander():
    rng = np.random.default_rng(3)
    n = 4
    M = rng.standard_normal((n, n))
    H = M @ M.T + n * np.eye(n)
    L = np.linalg.cholesky(np.linalg.inv(H))  # the optimum: L L^T = H^-1
    s = np.diag(L).copy()
    release = _release_at(L, (s, L / s[:, None]), n)
    np.testing.assert_allclose(full_rank_curvature(release), H, rtol=1e-9)
    # the prior floor and a flat direction
    direction = np.ones((1, n)) / 2
    H_flat = full_rank_curvature(release, prior_scale=1.0, flat_directions=direction)
    np.testing.assert_allclose(H_flat @ direction[0], direction[0], atol=1e-9)


def test_noise_free_run_reads_the_posterior_curvature():
    rng = np.random.default_rng(0)
    N, n = 3000, 4
    X = np.c_[rng.standard_normal((N, n - 1)) @ np.linalg.cholesky(
        0.6 * np.ones((n - 1, n - 1)) + 0.4 * np.eye(n - 1)).T, np.ones(N)]
    w_true = np.array([1.0, -0.5, 0.3, -0.2])
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ w_true))).astype(float)
    release = run_dpvi_full_rank(X, y, prior_scale=1.0, noise_multiplier=1e-6, clip_norm=1e3,
                                 sampling_rate=0.2, n_steps=3000, burn_in=1000,
                                 learning_rate=2e-4, preconditioner=100.0, random_state=0)

    def objective(w):
        z = X @ w
        return (np.sum(np.logaddexp(0, z) - y * z) + 0.5 * w @ w,
                X.T @ (1 / (1 + np.exp(-z)) - y) + w)

    w_map = minimize(objective, np.zeros(n), jac=True).x
    p = 1 / (1 + np.exp(-X @ w_map))
    H = (X * (p * (1 - p))[:, None]).T @ X + np.eye(n)
    ratios = np.linalg.eigvals(np.linalg.solve(H, full_rank_curvature(release, 1.0))).real
    assert ratios.min() > 0.9 and ratios.max() < 1.1
    components, info = full_rank_posterior(release, prior_scale=1.0, random_state=0)
    np.testing.assert_allclose(components.mean.mean(0), w_map, atol=0.05)
    assert info["covariance"].shape == (n, n)


@pytest.mark.parametrize("bad, name", [(dict(sampling_rate=1.5), "sampling_rate"),
                                       (dict(burn_in=10), "burn_in"),
                                       (dict(scale_noise=0.0), "scale_noise")])
def test_bad_settings_name_the_parameter(bad, name):
    settings = dict(prior_scale=1.0, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.5,
                    n_steps=10, burn_in=2, learning_rate=1e-3, preconditioner=10.0)
    with pytest.raises(ValueError, match=name):
        run_dpvi_full_rank(np.ones((20, 2)), np.zeros(20), **{**settings, **bad})
