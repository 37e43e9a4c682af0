"""The recording-phase step matrix from the released burn-in (noise_aware.preconditioning)."""

import numpy as np
import pytest

from skdpvi.models import LinearRegressionModel
from skdpvi.noise_aware.preconditioning import correlation_step_matrix, recording_step_matrix


def _equicorrelated_gram(p, rho, n, scales):
    corr = (1 - rho) * np.eye(p) + rho
    return n * corr * np.outer(scales, scales)


def test_correlation_step_matrix_speeds_up_the_soft_directions_only():
    scales = np.array([1.0, 2.0, 0.5, 3.0])
    gram = _equicorrelated_gram(4, 0.9, 1000, scales)
    M = correlation_step_matrix(gram)
    # in units of the diagonal, the drift M G relaxes every soft direction (correlation
    # eigenvalue 0.1) at the rate of an uncorrelated coordinate (1) and leaves the
    # stiff one (3.7) as it was: eigenvalues max(lambda, 1)
    root = np.sqrt(np.diag(gram))
    drift = (M @ gram) / np.outer(root, root)
    np.testing.assert_allclose(np.sort(np.linalg.eigvals(drift).real), [1, 1, 1, 3.7], rtol=1e-8)
    np.testing.assert_allclose(correlation_step_matrix(np.diag(scales**2)), np.eye(4), atol=1e-12)
    # unusable estimates (a non-positive or non-finite diagonal) change nothing
    for bad in (np.diag([1.0, -1.0, 1.0, 1.0]), np.full((4, 4), np.nan)):
        np.testing.assert_array_equal(correlation_step_matrix(bad), np.eye(4))


def test_correlation_step_matrix_floors_the_amplification():
    # a nearly singular (or indefinite) estimate: the step grows by at most 1 / floor
    gram = _equicorrelated_gram(3, 0.999, 1000, np.ones(3))
    gram[0, 1] = gram[1, 0] = 1005.0  # indefinite
    for floor in (0.05, 0.2):
        values = np.linalg.eigvals(correlation_step_matrix(gram, floor))
        assert np.all(np.isfinite(values))
        assert np.max(np.abs(values)) == pytest.approx(1 / floor, rel=1e-6)
        assert np.min(values.real) > 0


def _linear_release(X, y, model, noise, n_steps, rng):
    """A release of a linear model with known statistics: pairs around the optimum."""
    n = len(X)
    st = model.data_statistics(n)
    Xi = np.c_[X, np.ones(n)]
    eta = np.r_[(Xi.T @ Xi)[st.rows, st.cols], Xi.T @ y, y @ y]
    w = np.linalg.lstsq(Xi, y, rcond=None)[0]
    d = 2 * model.n_params
    center = np.r_[w, -3.0, np.full(model.n_params, -4.0)]
    phi = center + np.r_[np.full(len(w), 0.05), np.full(d - len(w), 0.01)] * rng.standard_normal(
        (n_steps, d))
    kappa = 0.1
    grads = kappa * st.expected_gradient(phi, eta) + rng.normal(0, noise, (n_steps, d))
    return st, Xi.T @ Xi, phi, grads, kappa


