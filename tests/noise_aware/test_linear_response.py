"""The dense posterior with linear-response widths (skdpvi/noise_aware/linear_response.py)."""

import numpy as np
import pytest

from skdpvi.dpvi import TraceStatistics
from skdpvi.noise_aware import (linear_response_posterior, matched_curvature,
                                 mean_field_curvature,
                                 shrink_wander_covariance, uncertain_extrapolation,
                                 wander_curvature, window_curvature)
from skdpvi.noise_aware.linear_response import _relaxation_times, _window_variance_ratio

K_TRUE = np.array([[1.0, 0.95, 0.0], [0.95, 1.0, 0.3], [0.0, 0.3, 2.0]])
PHI_STAR = np.array([0.5, -0.3, 1.0])


def _chains(K, n_chains, n_steps, burn_in, step, seed=0):
    """Lockstep linear-Gaussian SGD chains, unit gradient noise: their TraceStatistics."""
    rng = np.random.default_rng(seed)
    d = len(K)
    phi = np.zeros((n_steps + 1, n_chains, d))
    grads = np.empty((n_steps, n_chains, d))
    for t in range(n_steps):
        grads[t] = (phi[t] - np.resize(PHI_STAR, d)) @ K + rng.standard_normal((n_chains, d))
        phi[t + 1] = phi[t] - step * grads[t]
    return [TraceStatistics.from_trace(phi[:, r], grads[:, r], burn_in) for r in range(n_chains)]


def _slow_direction(K):
    lam, U = np.linalg.eigh(K)
    return lam[0], U[:, 0]


def test_window_variance_ratio_and_its_inverse():
    assert _window_variance_ratio(0.0) == 1.0
    assert _window_variance_ratio(1000.0) == pytest.approx(3 / 1000 * (1 - 2 / 1000), rel=1e-5)
    ratios = [_window_variance_ratio(n) for n in (1e-4, 0.1, 1, 10, 100)]
    assert all(a > b for a, b in zip(ratios, ratios[1:]))
    for n in (1e-3, 0.5, 5, 50, 500):
        assert _relaxation_times(_window_variance_ratio(n)) == pytest.approx(n, rel=1e-6)
    assert _relaxation_times(1.3) == 0.0
    # no variance at all (a singular sample covariance): stiffer than resolvable
    assert _relaxation_times(0.0) == 1e9


def test_window_curvature_removes_the_finite_window_bias_of_the_slow_direction():
    # The slow direction (curvature 0.027) relaxes about 11 times in the window of
    # 8,000 steps of 0.05: read with the stationary formula, its sample variance
    # understates the inverse curvature (the posterior variance along it) by about a
    # fifth; with the window correction the median over 40 chains is within 10 %.
    step, n = 0.05, 8_000
    lam_slow, v = _slow_direction(K_TRUE)
    naive, corrected = [], []
    for st in _chains(K_TRUE, 40, n + 3_000, 3_000, step):
        S = st.wander_covariance()
        K_w, _ = window_curvature(S, np.full(3, step), np.ones(3), st.count)
        naive.append(v @ np.linalg.solve(wander_curvature(S, np.full(3, step), np.ones(3)), v))
        corrected.append(v @ np.linalg.solve(K_w, v))
    naive, corrected = np.median(naive) * lam_slow, np.median(corrected) * lam_slow
    assert naive < 0.88, naive
    assert abs(corrected - 1) < 0.1, corrected


