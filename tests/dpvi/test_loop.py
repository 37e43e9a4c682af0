"""One DPVI run (skdpvi.dpvi.loop): reproducibility, statistics, dynamics."""

import math

import numpy as np
import pytest

from skdpvi.dpvi import TraceStatistics, run_dpvi
from skdpvi.models import LogisticRegressionModel, Model


class GaussianMeanModel(Model):
    """y ~ N(theta, 1), theta ~ N(0, 10^2): the gradient in mu is linear."""

    param_names = ("mean",)

    def log_likelihood(self, theta, y):
        return -0.5 * (y[:, None] - theta[..., 0]) ** 2 - 0.5 * math.log(2 * math.pi)

    def log_prior(self, theta):
        return -0.5 * (theta[..., 0] / 10) ** 2


def test_engine_handles_empty_batches_and_is_reproducible():
    rng = np.random.default_rng(0)
    y = rng.normal(0.5, 1.0, 20)
    kwargs = dict(noise_multiplier=1.0, clip_norm=5.0, sampling_rate=0.02, n_steps=300,
                  burn_in=100, learning_rate=1e-3, random_state=3, return_diagnostics=True)
    a = run_dpvi(GaussianMeanModel(), (y,), **kwargs)
    b = run_dpvi(GaussianMeanModel(), (y,), **kwargs)
    np.testing.assert_array_equal(a.phi, b.phi)
    np.testing.assert_array_equal(a.stats.sum_gx, b.stats.sum_gx)
    assert a.diagnostics["mean_batch_size"] == pytest.approx(0.4, abs=0.15)
    c = run_dpvi(GaussianMeanModel(), (y,), **{**kwargs, "random_state": 4})
    assert not np.array_equal(a.phi, c.phi)


