"""The full-rank DPVI engine (skdpvi.dpvi.full_rank): gradients, clipping, noise,
and the curvature its release gives (skdpvi.noise_aware.full_rank)."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from skdpvi.dpvi.full_rank import (FullRankRelease, full_rank_size, run_dpvi_full_rank,
                                   run_dpvi_full_rank_batched)
from skdpvi.dpvi.full_rank_step import (SCALE_CAP_DIVISOR, _FullRankStep,
                                        full_rank_scale_preconditioner)
from skdpvi.noise_aware import full_rank_curvature, full_rank_posterior
from skdpvi.noise_aware.full_rank import shrink_to_diagonal


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


def _random_step_inputs(n=5, B=40, S=10):
    torch.manual_seed(0)
    X = torch.randn(B, n, dtype=torch.float64)
    y = (torch.rand(B) < 0.5).double()
    m = 0.3 * torch.randn(n, dtype=torch.float64)
    rho = torch.randn(n, dtype=torch.float64) - 2
    U = 0.5 * torch.randn(n * (n - 1) // 2, dtype=torch.float64)
    eps = torch.randn(S, n, dtype=torch.float64)
    eps -= eps.mean(0)
    return m, rho, U, eps, X, y


@pytest.mark.parametrize("clip_norm", [0.5, 1e6], ids=["clipped", "unclipped"])
def test_step_equals_autograd_per_example_gradients_clipped(clip_norm):
    m, rho, U, eps, X, y = _random_step_inputs()
    n, B, N = X.shape[1], X.shape[0], 1000
    beta_rho, beta_u = 300.0, 500.0
    step = _FullRankStep(n, N, 1.3, beta_rho, beta_u, clip_norm)
    sum_m, sum_rho, sum_u, n_clipped = step(m, rho, step.factors(rho, U), eps, X, y)
    rows = _autograd_rows(step, m, rho, U, eps, X, y)
    # the preconditioned row's norm, and every row scaled to norm at most C
    norms = torch.stack([torch.sqrt((g[0]**2).sum() + beta_rho**2 * (g[1]**2).sum()
                                    + beta_u**2 * (g[2]**2).sum()) for g in rows])
    f = torch.clamp(clip_norm / norms, max=1.0)
    assert torch.all(f * norms <= clip_norm * (1 + 1e-12))
    expected = B if clip_norm < 1 else 0
    assert n_clipped == (int((f < 1).sum()), int((f < 1).sum())) == (expected, expected)
    for got, k in ((sum_m, 0), (sum_rho, 1), (sum_u, 2)):
        want = sum(f[i] * rows[i][k] for i in range(B))
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("share", [0.8, 0.5])
def test_blocks_clipped_apart_keep_each_row_within_the_clip_norm(share):
    # the means' block clipped to a C, the scales' (rho, U) to sqrt(1 - a^2) C: each
    # clipped row's norm is at most C, and a row's means are clipped only by their own norm
    m, rho, U, eps, X, y = _random_step_inputs()
    n, B, N = X.shape[1], X.shape[0], 1000
    beta, C = 400.0, 0.6
    step = _FullRankStep(n, N, 1.3, beta, beta, C, mean_clip_share=share)
    sum_m, sum_rho, sum_u, n_clipped = step(m, rho, step.factors(rho, U), eps, X, y)
    rows = _autograd_rows(step, m, rho, U, eps, X, y)
    norm_m = torch.stack([g[0].norm() for g in rows])
    norm_s = torch.stack([beta * torch.cat([g[1], g[2]]).norm() for g in rows])
    f_m = torch.clamp(share * C / norm_m, max=1.0)
    f_s = torch.clamp(np.sqrt(1 - share**2) * C / norm_s, max=1.0)
    assert torch.all((f_m * norm_m) ** 2 + (f_s * norm_s) ** 2 <= C**2 * (1 + 1e-12))
    assert n_clipped == (int((f_m < 1).sum()), int((f_s < 1).sum()))
    assert n_clipped[0] > 0 and n_clipped[1] > 0
    assert ((f_m < 1) != (f_s < 1)).any()  # the blocks clip different rows
    for got, k, f in ((sum_m, 0, f_m), (sum_rho, 1, f_s), (sum_u, 2, f_s)):
        want = sum(f[i] * rows[i][k] for i in range(B))
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-14)


def test_scale_preconditioner_cap_keys_on_the_number_of_rows():
    # the cap C_s N / (divisor sqrt(n (n + 1) / 2)) binds below some N and grows with it
    free = full_rank_scale_preconditioner(100.0, 2.0, 10**6, 4, scale_noise=0.25, cap=True)
    assert free == 400.0
    capped = full_rank_scale_preconditioner(100.0, 2.0, 1000, 4, scale_noise=0.25, cap=True)
    assert capped == pytest.approx(2.0 * 1000 / (SCALE_CAP_DIVISOR * np.sqrt(10)))
    doubled = full_rank_scale_preconditioner(100.0, 2.0, 2000, 4, cap=True)
    assert doubled == pytest.approx(2 * capped)
    assert full_rank_scale_preconditioner(100.0, 2.0, 1000, 4) == 400.0  # no cap by default


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
    for bad, name in ((dict(prior_scale=-1.0), "prior_scale"), (dict(prior_sd=0.0), "prior_sd"),
                      (dict(n_components=0), "n_components")):
        with pytest.raises(ValueError, match=name):
            full_rank_posterior(release, **{"prior_scale": 1.0, **bad})
    with pytest.raises(ValueError, match="prior_scale"):
        full_rank_curvature(release, 0.0)


def test_closed_form_pieces_are_the_expectations_of_the_monte_carlo_ones():
    m, rho, U, _, X, y = _random_step_inputs(n=4, B=12)
    mc = _FullRankStep(4, 1000, 1.3, 1.0, 1.0, 1e9)
    exact = _FullRankStep(4, 1000, 1.3, 1.0, 1.0, 1e9, closed_form=True)
    factors = mc.factors(rho, U)
    eps = torch.randn(200_000, 4, generator=torch.Generator().manual_seed(1),
                      dtype=torch.float64)
    draws = mc.pieces(m, rho, factors, eps, X, y)
    expected = exact.pieces(m, rho, factors, None, X, y)
    # w_bar, r_m, V, R and the rho rows: Monte Carlo averages over S = 200,000 draws,
    # each within 6 of its standard errors' bound (|sigmoid - y| <= 1, |eps| ~ 1)
    se = 1.0 / np.sqrt(len(eps))
    prior = (float(m.abs().max()) + 1.0) / (1.3**2 * 1000)
    rows = 4 * float(X.abs().max()) * (1.0 + float(U.abs().max()))
    for got, want, scale in zip(draws[:5], expected[:5], (1.0, prior, 1.0, prior, rows)):
        torch.testing.assert_close(got, want, rtol=0, atol=6 * se * scale)
    # without the draws' noise a row's U gradient is |s_j x_j| |V_k| <= |L^T x| / 4 deep
    V = expected[2]
    assert torch.all(V.norm(dim=-1) <= 0.25 * (X @ factors[2]).norm(dim=-1) + 1e-12)


def test_closed_form_run_sees_the_same_subsamples_and_noise():
    rng = np.random.default_rng(3)
    X = np.c_[rng.standard_normal((400, 2)), np.ones(400)]
    y = (rng.random(400) < 0.4).astype(float)
    settings = dict(prior_scale=1.0, noise_multiplier=2.0, clip_norm=1.0, sampling_rate=0.1,
                    n_steps=1, burn_in=0, learning_rate=1e-3, preconditioner=10.0,
                    random_state=7)
    # one step from m = 0 at scales 0.01: the logits' spread is negligible, so the two
    # kinds of gradient agree wherever the batch and the noise are the same
    mc = run_dpvi_full_rank(X, y, **settings)
    exact = run_dpvi_full_rank(X, y, elbo_gradients="closed_form", **settings)
    other = run_dpvi_full_rank(X, y, elbo_gradients="closed_form", **{**settings,
                                                                       "random_state": 8})
    np.testing.assert_allclose(exact.mean_gradient, mc.mean_gradient, atol=0.02)
    assert np.abs(other.mean_gradient - mc.mean_gradient).max() > 0.5


@pytest.mark.parametrize("bad, name", [(dict(sampling_rate=1.5), "sampling_rate"),
                                       (dict(burn_in=10), "burn_in"),
                                       (dict(scale_noise=0.0), "scale_noise"),
                                       (dict(mean_clip_share=1.0), "mean_clip_share"),
                                       (dict(mean_clip_share=-0.5), "mean_clip_share"),
                                       (dict(elbo_gradients="exact"), "elbo_gradients"),
                                       (dict(init_scale=0.0), "init_scale"),
                                       (dict(init_scale=float("inf")), "init_scale"),
                                       (dict(mean_preconditioning=0.5), "mean_preconditioning"),
                                       (dict(mean_preconditioning="yes"),
                                        "mean_preconditioning")])
def test_bad_settings_name_the_parameter(bad, name):
    settings = dict(prior_scale=1.0, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.5,
                    n_steps=10, burn_in=2, learning_rate=1e-3, preconditioner=10.0)
    with pytest.raises(ValueError, match=name):
        run_dpvi_full_rank(np.ones((20, 2)), np.zeros(20), **{**settings, **bad})


def test_blocks_clipped_apart_spare_the_means_rows_that_a_whole_row_clip_shrinks():
    # few rows: the scale block's per-example gradients (~ beta / N) are large, so a
    # row clipped as a whole shrinks its means' gradient too; clipped apart it does not
    rng = np.random.default_rng(0)
    X = np.c_[rng.standard_normal((300, 2)), np.ones(300)]
    y = (rng.random(300) < 0.5).astype(float)
    settings = dict(prior_scale=1.0, noise_multiplier=1.0, clip_norm=3.0, sampling_rate=0.2,
                    n_steps=300, burn_in=100, learning_rate=1e-3, preconditioner=200.0,
                    scale_cap=False, random_state=0, return_clipped=True)
    _, whole = run_dpvi_full_rank(X, y, mean_clip_share=None, **settings)
    _, apart = run_dpvi_full_rank(X, y, mean_clip_share=0.8, **settings)
    assert whole["means"] == whole["scales"] > 0.2
    assert apart["means"] < 0.01 < apart["scales"]


def _lockstep_data(R=3, N=300, d=3):
    data = []
    for k in range(R):
        rng = np.random.default_rng(k)
        X = np.column_stack([rng.standard_normal((N, d)), np.ones(N)])
        y = (rng.random(N) < 1 / (1 + np.exp(-X @ rng.standard_normal(d + 1)))).astype(float)
        data.append((X, y))
    return data


_LOCKSTEP = dict(prior_scale=1.0, noise_multiplier=2.0, sampling_rate=0.1, n_steps=150,
                 burn_in=30, preconditioner=20.0)


@pytest.mark.parametrize("gradients", ["monte_carlo", "closed_form"])
def test_lockstep_runs_equal_their_single_runs(gradients):
    # per-run clip norms and steps; the runs' batches differ in size every step, so
    # the padding rows (weight 0) must change neither the sums nor the clip counts
    data = _lockstep_data()
    clips, lrs = [1.0, 3.0, 0.5], [2e-3, 1e-3, 3e-3]
    releases, clipped = run_dpvi_full_rank_batched(
        data, random_states=[7, 8, 9], clip_norm=clips, learning_rate=lrs,
        return_clipped=True, elbo_gradients=gradients, **_LOCKSTEP)
    for (X, y), seed, c, lr, got, got_clipped in zip(data, [7, 8, 9], clips, lrs, releases,
                                                     clipped):
        want, want_clipped = run_dpvi_full_rank(X, y, random_state=seed, clip_norm=c,
                                                learning_rate=lr, return_clipped=True,
                                                elbo_gradients=gradients, **_LOCKSTEP)
        for name in ("phi", "mean_phi", "mean_gradient", "mean_outer", "scale_moments",
                     "diagonal_moments", "entropy", "learning_rate", "preconditioner"):
            np.testing.assert_allclose(getattr(got, name), getattr(want, name),
                                       rtol=1e-9, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(got.mean_stats.sum_xxt, want.mean_stats.sum_xxt,
                                   rtol=1e-9, atol=1e-12)
        assert got.clip_norm == c
        assert got_clipped == pytest.approx(want_clipped, abs=1e-12)
    assert clipped[2]["means"] > 0  # the smallest clip norm clips: the counts were compared


@pytest.mark.parametrize("change, match", [
    (dict(random_states=[1]), "one seed per data set"),
    (dict(clip_norm=[1.0, 2.0]), "clip_norm must be a number or one number per data set"),
    (dict(clip_norm=[1.0, -2.0, 1.0]), "clip_norm must be > 0"),
    (dict(datasets="short"), "same shape"),
])
def test_lockstep_runs_reject_bad_input(change, match):
    data = _lockstep_data()
    if change.pop("datasets", None):
        data[1] = (data[1][0][:-1], data[1][1][:-1])
    kw = dict(random_states=[1, 2, 3], clip_norm=1.0, learning_rate=1e-3, **_LOCKSTEP)
    kw.update(change)
    with pytest.raises(ValueError, match=match):
        run_dpvi_full_rank_batched(data, **kw)


def test_lockstep_runs_with_subsamples_longer_than_the_drawn_chunk(monkeypatch):
    # a step whose subsample outgrows the gaps drawn for it (6 sd: rare) widens that
    # run's index block; the lockstep block widens with it and keeps every run's padding
    # on its own rows: forced here with a tiny chunk for every step
    import skdpvi.dpvi.sampling as sampling

    monkeypatch.setattr(sampling, "_chunk", lambda n_examples, rate: 3)
    data = _lockstep_data(R=3, N=120)
    kw = dict(clip_norm=1.0, learning_rate=2e-3, **{**_LOCKSTEP, "sampling_rate": 0.2})
    releases = run_dpvi_full_rank_batched(data, random_states=[1, 2, 3], **kw)
    for (X, y), seed, got in zip(data, [1, 2, 3], releases):
        want = run_dpvi_full_rank(X, y, random_state=seed, **kw)
        np.testing.assert_allclose(got.mean_phi, want.mean_phi, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got.scale_moments, want.scale_moments, rtol=1e-9,
                                   atol=1e-12)


def test_release_halves_average_to_the_window_moments():
    X, y = _lockstep_data(R=1, N=400)[0]
    release = run_dpvi_full_rank(X, y, random_state=0, clip_norm=1.0, learning_rate=1e-3,
                                 **{**_LOCKSTEP, "n_steps": 151})
    first = release.mean_stats.halves[0].count
    second = release.count - first
    assert (first, second) == (60, 61)
    for name in ("scale_moments", "diagonal_moments", "entropy"):
        halves = [h[name] for h in release.half_moments]
        np.testing.assert_allclose((first * halves[0] + second * halves[1]) / release.count,
                                   getattr(release, name), rtol=1e-12)


def test_late_moments_read_the_second_half_and_shrink_by_its_own_noise():
    from skdpvi.noise_aware.full_rank import _stationarity_curvature
    X, y = _lockstep_data(R=1, N=400)[0]
    release = run_dpvi_full_rank(X, y, random_state=0, clip_norm=1.0, learning_rate=1e-3,
                                 **{**_LOCKSTEP, "n_steps": 151})
    n = release.n_params
    late = full_rank_curvature(release, moments="late")
    np.testing.assert_allclose(late, _stationarity_curvature(n, **release.half_moments[1]),
                               rtol=1e-12)
    assert not np.allclose(late, full_rank_curvature(release))
    # a half's estimate has twice the window's noise variance: shrunk at least as far
    H1, H2 = (_stationarity_curvature(n, **m) for m in release.half_moments)
    once = shrink_to_diagonal(late, H1, H2)
    twice = shrink_to_diagonal(late, H1, H2, noise_scale=2.0)
    off = ~np.eye(n, dtype=bool)
    share = [1 - np.sum(S[off] * late[off]) / np.sum(late[off] ** 2) for S in (once, twice)]
    assert 0 < share[0] < share[1] <= 1
    np.testing.assert_allclose(share[1], min(1.0, 2 * share[0]), rtol=1e-9)
    np.testing.assert_allclose(full_rank_curvature(release, shrinkage=True, moments="late"),
                               twice, rtol=1e-12)
    with pytest.raises(ValueError, match="moments"):
        full_rank_curvature(release, moments="early")


def _shrink_share(H_hat, H1, H2):
    """The intensity a of shrink_to_diagonal, read off its result."""
    off = ~np.eye(len(H_hat), dtype=bool)
    shrunk = shrink_to_diagonal(H_hat, H1, H2)
    np.testing.assert_allclose(np.diag(shrunk), np.diag(H_hat))
    return 1 - np.sum(shrunk[off] * H_hat[off]) / np.sum(H_hat[off] ** 2)


def test_shrinkage_to_the_diagonal_follows_the_halves_disagreement():
    rng = np.random.default_rng(0)
    n = 6
    B = rng.standard_normal((n, n))
    H = B @ B.T + n * np.eye(n)  # correlated
    np.testing.assert_allclose(shrink_to_diagonal(H, H, H), H)  # halves agree: no change
    scale = np.sqrt(np.outer(np.diag(H), np.diag(H)))

    def halves(truth, sd):
        e = [sd * rng.standard_normal((n, n)) for _ in range(2)]
        H1, H2 = (truth + (x + x.T) / 2 * scale for x in e)
        return (H1 + H2) / 2, H1, H2

    # off-diagonal parts of pure noise: shrunk (almost) all the way
    D = np.diag(np.diag(H))
    assert np.mean([_shrink_share(*halves(D, 0.3)) for _ in range(60)]) > 0.8
    # noisy estimates of a correlated H: part of the way, and closer to H on average
    shares, errors = [], []
    for _ in range(60):
        H_hat, H1, H2 = halves(H, 0.15)
        shares.append(_shrink_share(H_hat, H1, H2))
        errors.append((np.linalg.norm(shrink_to_diagonal(H_hat, H1, H2) - H),
                       np.linalg.norm(H_hat - H)))
    assert 0.02 < np.mean(shares) < 0.5
    errors = np.array(errors)
    assert errors[:, 0].mean() < errors[:, 1].mean()


def test_radial_target_keeps_the_curvature_along_the_direction():
    # a logistic-like curvature a I + b v v^T, estimated with noise: shrunk towards the
    # diagonal it loses the v part, towards the radial target it keeps it
    rng = np.random.default_rng(1)
    n = 8
    v = rng.standard_normal(n)
    H = 100 * np.eye(n) - 60 * np.outer(v, v) / (v @ v)
    errors = []
    for _ in range(40):
        e = [10.0 * rng.standard_normal((n, n)) for _ in range(2)]
        H1, H2 = (H + (x + x.T) / 2 for x in e)
        H_hat = (H1 + H2) / 2
        errors.append([abs(v @ shrink_to_diagonal(H_hat, H1, H2, direction=d) @ v
                           / (v @ H @ v) - 1) for d in (None, v)])
    errors = np.array(errors)  # relative error of the curvature along v
    assert errors[:, 1].mean() < 0.5 * errors[:, 0].mean()
    assert np.mean(errors[:, 1] < errors[:, 0]) > 0.7


def test_prior_once_is_the_exact_posterior_given_the_noisy_mode():
    from skdpvi.noise_aware.full_rank import _prior_once
    rng = np.random.default_rng(4)
    n, tau = 4, 1.5
    M = rng.standard_normal((n, n))
    H_lik = M @ M.T + 0.3 * np.eye(n)
    H = H_lik + np.eye(n) / tau**2
    c = rng.standard_normal(n)
    mean, cov = _prior_once(c, np.zeros((n, n)), H, tau)  # no DP error: N(c, H^-1)
    np.testing.assert_allclose(mean, c, atol=1e-12)
    np.testing.assert_allclose(cov, np.linalg.inv(H), atol=1e-12)
    E = 0.2 * np.eye(n) + 0.05 * np.ones((n, n))
    mean, cov = _prior_once(c, E, H, tau)
    # brute force: the likelihood's summary read back, its error, the prior applied once
    back = np.linalg.solve(H_lik, H)
    C = np.linalg.inv(H_lik) + back @ E @ back.T
    V = np.linalg.inv(np.eye(n) / tau**2 + np.linalg.inv(C))
    np.testing.assert_allclose(cov, V, atol=1e-10)
    np.testing.assert_allclose(mean, V @ np.linalg.solve(C, back @ c), atol=1e-10)
    assert np.linalg.eigvalsh(cov - np.linalg.inv(H)).min() > -1e-12
    # flat directions (H_lik singular): the prior there
    H_flat = np.diag([2.0, 0.0, 3.0]) + np.eye(3) / tau**2
    mean, cov = _prior_once(np.ones(3), 0.1 * np.eye(3), H_flat, tau)
    assert abs(mean[1]) < 1e-12 and abs(cov[1, 1] - tau**2) < 1e-12
    # ... also without DP error (noise_multiplier=0), where B is singular along it
    mean, cov = _prior_once(np.ones(3), np.zeros((3, 3)), H_flat, tau)
    np.testing.assert_allclose(cov, np.linalg.inv(H_flat), atol=1e-12)
    np.testing.assert_allclose(mean, [1.0, 0.0, 1.0], atol=1e-12)


def test_prior_once_passes_prior_references_where_the_plug_in_mixture_fails():
    """benchmarks/prior_once_synthetic.py at one size: a Gaussian model, the release's
    mode errs by E (the DP error, ten times the likelihood's variance)."""
    from skdpvi.metrics import tarp_coverage
    from skdpvi.noise_aware.full_rank import _prior_once
    rng = np.random.default_rng(0)
    p, K = 5, 150
    Q = np.linalg.qr(rng.standard_normal((p, p)))[0]
    A = Q @ np.diag(np.linspace(0.002, 0.008, p)) @ Q.T
    E = Q @ np.diag([0.01, 0.02, 0.05, 0.2, 0.4]) @ Q.T
    H = np.linalg.inv(A) + np.eye(p)
    S = np.linalg.inv(H)
    plug_in, once, thetas = [], [], rng.standard_normal((K, p))
    for theta in thetas:
        c = S @ np.linalg.solve(A, theta + rng.multivariate_normal(np.zeros(p), A)) \
            + rng.multivariate_normal(np.zeros(p), E)
        plug_in.append(rng.multivariate_normal(c, S + E, size=500))
        once.append(rng.multivariate_normal(*_prior_once(c, E, H, 1.0), size=500))
    refs = rng.standard_normal((K, p))
    plug_in, once = np.array(plug_in), np.array(once)

    def tarp(draws, references="posterior"):
        return tarp_coverage(draws, thetas, references=references, random_state=0).rmse

    z = (plug_in.mean(1) - thetas) / plug_in.std(1)
    # the plug-in's coordinates and the authors' references look calibrated ...
    assert np.all(np.abs(z.std(0) - 1) < 0.15) and tarp(plug_in) < 0.05
    # ... prior references reject it; the prior applied once passes both
    assert tarp(plug_in, refs) > 0.1
    assert tarp(once, refs) < 0.065 and tarp(once) < 0.065  # K = 150: 90 % of calibrated < 0.055


def test_full_rank_posterior_with_the_prior_once_pulls_the_noisy_centre_towards_zero():
    rng = np.random.default_rng(8)
    n = 3
    M = rng.standard_normal((n, n))
    H = M @ M.T + 2 * np.eye(n)
    L = np.linalg.cholesky(np.linalg.inv(H))
    s = np.diag(L).copy()
    release = _release_at(L, (s, L / s[:, None]), n)
    centre = np.array([1.5, -1.0, 0.3])
    release.mean_phi = np.r_[centre, np.zeros(full_rank_size(n) - n)]
    release.noise_multiplier, release.count = 3.0, 400   # the DP error dominates
    plug_in, info = full_rank_posterior(release, prior_scale=1.0, random_state=0,
                                        n_components=20000)
    once, info_once = full_rank_posterior(release, prior_scale=1.0, prior_once=True,
                                          random_state=0, n_components=20000)
    np.testing.assert_allclose(info_once["component_covariance"], np.linalg.inv(H), rtol=1e-8)
    # the exact posterior given the noisy mode (error K^-1 Q K^-1 / n, K = kappa H)
    E = release.noise_std[0] ** 2 / release.sampling_rate**2 \
        * np.linalg.matrix_power(np.linalg.inv(H), 2) / release.count
    back = np.linalg.solve(H - np.eye(n), H)
    C = np.linalg.inv(H - np.eye(n)) + back @ E @ back.T
    V = np.linalg.inv(np.eye(n) + np.linalg.inv(C))
    np.testing.assert_allclose(info_once["covariance"] + np.linalg.inv(H), V, rtol=1e-8)
    m_once = once.mean.mean(0)
    sd = np.sqrt(np.diag(V))
    assert np.all(np.abs(m_once - V @ np.linalg.solve(C, back @ centre)) < 5 * sd / 140)
    # the plug-in stays at the estimate; the prior pulls the centre towards 0
    m = plug_in.mean.mean(0)
    assert np.all(np.abs(m - centre) < 5 * np.sqrt(np.diag(info["covariance"])) / 140)
    assert 0.5 < (m_once @ centre) / (centre @ centre) < 0.95


def test_covariance_preconditioner_is_the_covariance_over_its_smallest_eigenvalue_capped():
    from skdpvi.dpvi.full_rank_loop import covariance_preconditioner
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    lam = np.array([0.5, 1.0, 4.0, 50.0])
    S = (Q * lam) @ Q.T
    L = torch.as_tensor(np.linalg.cholesky(S))
    P = covariance_preconditioner(L[None], 20.0)[0].numpy()
    # along each eigenvector of S: its eigenvalue over the smallest, at most the cap
    np.testing.assert_allclose(Q.T @ P @ Q, np.diag([1.0, 2.0, 8.0, 20.0]), atol=1e-9)
    np.testing.assert_allclose(covariance_preconditioner(L[None], 1.0)[0].numpy(), np.eye(4),
                               atol=1e-9)


def test_mean_preconditioning_steps_the_means_by_the_preconditioned_gradient():
    rng = np.random.default_rng(3)
    X = np.c_[rng.standard_normal((300, 2)) * [1.0, 0.2], np.ones(300)]
    y = (rng.random(300) < 0.5).astype(float)
    settings = dict(prior_scale=1.0, noise_multiplier=1.0, clip_norm=2.0, sampling_rate=0.3,
                    n_steps=200, burn_in=50, learning_rate=1e-3, preconditioner=10.0,
                    random_state=1, init_scale=0.5)
    plain = run_dpvi_full_rank(X, y, **settings)
    # a cap of 1 is the identity: the same run
    same = run_dpvi_full_rank(X, y, mean_preconditioning=1.0, **settings)
    np.testing.assert_allclose(same.phi, plain.phi, rtol=1e-12, atol=1e-14)
    # with a cap the means move further along their flattest direction (the second
    # feature's coefficient, its column 5 times smaller)
    faster = run_dpvi_full_rank(X, y, mean_preconditioning=100.0, **settings)
    assert not np.allclose(faster.phi, plain.phi)
    moved = lambda release: np.abs(release.mean_phi[1])  # noqa: E731
    assert moved(faster) > 2 * moved(plain)