def test_window_curvature_bounds_a_random_walk_by_the_floor():
    # No curvature along (1, -1): the trace random-walks there. The estimate says
    # "a few relaxation times at most" (the walk's sample variance is that of a
    # weakly restrained path) and never goes below the floor.
    K = np.array([[1.0, 1.0], [1.0, 1.0]])
    step, n, floor = 0.05, 4_000, 1e-3
    v = np.array([1.0, -1.0]) / np.sqrt(2)
    along, relax = [], []
    for st in _chains(K, 30, n + 500, 500, step, seed=1):
        K_w, n_relax = window_curvature(st.wander_covariance(), np.full(2, step), np.ones(2),
                                        st.count, floor=floor)
        along.append(v @ K_w @ v)
        relax.append(n_relax[np.argmax(np.linalg.eigvalsh(st.wander_covariance()))])
    assert np.median(relax) < 4, np.median(relax)
    assert min(along) >= floor * (1 - 1e-9)
    assert np.median(along) < 4 / (step * n)
    # the fast direction (curvature 2) is read correctly
    K_w, _ = window_curvature(st.wander_covariance(), np.full(2, step), np.ones(2), st.count)
    u = np.array([1.0, 1.0]) / np.sqrt(2)
    assert u @ K_w @ u == pytest.approx(2.0, rel=0.25)


def test_linear_response_posterior_covers_phi_star_and_gives_the_inverse_curvature():
    # Means: coverage of phi* along the slow direction over 40 chains (the window
    # holds 85 relaxation times of it; with 27 the noise of the measured covariance
    # leaves the z sd at about 1.5). Components: kappa K^-1 (here kappa = 0.5: the
    # chains' gradient curvature K is kappa H, the components' covariance H^-1).
    step, n = 0.2, 16_000
    lam_slow, v = _slow_direction(K_TRUE)
    z, comp_var = [], []
    for k, st in enumerate(_chains(K_TRUE, 40, n + 1_000, 1_000, step, seed=2)):
        comps, info = linear_response_posterior(
            st, n_means=3, learning_rate=np.full(3, step), noise_std=np.ones(3),
            sampling_rate=0.5, prior_scale=10.0, prior_sd=10.0, n_components=2000,
            random_state=k)
        along = comps.mean @ v
        z.append((along.mean() - PHI_STAR @ v) / along.std())
        comp_var.append(v @ info["component_covariance"] @ v)
        assert comps.chol.shape == (3, 3)
    z = np.array(z)
    assert 0.75 < z.std() < 1.3, z.std()
    assert abs(z.mean()) < 0.45, z.mean()
    assert np.median(comp_var) == pytest.approx(0.5 / lam_slow, rel=0.2)


def test_linear_response_posterior_is_reproducible_and_needs_cross_sums():
    st = _chains(K_TRUE, 1, 3_000, 500, 0.05)[0]
    kw = dict(n_means=3, learning_rate=np.full(3, 0.05), noise_std=np.ones(3),
              sampling_rate=1.0, n_components=50, random_state=3)
    a, _ = linear_response_posterior(st, **kw)
    b, _ = linear_response_posterior(st, **kw)
    np.testing.assert_array_equal(a.mean, b.mean)
    bare = TraceStatistics(count=st.count, shift=st.shift, sum_x=st.sum_x, sum_xx=st.sum_xx,
                           sum_g=st.sum_g, sum_gg=st.sum_gg, sum_gx=st.sum_gx)
    with pytest.raises(ValueError, match="cross sums"):
        linear_response_posterior(bare, **kw)
    # a prior scale of 0 divided by zero, a negative one counted as positive, and
    # n_components=0 returned an empty posterior: each now names its parameter
    for bad, name in ((dict(prior_scale=0.0), "prior_scale"), (dict(prior_scale=-1.0), "prior_scale"),
                      (dict(prior_sd=float("nan")), "prior_sd"), (dict(n_components=0), "n_components"),
                      (dict(n_components=2.5), "n_components"),
                      # these were accepted unchecked (a typo of the mode ran the default)
                      (dict(curvature_mode="shfit", curvature_uncertainty=0.3), "curvature_mode"),
                      (dict(curvature_mode="shfit"), "curvature_mode"),
                      (dict(sampling_rate=1.5), "sampling_rate"), (dict(sampling_rate=0.0), "sampling_rate"),
                      (dict(curvature_uncertainty=-0.1), "curvature_uncertainty"),
                      (dict(curvature_uncertainty=float("inf")), "curvature_uncertainty"),
                      (dict(effective_relaxations=0.0), "effective_relaxations"),
                      (dict(n_means=0), "n_means"), (dict(n_means=4), "n_means")):
        with pytest.raises(ValueError, match=name):
            linear_response_posterior(st, **{**kw, **bad})