def test_recording_step_matrix_estimates_the_correlation_from_released_pairs():
    rng = np.random.default_rng(0)
    n, p = 4000, 3
    f = rng.standard_normal((n, 1))
    X = np.sqrt(0.1) * rng.standard_normal((n, p)) + np.sqrt(0.9) * f
    y = X @ [0.5, -0.2, 0.3] + rng.normal(0, 0.5, n)
    model = LinearRegressionModel(p)
    st, gram, phi, grads, kappa = _linear_release(X, y, model, 5.0, 2000, rng)
    M = recording_step_matrix(st, sampling_rate=kappa, noise_std=5.0)(phi, grads)
    want = correlation_step_matrix(gram[:p, :p])  # the features' block
    assert M.shape == (2 * model.n_params,) * 2
    # the intercept, the noise variance and the scales keep the plain step
    identity = np.eye(2 * model.n_params)
    np.testing.assert_array_equal(M[p:, :], identity[p:, :])
    np.testing.assert_array_equal(M[:, p:], identity[:, p:])
    # the soft directions' amplification (about 10x) is recovered within 20 %
    values, vectors = np.linalg.eigh(gram[:p, :p])
    soft = vectors[:, :2]
    np.testing.assert_allclose(np.diag(soft.T @ M[:p, :p] @ soft),
                               np.diag(soft.T @ want @ soft), rtol=0.2)
    assert np.all(np.diag(soft.T @ want @ soft) > 5)
    # the engine's repeated calls on a growing trace: the kept normal equations of the
    # pairs seen before give the matrix of one pass over all of them
    growing = recording_step_matrix(st, sampling_rate=kappa, noise_std=5.0)
    growing(phi[:700], grads[:700])
    growing(phi[:1300], grads[:1300])
    np.testing.assert_allclose(growing(phi, grads), M, rtol=1e-9, atol=1e-12)
    # too few pairs: the identity
    np.testing.assert_array_equal(
        recording_step_matrix(st, sampling_rate=kappa, noise_std=5.0)(phi[:4], grads[:4]),
        np.eye(2 * model.n_params))


def test_step_curvature_of_each_model():
    """Linear regression preconditions the features' block of X^T X (the intercept keeps
    the plain step); logistic regression all the means, by the ELBO's curvature
    Lambda (projected onto the PSD cone) + I / tau^2."""
    from skdpvi.models import LogisticRegressionModel
    from skdpvi.models.statistics import vech_indices

    linear = LinearRegressionModel(2).data_statistics(100)
    gram = np.array([[4.0, 1.0, 0.5], [1.0, 9.0, 0.2], [0.5, 0.2, 100.0]])
    rows, cols = vech_indices(3)
    eta = np.zeros(linear.n_statistics)
    eta[:len(rows)] = gram[rows, cols]
    block, curvature = linear.step_curvature(eta)
    np.testing.assert_array_equal(block, [0, 1])
    np.testing.assert_allclose(curvature, gram[:2, :2])

    logistic = LogisticRegressionModel(1, prior_scale=2.0).data_statistics(100)
    lam = np.array([[3.0, 0.0], [0.0, -1.0]])  # a negative eigenvalue is projected to 0
    rows, cols = vech_indices(2)
    eta = np.zeros(logistic.n_statistics)
    eta[:len(rows)] = lam[rows, cols]
    block, curvature = logistic.step_curvature(eta)
    np.testing.assert_array_equal(block, [0, 1])
    np.testing.assert_allclose(curvature, np.diag([3.0, 0.0]) + np.eye(2) / 4.0)


def test_rate_cap_keeps_slow_directions_and_caps_fast_ones():
    from skdpvi.noise_aware.preconditioning import MAX_RELAXATION_RATE, rate_cap

    rng = np.random.default_rng(3)
    basis = np.linalg.qr(rng.standard_normal((4, 4)))[0]
    rates = np.array([0.01, 0.3, 3.0, 40.0])
    K = (basis * rates) @ basis.T
    capped = np.linalg.eigvals(rate_cap(K) @ K).real
    want = rates / (1 + (rates / MAX_RELAXATION_RATE) ** 4) ** 0.25
    np.testing.assert_allclose(np.sort(capped), want, rtol=1e-8)
    assert np.max(capped) < MAX_RELAXATION_RATE
    # slow directions keep their rate (within 1.5 % below half the cap)
    np.testing.assert_allclose(want[:2], rates[:2], rtol=0.015)
    # a non-symmetric rate matrix (a step matrix times a curvature) with real rates
    M = np.array([[2.0, 0.5], [0.0, 1.0]])
    H = np.array([[3.0, 1.0], [1.0, 2.0]])
    capped = np.linalg.eigvals(rate_cap(M @ H, 0.5) @ M @ H)
    assert np.all(np.abs(capped.imag) < 1e-10) and np.all(capped.real < 0.5)
    assert np.array_equal(rate_cap(np.full((2, 2), np.nan)), np.eye(2))


