"""The coupled error model of the means (skdpvi/noise_aware/coupling.py)."""

import numpy as np
import pytest
from scipy.linalg import solve_discrete_lyapunov

from skdpvi.dpvi import DPVIResult, TraceStatistics
from skdpvi.noise_aware import coupled_means, sample_phi_star, wander_curvature

# a strongly coupled curvature: eigenvalues 0.05 and 2.2 in the first two coordinates
K_TRUE = np.array([[1.0, 0.95, 0.0], [0.95, 1.0, 0.3], [0.0, 0.3, 2.0]])
PHI_STAR = np.array([0.5, -0.3, 1.0])


def _stationary_covariance(K, steps, noise_var):
    # x' = (I - Gamma K) x - Gamma e: S = M S M^T + Gamma Q Gamma
    M = np.eye(len(steps)) - steps[:, None] * K
    return solve_discrete_lyapunov(M, np.diag(steps**2 * noise_var))


@pytest.mark.parametrize("steps, noise_var", [
    (np.full(3, 0.02), np.ones(3)),
    (np.array([0.02, 0.05, 0.01]), np.array([1.0, 4.0, 0.5])),
])
def test_wander_curvature_recovers_the_curvature_from_the_exact_covariance(steps, noise_var):
    S = _stationary_covariance(K_TRUE, steps, noise_var)
    np.testing.assert_allclose(wander_curvature(S, steps, noise_var), K_TRUE, atol=1e-8)
    # the continuous-time solution alone is off by O(step)
    rough = wander_curvature(S, steps, noise_var, n_iter=0)
    assert 1e-4 < np.abs(rough - K_TRUE).max() < 0.1


def _chains(n_chains, n_steps, burn_in, step=0.05, noise_sd=1.0, seed=0):
    """Lockstep linear-Gaussian DP-SGD chains on K_TRUE: their TraceStatistics each."""
    rng = np.random.default_rng(seed)
    d = len(PHI_STAR)
    phi = np.zeros((n_steps + 1, n_chains, d))
    grads = np.empty((n_steps, n_chains, d))
    for t in range(n_steps):
        grads[t] = (phi[t] - PHI_STAR) @ K_TRUE + noise_sd * rng.standard_normal((n_chains, d))
        phi[t + 1] = phi[t] - step * grads[t]
    return [TraceStatistics.from_trace(phi[:, r], grads[:, r], burn_in) for r in range(n_chains)]


def _result(stats, step=0.05, noise_sd=1.0):
    d = stats.dim
    return DPVIResult(phi=stats.shift, stats=stats, noise_multiplier=noise_sd, clip_norm=1.0,
                      sampling_rate=1.0, preconditioner=np.ones(d),
                      learning_rate=np.full(d, step), n_steps=stats.count, burn_in=0)


def test_coupled_model_covers_phi_star_and_the_diagonal_model_does_not():
    # Coverage of the 90 % ellipsoid along the low-curvature direction (1, -1, 0),
    # where the coupled errors add up: the coupled model's intervals cover phi* at
    # the stated rate over 60 chains; the diagonal model, whose errors are
    # independent per coordinate, is far too narrow there. (The window holds 150
    # relaxation times of the slow direction; with 25 the noise of the measured
    # covariance leaves the coupled z sd at 1.2-1.5.)
    stats = _chains(60, 16_000, 1_000, step=0.2)
    v = np.array([1.0, -1.0, 0.0]) / np.sqrt(2)
    z_coupled, z_diagonal = [], []
    for k, st in enumerate(stats):
        res = _result(st, step=0.2)
        draws, _ = coupled_means(np.zeros((4000, 3)), st, n_means=3,
                                 learning_rate=res.learning_rate, noise_std=res.noise_std,
                                 random_state=k)
        diag, _ = sample_phi_star(res, "exact", 4000, random_state=k, check=False)
        for out, d in ((z_coupled, draws), (z_diagonal, diag)):
            along = d @ v
            out.append((along.mean() - PHI_STAR @ v) / along.std())
    z_coupled, z_diagonal = np.array(z_coupled), np.array(z_diagonal)
    assert 0.75 < z_coupled.std() < 1.35, z_coupled.std()
    assert abs(z_coupled.mean()) < 0.5
    assert z_diagonal.std() > 5.0, z_diagonal.std()


def test_coupled_means_keeps_the_other_columns_and_needs_cross_sums():
    st = _chains(1, 3_000, 500)[0]
    res = _result(st)
    phi = np.column_stack([np.zeros((100, 3)), np.arange(100.0)])
    stats = TraceStatistics(count=st.count, shift=np.r_[st.shift, 0.0],
                            sum_x=np.r_[st.sum_x, 0.0], sum_xx=np.r_[st.sum_xx, 1.0],
                            sum_g=np.r_[st.sum_g, 0.0], sum_gg=np.r_[st.sum_gg, 1.0],
                            sum_gx=np.r_[st.sum_gx, 0.0],
                            sum_xxt=np.pad(st.sum_xxt, ((0, 1), (0, 1))))
    out, info = coupled_means(phi, stats, n_means=3, learning_rate=np.r_[res.learning_rate, 1],
                              noise_std=np.r_[res.noise_std, 1], random_state=0)
    np.testing.assert_array_equal(out[:, 3], phi[:, 3])
    assert info["curvature"].shape == info["covariance"].shape == (3, 3)
    assert np.all(np.linalg.eigvalsh(info["covariance"]) > 0)
    again, _ = coupled_means(phi, stats, n_means=3, learning_rate=np.r_[res.learning_rate, 1],
                             noise_std=np.r_[res.noise_std, 1], random_state=0)
    np.testing.assert_array_equal(out, again)
    with pytest.raises(ValueError, match="prior_sd"):  # was a LinAlgError at 0
        coupled_means(phi, stats, n_means=3, learning_rate=np.r_[res.learning_rate, 1],
                      noise_std=np.r_[res.noise_std, 1], prior_sd=0.0)
    bare = TraceStatistics(count=st.count, shift=st.shift, sum_x=st.sum_x, sum_xx=st.sum_xx,
                           sum_g=st.sum_g, sum_gg=st.sum_gg, sum_gx=st.sum_gx)
    with pytest.raises(ValueError, match="cross sums"):
        coupled_means(phi[:, :3], bare, n_means=3, learning_rate=res.learning_rate,
                      noise_std=res.noise_std)