def _widths_error(K_est, K):
    """Mean |log| ratio of the estimated to the true marginal variances (K^-1)_jj."""
    return np.mean(np.abs(np.log(np.diag(np.linalg.inv(K_est)) / np.diag(np.linalg.inv(K)))))


def test_shrinkage_removes_the_noise_bulk_of_a_short_window():
    # 11 uncorrelated coordinates, 7 relaxation times each in the window: the sample
    # covariance's eigenvalues spread like a Marchenko-Pastur bulk and the
    # per-direction inversion reads 0 to 80 relaxation times (medians over the
    # chains), the widths' mean |log| error 3.5; shrunk towards the target the known
    # diagonal implies, 0.1, and the intensity is large.
    p, step, n = 11, 1e-3, 7_000
    K = np.eye(p)
    plain, shrunk, intensity = [], [], []
    for st in _chains(np.eye(p), 24, n + 6_000, 6_000, step, seed=4):
        S = st.wander_covariance()
        args = (np.full(p, step), np.ones(p), st.count)
        plain.append(_widths_error(window_curvature(S, *args, floor=1e-3)[0], K))
        S2, info = shrink_wander_covariance(S, *args, np.diag(K))
        shrunk.append(_widths_error(window_curvature(S2, *args, floor=1e-3)[0], K))
        intensity.append(info["intensity"])
        # a direction named in ``keep`` keeps its variance; the result stays PSD
        v = np.linspace(1.0, 2.0, p)
        S3, _ = shrink_wander_covariance(S, *args, np.diag(K), keep=v)
        assert v @ S3 @ v == pytest.approx(v @ S @ v, rel=1e-9)
        assert np.linalg.eigvalsh(S3).min() > 0
    assert np.median(plain) > 1.0 and np.median(shrunk) < 0.3, (np.median(shrunk),
                                                                 np.median(plain))
    assert np.median(intensity) > 0.5
    assert all(0 <= a <= 1 for a in intensity)


def test_shrinkage_keeps_a_direction_only_the_prior_restrains():
    # (1, -1, 0, ...) has no curvature: its walk's variance clears the bulk's edge, the
    # direction is kept, and it reads as it does without shrinkage (a few relaxation
    # times at most, often the floor), not as a bulk direction (60 relaxation times).
    p, step, n, floor = 6, 0.01, 6_000, 1e-3
    K = np.eye(p)
    K[:2, :2] = 1.0  # rank-deficient along (1, -1)
    v = np.r_[1.0, -1.0, np.zeros(p - 2)] / np.sqrt(2)
    args = (np.full(p, step), np.ones(p))
    for st in _chains(K, 10, n + 600, 600, step, seed=5):
        S = st.wander_covariance()
        S2, info = shrink_wander_covariance(S, *args, st.count, np.diag(K))
        shrunk = v @ window_curvature(S2, *args, st.count, floor=floor)[0] @ v
        plain = v @ window_curvature(S, *args, st.count, floor=floor)[0] @ v
        assert info["n_kept"] >= 1
        assert shrunk == pytest.approx(plain, rel=0.2)
        assert shrunk < 0.3  # at most 18 relaxation times in the window, the bulk 60