def test_running_statistics_equal_statistics_of_the_recorded_trace():
    rng = np.random.default_rng(0)
    y = rng.normal(0.5, 1.0, 200)
    res = run_dpvi(GaussianMeanModel(), (y,), noise_multiplier=2.0, clip_norm=5.0,
                   sampling_rate=0.1, n_steps=500, burn_in=100, learning_rate=1e-3,
                   random_state=0, record_trace=True)
    ref = TraceStatistics.from_trace(res.trace_phi, res.trace_grad, 100)
    for name in ("sum_x", "sum_xx", "sum_g", "sum_gg", "sum_gx"):
        np.testing.assert_allclose(getattr(res.stats, name), getattr(ref, name),
                                   rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(res.trace_phi[-1], res.phi)


def test_stationary_variance_matches_the_linear_gaussian_formula():
    """paper-spec 5.5: Var = (lambda sigma C)^2 / (1 - (1 - lambda kappa a)^2)."""
    rng = np.random.default_rng(0)
    n_examples, kappa, clip, sigma = 1000, 0.1, 10.0, 20.0
    y = rng.normal(0.5, 1.0, n_examples)
    a = n_examples + 1 / 100  # curvature of the negative ELBO in mu
    lam = 0.05 / (kappa * a)
    res = run_dpvi(GaussianMeanModel(), (y,), noise_multiplier=sigma, clip_norm=clip,
                   sampling_rate=kappa, n_steps=10_000, burn_in=500, learning_rate=lam,
                   init_mean=[y.mean()], init_scale=0.03, random_state=0, record_trace=True)
    mu = res.trace_phi[500:, 0]
    expected = (lam * sigma * clip) ** 2 / (1 - (1 - lam * kappa * a) ** 2)
    assert mu.var() == pytest.approx(expected, rel=0.2)
    # and the trace is centred on the optimum (the posterior mean of mu)
    assert mu.mean() == pytest.approx(y.sum() / a, abs=4 * np.sqrt(expected / 250))


def test_engine_gives_the_same_run_on_the_glm_and_the_dense_path(monkeypatch):
    import skdpvi.dpvi.loop as dpvi

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X @ [1.0, -2.0, 0.5] + rng.logistic(size=400) > 0).astype(float)
    kwargs = dict(noise_multiplier=2.0, clip_norm=1.0, sampling_rate=0.2, n_steps=60,
                  burn_in=20, learning_rate=1e-3, preconditioner=30.0, random_state=1,
                  return_diagnostics=True)
    runs = {}
    for name, threshold in (("glm", 0), ("dense", float("inf"))):
        monkeypatch.setattr(dpvi, "_GLM_PATH_MIN_BLOCK", threshold)
        runs[name] = run_dpvi(LogisticRegressionModel(3), (X, y), **kwargs)
    assert runs["glm"].diagnostics["clipped_fraction"] > 0.1  # clipping is exercised
    np.testing.assert_allclose(runs["glm"].phi, runs["dense"].phi, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(runs["glm"].stats.sum_gx, runs["dense"].stats.sum_gx,
                               rtol=1e-3, atol=1e-3)


def _logistic_run_setup(n_rows, n_features, n_steps, burn_in):
    """Random logistic data, its model and the run_dpvi settings of the trace tests."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_rows, n_features))
    y = (rng.random(n_rows) < 0.5).astype(np.float32)
    kwargs = dict(noise_multiplier=1.0, clip_norm=4.0, learning_rate=1e-3, sampling_rate=0.1,
                  n_steps=n_steps, burn_in=burn_in, record_trace=True)
    return X, y, LogisticRegressionModel(n_features), kwargs


def test_half_window_and_cross_sums_match_the_recorded_trace_single_and_batched():
    # the split-window test reads the sums per half of the recording window; they
    # must be those of the trace's halves, and a lockstep run's must equal its own
    from skdpvi.dpvi import run_dpvi_batched

    X, y, model, kwargs = _logistic_run_setup(2000, 3, n_steps=1301, burn_in=300)
    res = run_dpvi(model, (X, y), random_state=1, **kwargs)
    ref = TraceStatistics.from_trace(res.trace_phi, res.trace_grad, res.burn_in)
    assert [h.count for h in res.stats.halves] == [h.count for h in ref.halves] == [500, 501]
    for name in ("sum_x", "sum_xx", "sum_g", "sum_gg", "sum_gx"):
        for got, want in [(res.stats, ref), *zip(res.stats.halves, ref.halves)]:
            np.testing.assert_allclose(getattr(got, name), getattr(want, name),
                                       rtol=1e-7, atol=1e-7)
    # the cross sums of the coupled error model: sum x x^T over the whole window
    np.testing.assert_allclose(res.stats.sum_xxt, ref.sum_xxt, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(res.stats.wander_covariance(),
                               np.cov(res.trace_phi[res.burn_in:-1].T), rtol=1e-9, atol=1e-12)
    batched = run_dpvi_batched(model, [(X, y), (X, 1 - y)], random_states=[1, 2], **kwargs)
    for got, want in zip(batched[0].stats.halves, res.stats.halves):
        np.testing.assert_allclose(got.sum_gx, want.sum_gx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(batched[0].stats.sum_xxt, res.stats.sum_xxt, rtol=1e-5, atol=1e-6)


def test_step_scales_set_the_step_before_and_after_burn_in_single_and_batched():
    # phi_{t+1} - phi_t = -step_t * g_tilde_{t+1}: the recorded trace shows the step
    # of every coordinate, before burn-in x before, from burn-in on x after
    from skdpvi.dpvi import run_dpvi_batched

    X, y, model, kwargs = _logistic_run_setup(1000, 2, n_steps=200, burn_in=50)
    before, after = np.array([2.0, 2.0, 2.0, 1.0, 1.0, 1.0]), 0.5
    res = run_dpvi(model, (X, y), random_state=1, step_scales=(before, after), **kwargs)
    plain = run_dpvi(model, (X, y), random_state=1, **kwargs)
    step = -np.diff(res.trace_phi, axis=0) / res.trace_grad
    np.testing.assert_allclose(step[:50], np.broadcast_to(1e-3 * before, (50, 6)), rtol=1e-6)
    np.testing.assert_allclose(step[50:], 1e-3 * after, rtol=1e-6)
    np.testing.assert_allclose(res.learning_rate, 1e-3 * after)
    np.testing.assert_allclose(plain.learning_rate, 1e-3)
    # (1, 1) is the plain run, bit for bit
    same = run_dpvi(model, (X, y), random_state=1, step_scales=(1, 1), **kwargs)
    np.testing.assert_array_equal(same.trace_phi, plain.trace_phi)
    batched = run_dpvi_batched(model, [(X, y), (X, 1 - y)], random_states=[1, 2],
                               step_scales=(before, after), **kwargs)
    np.testing.assert_allclose(batched[0].trace_phi, res.trace_phi, rtol=1e-5, atol=1e-6)
    for bad in [(1.0,), (1.0, 0.0), (1.0, np.inf), (np.ones(5), 1.0)]:
        with pytest.raises(ValueError, match="step_scales"):
            run_dpvi(model, (X, y), random_state=1, step_scales=bad, **kwargs)


def test_step_matrix_is_applied_from_burn_in_and_fed_the_released_pairs(monkeypatch):
    # phi_{t+1} - phi_t = -M (lr * g_tilde_t) from burn-in on, with M computed from the
    # released pairs of steps burn_in // 2 .. t - 1 at burn-in and at each further tenth
    # of the window; before burn-in the plain step
    import skdpvi.dpvi.loop as loop
    from skdpvi.dpvi import run_dpvi_batched
    from skdpvi.dpvi.step_matrix import _MATRIX_UPDATES

    # the plain runs compared bit for bit take the torch step too (a step matrix is
    # not compiled: test_logistic_kernel compares the two steps)
    monkeypatch.setattr(loop, "kernel_layout", lambda *args: None)

    X, y, model, kwargs = _logistic_run_setup(1000, 2, n_steps=250, burn_in=50)
    calls = []
    matrix = np.eye(6) + 0.3 * np.eye(6, k=1)

    def step_matrix(trace_phi, trace_grad):
        calls.append((trace_phi.copy(), trace_grad.copy()))
        return matrix

    res = run_dpvi(model, (X, y), random_state=1, step_matrix=step_matrix, **kwargs)
    plain = run_dpvi(model, (X, y), random_state=1, **kwargs)
    step = -np.diff(res.trace_phi, axis=0)
    np.testing.assert_allclose(step[:50], 1e-3 * res.trace_grad[:50], rtol=1e-6)
    np.testing.assert_allclose(step[50:], 1e-3 * res.trace_grad[50:] @ matrix.T, rtol=1e-6,
                               atol=1e-12)
    np.testing.assert_array_equal(res.trace_phi[:51], plain.trace_phi[:51])
    assert len(calls) == _MATRIX_UPDATES
    at = [50 + k * 200 // _MATRIX_UPDATES for k in range(_MATRIX_UPDATES)]
    for (phi, grad), t in zip(calls, at):
        assert phi.shape == grad.shape == (t - 25, 6)
        np.testing.assert_array_equal(phi, res.trace_phi[25:t])
        np.testing.assert_array_equal(grad, res.trace_grad[25:t])
    # the identity changes nothing; lockstep runs call it with their own pairs
    same = run_dpvi(model, (X, y), random_state=1, step_matrix=lambda a, b: np.eye(6), **kwargs)
    np.testing.assert_array_equal(same.trace_phi, plain.trace_phi)
    batched = run_dpvi_batched(model, [(X, y), (X, 1 - y)], random_states=[1, 2],
                               step_matrix=lambda a, b: matrix, **kwargs)
    np.testing.assert_allclose(batched[0].trace_phi, res.trace_phi, rtol=1e-5, atol=1e-6)


def test_step_matrix_is_validated():
    X, y, model, kwargs = _logistic_run_setup(200, 2, n_steps=50, burn_in=10)
    with pytest.raises(ValueError, match="record_trace"):
        run_dpvi(model, (X, y), step_matrix=lambda a, b: np.eye(6),
                 **dict(kwargs, record_trace=False))
    with pytest.raises(ValueError, match="burn_in"):
        run_dpvi(model, (X, y), step_matrix=lambda a, b: np.eye(6), **dict(kwargs, burn_in=0))
    for bad in (np.eye(5), np.full((6, 6), np.nan)):
        with pytest.raises(ValueError, match="step_matrix"):
            run_dpvi(model, (X, y), step_matrix=lambda a, b, m=bad: m, **kwargs)


@pytest.mark.parametrize("bad, name", [
    (dict(n_steps=0), "n_steps"), (dict(n_steps=50.0), "n_steps"),
    (dict(burn_in=-1), "burn_in"), (dict(burn_in=50), "burn_in"),
    (dict(sampling_rate=0.0), "sampling_rate"), (dict(sampling_rate=1.5), "sampling_rate"),
    (dict(clip_norm=0.0), "clip_norm"), (dict(clip_norm=float("inf")), "clip_norm"),
    (dict(noise_multiplier=-1.0), "noise_multiplier"),
    (dict(noise_multiplier=float("nan")), "noise_multiplier"),
    (dict(n_mc_samples=0), "n_mc_samples"),
    (dict(init_scale=0.0), "init_scale"), (dict(init_scale=-0.1), "init_scale"),
    (dict(init_scale=float("nan")), "init_scale"), (dict(init_scale="a"), "init_scale"),
    (dict(init_mean=[0.0, 0.0]), "init_mean"), (dict(init_mean=[0.0, np.inf, 0.0]), "init_mean"),
])
def test_run_settings_out_of_range_raise_naming_the_setting(bad, name):
    # the engine is public: bad settings must not crash deep inside (a ZeroDivisionError
    # for n_steps=0, an AttributeError when the recording window is empty) or run
    # silently (a negative clip norm flips the clipped gradients)
    X, y, model, kwargs = _logistic_run_setup(200, 2, n_steps=50, burn_in=10)
    with pytest.raises(ValueError, match=name):
        run_dpvi(model, (X, y), **dict(kwargs, **bad))
