"""The statistics posterior (skdpvi.noise_aware.statistics) on traces with a known answer."""

import warnings

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning

from skdpvi.dpvi import DPVIResult, TraceStatistics, run_dpvi
from skdpvi.models import LinearRegressionModel, LogisticRegressionModel
from skdpvi.noise_aware.statistics import StatisticsFit, statistics_posterior

KAPPA, TAU = 0.1, 2.0


def _true_logistic_eta(st, rng):
    """A dense, strongly coupled Lambda (correlation 0.6 between all coefficients)."""
    p = st.p
    corr = 0.6 * np.ones((p, p)) + 0.4 * np.eye(p)
    Lam = 400.0 * corr
    b = rng.normal(0, 50, p)
    return np.r_[Lam[st.rows, st.cols], b]


def _synthetic_trace(st, eta, rng, n_steps=4000, shift=None):
    """phi_t wandering as DP-SGD does; g_t = kappa (J(phi_t) eta + r(phi_t)) + noise."""
    d = 2 * st.p
    phi = np.zeros((n_steps + 1, d))
    phi[0, st.p:] = -2.0
    for t in range(n_steps):
        phi[t + 1] = phi[t] + rng.normal(0, 0.01, d) - 0.01 * (phi[t] - phi[0])
    J, r = st.design(phi[:-1])
    truth = np.broadcast_to(eta, (n_steps, len(eta))).copy()
    if shift is not None:
        truth[n_steps // 2:] += shift
    mean = np.einsum("tdk,tk->td", J, truth) + r
    grads = KAPPA * mean + rng.normal(0, TAU, (n_steps, d))
    return phi, grads


def _result(phi, grads):
    n_steps, d = grads.shape
    return DPVIResult(phi=phi[-1], stats=TraceStatistics.from_trace(phi, grads, 0),
                      noise_multiplier=TAU, clip_norm=1.0, sampling_rate=KAPPA,
                      preconditioner=np.ones(d), learning_rate=np.full(d, 0.01),
                      n_steps=n_steps, burn_in=0, trace_phi=phi, trace_grad=grads)


def _fit(st, phi, grads, gammas=None):
    precision = np.full(phi.shape[1], (KAPPA / TAU) ** 2)
    P, h, _ = st.normal_equations(phi[:-1], grads / KAPPA, precision)
    index, scale_of = st.shrinkage_groups()
    first = StatisticsFit(P, h, index, np.ones(len(index)), gammas=(0.0,))
    kwargs = {} if gammas is None else {"gammas": gammas}
    return StatisticsFit(P, h, index, scale_of(first.means[0]), **kwargs)


def test_coupled_model_recovers_a_dense_curvature_and_the_diagonal_one_does_not():
    """90 % intervals of the statistics cover the truth at their rate over seeds; the
    diagonal model (off-diagonal curvature fixed at 0) misses b whenever the
    coordinates are coupled."""
    st = LogisticRegressionModel(2).data_statistics(1000)
    covered, covered_diagonal = [], []
    for seed in range(30):
        rng = np.random.default_rng(seed)
        eta = _true_logistic_eta(st, rng)
        phi, grads = _synthetic_trace(st, eta, rng)
        for gammas, out in ((None, covered), ((0.0,), covered_diagonal)):
            fit = _fit(st, phi, grads, gammas)
            g = int(np.argmax(fit.weights))
            sd = np.sqrt(np.maximum(np.diag(fit.covs[g]), 1e-300))
            out.append(np.abs(fit.means[g] - eta) <= norm.ppf(0.95) * sd)
    covered, covered_diagonal = np.array(covered), np.array(covered_diagonal)
    assert 0.84 <= covered.mean() <= 0.96
    b = slice(st.n_vech, None)
    assert covered_diagonal[:, b].mean() < 0.5


def test_split_window_check_warns_when_the_halves_disagree_and_not_otherwise():
    st = LogisticRegressionModel(2).data_statistics(1000)
    rng = np.random.default_rng(5)
    eta = _true_logistic_eta(st, rng)
    shift = np.zeros_like(eta)
    shift[st.n_vech:] = 40.0  # b moves between the halves of the window
    phi, grads = _synthetic_trace(st, eta, rng, shift=shift)
    with pytest.warns(ConvergenceWarning, match="do not follow"):
        statistics_posterior(_result(phi, grads), st, 200, random_state=0)
    p_values = []
    for seed in range(8):
        rng = np.random.default_rng(100 + seed)
        phi, grads = _synthetic_trace(st, _true_logistic_eta(st, rng), rng)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            _, diag = statistics_posterior(_result(phi, grads), st, 200, random_state=0)
        p_values.append(diag["split_p_value"])
        assert 0.8 < diag["variance_ratio"] < 1.2
    assert np.mean(p_values) > 0.2  # roughly uniform under the model


def test_engine_run_with_little_noise_recovers_the_exact_posterior():
    """With the DP noise made negligible and no clipping, the noise-aware posterior is
    the exact normal-inverse-gamma posterior of the data."""
    rng = np.random.default_rng(0)
    n = 400
    X = rng.normal(size=(n, 2))
    y = X @ [0.8, -0.5] + 0.3 + rng.normal(0, 0.4, n)
    model = LinearRegressionModel(2, noise_shape=3.0, noise_scale=0.5)
    result = run_dpvi(model, (X, y), noise_multiplier=1e-3, clip_norm=1e4, sampling_rate=0.5,
                      n_steps=1500, burn_in=300, learning_rate=2e-4, preconditioner=50.0,
                      random_state=0, record_trace=True)
    components, _ = statistics_posterior(result, model.data_statistics(n), 400, random_state=0)
    draws = components.sample(np.random.default_rng(1).integers(400, size=20_000),
                              np.random.default_rng(2))
    Xp = np.c_[X, np.ones(n)]
    V = np.linalg.inv(Xp.T @ Xp + np.eye(3) / 4.0)
    m = V @ Xp.T @ y
    shape, scale = 3.0 + n / 2, 0.5 + 0.5 * (y @ y - m @ Xp.T @ y)
    sd = np.sqrt(np.diag(V) * scale / (shape - 1))
    np.testing.assert_allclose(draws[:, :3].mean(0), m, atol=0.2 * sd.max())
    np.testing.assert_allclose(draws[:, :3].std(0), sd, rtol=0.15)
    var = np.logaddexp(0, draws[:, 3])
    assert var.mean() == pytest.approx(scale / (shape - 1), rel=0.05)


def test_statistics_posterior_needs_the_trace():
    model = LinearRegressionModel(1)
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 1)), rng.normal(size=200)
    result = run_dpvi(model, (X, y), noise_multiplier=1.0, clip_norm=5.0, sampling_rate=0.2,
                      n_steps=50, burn_in=10, random_state=0)
    with pytest.raises(ValueError, match="record_trace"):
        statistics_posterior(result, model.data_statistics(200))
    with pytest.raises(ValueError, match="n_components"):
        statistics_posterior(result, model.data_statistics(200), 0)