def test_shrinkage_fades_with_many_relaxations():
    # 710-880 relaxation times in the window along the stiff directions (11 along the
    # slow one, which the strong coupling makes a spike): the sample covariance is
    # accurate, the intensity small and the curvature as without shrinkage.
    step, n = 0.05, 8_000
    for st in _chains(K_TRUE[:3, :3], 5, n + 500, 500, step, seed=6):
        args = (np.full(3, step), np.ones(3), st.count)
        S2, info = shrink_wander_covariance(st.wander_covariance(), *args, np.diag(K_TRUE))
        assert info["intensity"] < 0.1
        np.testing.assert_allclose(window_curvature(S2, *args)[0],
                                   window_curvature(st.wander_covariance(), *args)[0],
                                   rtol=0.15, atol=0.05)


def test_mean_field_curvature_reads_the_scales():
    st = _chains(K_TRUE, 1, 1_000, 100, 0.05)[0]
    stats = TraceStatistics(count=st.count, shift=np.r_[st.shift, np.zeros(3)],
                            sum_x=np.r_[st.sum_x, np.full(3, st.count * np.log(np.expm1(0.5)))],
                            sum_xx=np.r_[st.sum_xx, np.zeros(3)], sum_g=np.zeros(6),
                            sum_gg=np.zeros(6), sum_gx=np.zeros(6))
    np.testing.assert_allclose(mean_field_curvature(stats, 3, 0.1), 0.1 / 0.25)



def test_mean_field_curvature_undoes_the_scales_wander():
    # constant-step SGD on a scale coordinate rho (s = softplus(rho)) with the expected
    # gradient s'(rho) (1 / s - s H) and noise: it settles where the *average* gradient
    # vanishes, so softplus(mean rho) is low and 1 / s^2 stiff; the corrected reading
    # solves the averaged stationarity condition
    H, chains, steps, step = 100.0, 20, 20_000, 0.01
    rng = np.random.default_rng(3)
    rho = np.full(chains, np.log(np.expm1(H**-0.5)))
    trace = np.empty((steps + 1, chains))
    trace[0] = rho
    for t in range(steps):
        s, slope = np.logaddexp(0.0, rho), 0.5 * (1 + np.tanh(0.5 * rho))
        rho = rho + step * (slope * (1 / s - s * H) + 3.8 * rng.standard_normal(chains))
        trace[t + 1] = rho
    burn_in = 2_000
    phi = np.stack([np.zeros_like(trace), trace], axis=-1).transpose(1, 0, 2)  # (chains, T+1, 2)
    corrected, plain = [], []
    for chain in phi:
        stats = TraceStatistics.from_trace(chain, np.zeros((steps, 2)), burn_in)
        corrected.append(mean_field_curvature(stats, 1, 1.0)[0])
        plain.append(mean_field_curvature(stats, 1, 1.0, wander=False)[0])
    assert np.std(trace[burn_in:]) > 0.15  # the wander is real
    assert np.mean(corrected) == pytest.approx(H, rel=0.02)
    assert np.mean(plain) > 1.05 * H

def _one_direction_stats(x_bar, g_bar, n):
    """TraceStatistics of a window with the given means of x and g (sums only)."""
    d = len(x_bar)
    return TraceStatistics(count=n, shift=np.zeros(d), sum_x=n * np.asarray(x_bar, float),
                           sum_xx=np.zeros(d), sum_g=n * np.asarray(g_bar, float),
                           sum_gg=np.zeros(d), sum_gx=np.zeros(d), sum_xxt=np.zeros((d, d)))