def test_recording_step_matrix_caps_the_relaxation_rate_of_a_large_feature():
    """One feature at sd 10 relaxes 100 times faster than the others: with the step's
    learning rate given, the matrix brings every direction of M lambda kappa H below the
    cap (in the model's own curvature at the trace's last point) and leaves the slow
    ones as the correlation matrix alone had them."""
    from skdpvi.noise_aware.preconditioning import MAX_RELAXATION_RATE

    rng = np.random.default_rng(1)
    n, p = 4000, 3
    X = rng.standard_normal((n, p)) * [1.0, 10.0, 1.0]
    y = X @ [0.5, -0.2, 0.3] + rng.normal(0, 0.5, n)
    model = LinearRegressionModel(p)
    st, gram, phi, grads, kappa = _linear_release(X, y, model, 5.0, 2000, rng)
    e1 = st._parts(phi[-1:])["e1"][0]
    hessian = e1 * (gram + np.eye(p + 1) / model.weight_scale**2)
    lr = 0.02 / (kappa * hessian[0, 0])  # unit features relax 2 % a step, the large one 2x
    plain = recording_step_matrix(st, sampling_rate=kappa, noise_std=5.0)(phi, grads)
    capped = recording_step_matrix(st, sampling_rate=kappa, noise_std=5.0,
                                   learning_rate=lr)(phi, grads)
    block = np.arange(p + 1)
    rates = np.linalg.eigvals(capped[np.ix_(block, block)] @ (lr * kappa * hessian)).real
    assert np.max(rates) < 1.05 * MAX_RELAXATION_RATE  # the cap at the release's estimate
    before = np.sort(np.linalg.eigvals(plain[np.ix_(block, block)] @ (lr * kappa * hessian)).real)
    assert before[-1] > 1.5  # the estimate without the cap: the large feature near divergence
    np.testing.assert_allclose(np.sort(rates)[:-1], before[:-1], rtol=0.02)
    # everything but the means keeps the plain step
    np.testing.assert_array_equal(capped[p + 1:], np.eye(2 * model.n_params)[p + 1:])
    # no cap asked: the correlation matrix alone
    np.testing.assert_array_equal(
        recording_step_matrix(st, sampling_rate=kappa, noise_std=5.0, learning_rate=lr,
                              max_rate=None)(phi, grads), plain)


def test_mean_curvature_is_the_jacobian_of_the_expected_gradient():
    from skdpvi.models import LogisticRegressionModel

    rng = np.random.default_rng(2)
    for model in (LinearRegressionModel(3), LogisticRegressionModel(3)):
        st = model.data_statistics(500)
        p = model.n_weights
        eta = rng.standard_normal(st.n_statistics)
        A = rng.standard_normal((p, p))
        eta[:st.n_vech] = (A @ A.T + 50 * np.eye(p))[st.rows, st.cols]
        phi = np.r_[rng.normal(0, 0.3, model.n_params), rng.normal(-3, 0.3, model.n_params)]
        block, hessian = st.mean_curvature(eta, phi)
        np.testing.assert_array_equal(block, np.arange(p))
        step = 1e-6
        numeric = np.empty((p, p))
        for k in range(p):
            up, down = phi.copy(), phi.copy()
            up[k] += step
            down[k] -= step
            numeric[:, k] = (st.expected_gradient(up[None], eta)[0, :p]
                             - st.expected_gradient(down[None], eta)[0, :p]) / (2 * step)
        np.testing.assert_allclose(hessian, numeric, rtol=1e-5, atol=1e-6)