def test_uncertain_extrapolation_lengthens_the_extrapolation_on_average():
    # Two coordinates: one read off 2 relaxation times (s^2 = c / 2 = 1), one at the
    # prior's floor (its curvature is the prior's, known). With a vague prior the
    # point estimate is x_bar - e; mode "shift" multiplies e by exp(-s z + s^2 / 2),
    # whose mean is exp(s^2) = exp(1): on average the optimum lies exp(1) e below x_bar.
    steps, n, floor = np.full(2, 0.01), 1_000, 1e-4
    K = np.diag([2 / (0.01 * n), floor])
    x_bar, g_bar = np.array([1.0, 0.5]), np.array([0.004, 1e-6])
    e = g_bar / np.diag(K)
    stats = _one_direction_stats(x_bar, g_bar, n)
    args = (K, stats, steps, np.full(2, 1e-6), 2.0, floor, 1e3, 200_000)
    point = uncertain_extrapolation(*args[:4], 0.0, *args[5:], random_state=0)
    np.testing.assert_allclose(point.mean(0), x_bar - e, rtol=1e-3)
    drawn = uncertain_extrapolation(*args, random_state=0)
    assert drawn.shape == (200_000, 2)
    np.testing.assert_allclose(drawn[:, 1], point[:, 1])  # the floor's direction
    assert (x_bar[0] - drawn[:, 0]).mean() == pytest.approx(np.e * e[0], rel=0.05)
    # the log of the extrapolation's factor is normal with sd sqrt(c / N) = 1
    assert np.log((x_bar[0] - drawn[:, 0]) / e[0]).std() == pytest.approx(1.0, rel=0.03)
    capped = uncertain_extrapolation(*args, random_state=0, max_sd=0.5)
    assert np.log((x_bar[0] - capped[:, 0]) / e[0]).std() == pytest.approx(0.5, rel=0.03)
    # mode "posterior": a soft draw errs widely and the prior (sd 0.05 here) pulls it
    # back to x_bar, so the optimum stays within the prior's reach of x_bar
    tight = (K, stats, steps, np.full(2, 1e-6), 2.0, floor, 0.05, 20_000)
    post = uncertain_extrapolation(*tight, random_state=0, mode="posterior")
    shift = uncertain_extrapolation(*tight, random_state=0, mode="shift")
    assert np.abs(post[:, 0] - x_bar[0]).max() < np.abs(shift[:, 0] - x_bar[0]).max()
    with pytest.raises(ValueError, match="mode"):
        uncertain_extrapolation(*tight, mode="both")


def _lagging_chains(phi_star, n_chains, n_steps, burn_in, step, seed):
    """:func:`_chains` around ``phi_star``, started at 0: the slow direction still
    relaxes through the window."""
    rng = np.random.default_rng(seed)
    phi = np.zeros((n_steps + 1, n_chains, 3))
    grads = np.empty((n_steps, n_chains, 3))
    for t in range(n_steps):
        grads[t] = (phi[t] - phi_star) @ K_TRUE + rng.standard_normal((n_chains, 3))
        phi[t + 1] = phi[t] - step * grads[t]
    return [TraceStatistics.from_trace(phi[:, r], grads[:, r], burn_in) for r in range(n_chains)]


def test_curvature_uncertainty_widens_a_lagging_slow_direction():
    # The slow direction (curvature 0.027) relaxes 2.7 times in the window and starts
    # it behind the optimum: the point estimate of K extrapolates with a curvature
    # known to about sqrt(2 / 2.7), and the optimum's posterior along it is too
    # narrow (z sd about 1.7 over 60 chains). Drawing the curvature per component
    # (c = 2) widens it on the same chains.
    step, n, burn_in = 0.05, 2_000, 400
    lam_slow, v = _slow_direction(K_TRUE)
    phi_star = 3 * v + np.array([0.3, -0.2, 0.5])
    z = {0.0: [], 2.0: []}
    for k, st in enumerate(_lagging_chains(phi_star, 60, n + burn_in, burn_in, step, seed=7)):
        for c in z:
            comps, _ = linear_response_posterior(
                st, n_means=3, learning_rate=np.full(3, step), noise_std=np.ones(3),
                sampling_rate=0.5, prior_scale=30.0, prior_sd=30.0, n_components=2000,
                curvature_uncertainty=c, random_state=k)
            along = comps.mean @ v
            z[c].append((along.mean() - phi_star @ v) / along.std())
    plain, drawn = np.std(z[0.0]), np.std(z[2.0])
    assert plain > 1.5, plain
    assert drawn < plain - 0.1, (drawn, plain)


def test_matched_curvature_is_exact_on_the_stationary_covariance():
    # S = (gamma q / 2) K^-1 is the wander a curvature K leaves at stationarity; its
    # diagonal given, nothing needs correcting: K comes back (multipliers 0)
    steps = np.array([0.01, 0.02, 0.005])
    noise_var = 2e-3 / steps  # the same innovation gamma_j q_j for every coordinate
    S = 1e-3 * np.linalg.inv(K_TRUE)
    K, info = matched_curvature(S, steps, noise_var, np.diag(K_TRUE))
    np.testing.assert_allclose(K, K_TRUE, rtol=1e-6, atol=1e-8)
    assert info["converged"] and info["constraint_error"] < 1e-8


def test_matched_curvature_keeps_the_diagonal_and_compresses_the_spread():
    # 12 isotropic directions relaxing about 15 times in the window: the sample
    # covariance of so few looks spreads its eigenvalues, which the window reading
    # turns into curvatures several times too stiff; matching the (known) diagonal
    # keeps the diagonal exact and the stiffest direction far closer to the truth
    p, step, n = 12, 0.005, 3_000
    K_iso = np.eye(p)
    worst_window, worst_matched = [], []
    for st in _chains(K_iso, 6, n + 500, 500, step, seed=11):
        S = st.wander_covariance()
        args = (np.full(p, step), np.ones(p))
        K_w, _ = window_curvature(S, *args, st.count, floor=1e-3)
        K_m, info = matched_curvature(S, *args, np.ones(p), floor=1e-3)
        assert info["converged"]
        np.testing.assert_allclose(np.diag(K_m), 1.0, rtol=1e-6)
        worst_window.append(np.linalg.eigvalsh(K_w)[-1])
        worst_matched.append(np.linalg.eigvalsh(K_m)[-1])
    assert np.median(worst_window) > 3.0, worst_window
    assert np.median(worst_matched) < 0.6 * np.median(worst_window), worst_matched


def test_matched_curvature_takes_the_prior_along_flat_directions():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((200, 4))
    S = A.T @ A / 200
    v = np.array([1.0, 1.0, 0.0, -1.0]) / np.sqrt(3)
    K, info = matched_curvature(S, np.ones(4), np.ones(4), np.full(4, 2.0), floor=0.01,
                                flat_directions=v[None])
    assert info["converged"]
    assert v @ K @ v == pytest.approx(0.01)
    np.testing.assert_allclose(K @ v, 0.01 * v, atol=1e-12)  # no cross terms with v
    assert np.linalg.eigvalsh(K)[0] > 0


def test_linear_response_posterior_match_diagonal_needs_the_diagonal():
    st = _chains(K_TRUE, 1, 1_000, 100, 0.05)[0]
    with pytest.raises(ValueError, match="match_diagonal needs diagonal_curvature"):
        linear_response_posterior(st, n_means=3, learning_rate=np.full(3, 0.05),
                                  noise_std=np.ones(3), sampling_rate=1.0, match_diagonal=True)
    comps, info = linear_response_posterior(
        st, n_means=3, learning_rate=np.full(3, 0.05), noise_std=np.ones(3),
        sampling_rate=1.0, prior_scale=100.0, diagonal_curvature=np.diag(K_TRUE),
        match_diagonal=True, n_components=50, random_state=0)
    np.testing.assert_allclose(np.diag(info["curvature"]), np.diag(K_TRUE), rtol=1e-6)
    assert info["converged"] and len(info["relaxation_times"]) == 3


def test_shrinking_the_bulk_before_matching_compresses_a_spurious_spread():
    # Eight uncorrelated coordinates (K = I) relax 20 times in the window: the matched
    # curvature read off the raw wander spreads its eigenvalues (sampling noise, 0.35-1.9
    # here); with the bulk shrunk first they come back towards the truth, 1, in every
    # chain (a direction beyond the bulk's edge may keep its reading); with either gate
    # closed (more than 20 relaxations asked for, or fewer than 8 / 20 means per
    # relaxation allowed) nothing changes.
    p, step, n = 8, 0.01, 2_000
    common = dict(n_means=p, learning_rate=np.full(p, step), noise_std=np.ones(p),
                  sampling_rate=1.0, prior_scale=100.0, diagonal_curvature=np.ones(p),
                  match_diagonal=True, n_components=20, random_state=0)
    errors = {"raw": [], "shrunk": []}
    for st in _chains(np.eye(p), 6, n + 500, 500, step, seed=4):
        raw = linear_response_posterior(st, **common)[1]
        shrunk = linear_response_posterior(st, shrink_before_matching=(10.0, 0.5), **common)[1]
        for name, info in (("raw", raw), ("shrunk", shrunk)):
            errors[name].append(np.abs(np.log(np.linalg.eigvalsh(info["curvature"]))).mean())
        assert errors["shrunk"][-1] < errors["raw"][-1]
        assert "intensity" in shrunk and "intensity" not in raw
        for gates in ((25.0, 0.5), (10.0, 0.3)):
            closed = linear_response_posterior(st, shrink_before_matching=gates, **common)[1]
            np.testing.assert_array_equal(closed["curvature"], raw["curvature"])
    assert np.mean(errors["shrunk"]) < 0.5 * np.mean(errors["raw"]), errors


def test_the_wander_curvature_readers_name_bad_inputs():
    # before: NaN (a negative step's square root) or a curvature of the wrong sign
    from skdpvi.noise_aware import (correlation_step_matrix, remove_wander_bias,
                                    shrink_wander_covariance, wander_curvature)
    S, steps, q = np.eye(2) * 0.01, np.full(2, 0.01), np.ones(2)
    readers = [lambda **k: window_curvature(**{"n_steps": 1000, **k}),
               lambda **k: wander_curvature(**k),
               lambda **k: matched_curvature(**{"diagonal": np.ones(2), **k}),
               lambda **k: shrink_wander_covariance(**{"n_steps": 1000,
                                                       "diagonal_curvature": np.ones(2), **k})]
    for read in readers:
        read(covariance=S, steps=steps, noise_var=q)
        for bad, message in ((dict(steps=-steps), "steps must be finite and > 0"),
                             (dict(steps=steps[:1]), r"steps must have shape \(2,\)"),
                             (dict(noise_var=np.array([1.0, np.nan])), "noise_var must be"),
                             (dict(covariance=np.ones(3)), "covariance must be a square matrix"),
                             (dict(covariance=S * np.inf), "covariance contains NaN")):
            with pytest.raises(ValueError, match=message):
                read(**{"covariance": S, "steps": steps, "noise_var": q, **bad})
    with pytest.raises(ValueError, match="n_steps must be a number >= 1"):
        window_curvature(S, steps, q, 0)
    with pytest.raises(ValueError, match="floor must be a finite number >= 0"):
        window_curvature(S, steps, q, 1000, floor=-1.0)
    with pytest.raises(ValueError, match="diagonal must be finite and > 0"):
        matched_curvature(S, steps, q, np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="width must be a finite number >= 0"):
        remove_wander_bias(np.zeros((3, 2)), -0.1)
    with pytest.raises(ValueError, match="prior_scale"):
        remove_wander_bias(np.zeros((3, 2)), 0.1, prior_scale=0.0)
    with pytest.raises(ValueError, match="gram must be a square matrix"):
        correlation_step_matrix(np.ones(3))
    with pytest.raises(ValueError, match=r"floor must be a number in \(0, 1\]"):
        correlation_step_matrix(np.eye(2), floor=0.0)
    np.testing.assert_array_equal(correlation_step_matrix(np.eye(2) * np.nan), np.eye(2))
