"""The compiled DP-SGD block of logistic regression against the torch step."""

import numpy as np
import pytest
import torch

import skdpvi.dpvi.logistic_kernel as kernel_module
import skdpvi.dpvi.loop as loop
from skdpvi.dpvi import glm_clip_and_sum, run_dpvi
from skdpvi.dpvi.data import _Data
from skdpvi.dpvi.loop import _Engine
from skdpvi.models import LinearRegressionModel, LogisticRegressionModel

pytest.importorskip("numba")


def _one_hot(n, seed=0, blocks=(4, 6, 3)):
    """n rows: a numeric column, then one-hot blocks (one 1 per block and row)."""
    rng = np.random.default_rng(seed)
    parts = [rng.random((n, 1))]
    for size in blocks:
        parts.append(np.eye(size)[rng.integers(size, size=n)])
    X = np.hstack(parts).astype(np.float32)
    logit = X @ rng.normal(scale=0.7, size=X.shape[1]) - 1.0
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    return X, y


def _gaussian(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ rng.normal(size=d)))).astype(np.float32)
    return X, y


SETTINGS = dict(noise_multiplier=2.0, clip_norm=3.0, sampling_rate=0.1, n_steps=300,
                burn_in=60, preconditioner=30.0, record_trace=True, return_diagnostics=True)


def _both_paths(monkeypatch, model, data, **kwargs):
    """The run with the kernel, and the same run with the torch step."""
    settings = {**SETTINGS, **kwargs}
    used = []
    layout = kernel_module.kernel_layout

    def spy(*args):
        out = layout(*args)
        used.append(out)
        return out

    monkeypatch.setattr(loop, "kernel_layout", spy)
    compiled = run_dpvi(model, data, random_state=4, **settings)
    assert used[-1] is not None, "the kernel did not serve the run"
    monkeypatch.setattr(loop, "kernel_layout", lambda *args: None)
    reference = run_dpvi(model, data, random_state=4, **settings)
    return compiled, reference, used[-1]


@pytest.mark.parametrize("design", ["one_hot", "dense"])
def test_the_kernel_releases_what_the_torch_step_releases(design, monkeypatch):
    if design == "one_hot":
        X, y = _one_hot(3000)
        model = LogisticRegressionModel(X.shape[1])
    else:
        X, y = _gaussian(2000, 5)
        model = LogisticRegressionModel(5, prior_scale=2.0)
    compiled, reference, layout = _both_paths(monkeypatch, model, (X, y))
    assert layout[1] == (1 if design == "one_hot" else 0)  # row-sparse copy or the rows
    # float32 rows summed in another order: rounding, not a different mechanism
    scale = np.abs(reference.trace_grad).max()
    np.testing.assert_allclose(compiled.trace_grad, reference.trace_grad, rtol=0,
                               atol=1e-5 * scale)
    np.testing.assert_allclose(compiled.trace_phi, reference.trace_phi, rtol=1e-4, atol=1e-6)
    for name in ("sum_x", "sum_g", "sum_gg", "sum_gx"):
        np.testing.assert_allclose(getattr(compiled.stats, name),
                                   getattr(reference.stats, name), rtol=1e-4, atol=1e-6)
    assert compiled.diagnostics["clipped_fraction"] == pytest.approx(
        reference.diagnostics["clipped_fraction"], abs=1e-3)
    np.testing.assert_array_equal(compiled.learning_rate, reference.learning_rate)


def test_another_number_of_draws_compiles_its_own_block(monkeypatch):
    # the draws' count is fixed at compile time: 3 draws get their own block
    X, y = _gaussian(1000, 4)
    model = LogisticRegressionModel(4)
    compiled, reference, _ = _both_paths(monkeypatch, model, (X, y), n_steps=150,
                                         burn_in=30, n_mc_samples=3)
    np.testing.assert_allclose(compiled.trace_phi, reference.trace_phi, rtol=1e-4, atol=1e-6)
    assert kernel_module.compiled_block(3) is not kernel_module.compiled_block(10)


def test_the_kernels_sigmoid_is_accurate_to_float_rounding():
    from skdpvi.dpvi.logistic_steps import sigmoid

    x = np.concatenate([np.linspace(-40, 40, 8001), [-1e30, -88.0, 0.0, 88.0, 1e30]])
    approx = np.array([sigmoid(np.float32(v)) for v in x], dtype=np.float64)
    exact = np.exp(-np.logaddexp(0, -x))
    assert np.abs(approx - exact).max() < 2e-7
    assert np.diff(approx[:8001]).min() >= -2 * np.finfo(np.float32).eps  # monotone, to rounding
    assert approx[-3] == 0.5 and np.isnan(sigmoid(np.float32(np.nan)))


def test_a_changing_step_and_empty_batches_follow_the_torch_step(monkeypatch):
    # step_scales changes the step at burn-in, inside a block; kappa N = 2 leaves
    # many steps with an empty batch (noise only)
    X, y = _one_hot(20)
    model = LogisticRegressionModel(X.shape[1])
    compiled, reference, _ = _both_paths(monkeypatch, model, (X, y), n_steps=200,
                                         burn_in=37, step_scales=(4.0, 1.0))
    np.testing.assert_allclose(compiled.trace_phi, reference.trace_phi, rtol=1e-4, atol=1e-6)


def _one_step(X, y, phi, model, clip_norm, beta):
    """One kernel step with no noise and every row in the batch: its clipped sum."""
    n = model.n_params
    Xp = np.column_stack([X, np.ones(len(X), np.float32)]).astype(np.float32)
    eps = torch.randn(1, 10, n, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    index = np.arange(len(X), dtype=np.int32)[None, :]
    phis, grads = np.empty((1, 2 * n)), np.empty((1, 2 * n))
    cols, vals = kernel_module.padded_rows(Xp)
    counts = np.zeros(2)
    kernel_module.compiled_block(10)(
        cols, 1, vals, y.astype(np.float32), index, np.array([len(X)]), eps.numpy(),
        np.zeros((1, 2 * n)), phi.copy(), beta, np.zeros(2 * n), np.zeros(2 * n), -1,
        len(X), model.prior_scale ** 2, clip_norm, phis, grads, counts)
    return grads[0] * beta, eps[0], Xp, counts


def test_the_kernel_clips_every_row_to_c_as_the_torch_mechanism_does():
    # rows scaled up so that every one is clipped: the clipped sum has norm at most
    # B C and equals the torch mechanism's clipped sum of the same rows and draws
    X, y = _one_hot(50, seed=3)
    X = X * 40
    model = LogisticRegressionModel(X.shape[1])
    n = model.n_params
    phi = np.concatenate([np.full(n, 0.3), np.full(n, -2.0)])
    beta = np.concatenate([np.ones(n), np.full(n, 10.0)])
    clip = 0.5
    clipped_sum, eps, Xp, counts = _one_step(X, y, phi, model, clip, beta)
    assert counts[0] == counts[1] == len(X)
    assert np.linalg.norm(clipped_sum) <= len(X) * clip * (1 + 1e-6)
    data = _Data(model, (X, y), torch.device("cpu"))
    reference, norms = glm_clip_and_sum(
        model, torch.tensor(phi, dtype=torch.float32), eps.float(), data.columns,
        len(X), torch.tensor(beta, dtype=torch.float32), clip,
        data.row_sq_norms(torch.tensor(beta[:n])))
    assert torch.all(norms > clip)
    np.testing.assert_allclose(clipped_sum, reference.numpy(), rtol=1e-4, atol=1e-5)


def test_padded_rows_hold_every_non_zero_and_nothing_else():
    X, _ = _one_hot(200, seed=2)
    X[5, :] = 0  # a row of zeros
    cols, vals = kernel_module.padded_rows(X)
    assert cols.shape == vals.shape == (200, int((X != 0).sum(1).max()))
    rebuilt = np.zeros_like(X)
    np.add.at(rebuilt, (np.repeat(np.arange(200), cols.shape[1]), cols.ravel()), vals.ravel())
    np.testing.assert_array_equal(rebuilt, X)


def _layout(model, X, y, **settings):
    data = _Data(model, (X, y), torch.device("cpu"))
    engine = _Engine(model, data.n_examples, torch.device("cpu"), learning_rate=None,
                     learning_rate_scale=None, n_mc_samples=10, init_mean=None,
                     init_scale=0.01, **{**SETTINGS, **settings})
    return kernel_module.kernel_layout(model, engine, data)


def test_the_kernel_serves_only_what_it_computes():
    X, y = _one_hot(1000)
    p = X.shape[1]
    assert _layout(LogisticRegressionModel(p), X, y)[1] == 1
    # the quadrature's exact expectations, a model with its own gradients, a step
    # matrix, another model: the torch step
    assert _layout(LogisticRegressionModel(p, exact_expectations=True), X, y) is None

    class OwnPrior(LogisticRegressionModel):
        def grad_log_prior_unconstrained(self, theta):
            return -theta

    assert _layout(OwnPrior(p), X, y) is None
    assert _layout(LogisticRegressionModel(p), X, y,
                   step_matrix=lambda phi, grad: np.eye(2 * (p + 1))) is None
    assert _layout(LinearRegressionModel(p), X, y) is None


def test_the_cost_model_leaves_large_dense_steps_to_torch(monkeypatch):
    # many dense columns and rows per step: BLAS beats the row loop
    X, y = _gaussian(30_000, 100)
    assert _layout(LogisticRegressionModel(100), X, y) is None
    # few columns: the kernel, reading the rows where they lie
    X, y = _gaussian(5000, 8)
    cols, stride, vals, _ = _layout(LogisticRegressionModel(8), X, y)
    assert stride == 0 and vals.shape == (5000, 9)
    monkeypatch.setattr(kernel_module, "available", lambda: False)  # no numba
    assert _layout(LogisticRegressionModel(8), X, y) is None


def test_sparse_input_takes_the_kernel_and_matches_the_dense_input(monkeypatch):
    from scipy import sparse

    X, y = _one_hot(1500, seed=5)
    model = LogisticRegressionModel(X.shape[1])
    settings = {**SETTINGS, "n_steps": 120, "burn_in": 20}
    chosen = []
    layout = kernel_module.kernel_layout
    monkeypatch.setattr(loop, "kernel_layout", lambda *a: chosen.append(layout(*a)) or chosen[-1])
    dense = run_dpvi(model, (X, y), random_state=2, **settings)
    csr = run_dpvi(model, (sparse.csr_matrix(X), y), random_state=2, **settings)
    assert all(c is not None and c[1] == 1 for c in chosen)
    np.testing.assert_array_equal(csr.trace_phi, dense.trace_phi)


def test_large_sparse_data_are_copied_row_sparse_chunk_by_chunk(monkeypatch):
    import skdpvi.dpvi.data as data_module

    X, y = _one_hot(2000, seed=6, blocks=(8, 8, 8))
    model = LogisticRegressionModel(X.shape[1])
    settings = {**SETTINGS, "n_steps": 80, "burn_in": 20}
    small = run_dpvi(model, (X, y), random_state=1, **settings)
    # not prepared up front, read in chunks of 300 rows: the same copy, the same run
    monkeypatch.setattr(data_module, "_PREPARE_ONCE_BYTES", 0)
    monkeypatch.setattr(data_module, "_CHUNK_ROWS", 300)
    layouts = []
    layout = kernel_module.kernel_layout
    monkeypatch.setattr(loop, "kernel_layout", lambda *a: layouts.append(layout(*a)) or layouts[-1])
    large = run_dpvi(model, (X, y), random_state=1, **settings)
    cols, stride, vals, targets = layouts[0]
    assert stride == 1 and cols.shape == (2000, 5)  # the numeric column, 3 blocks, intercept
    np.testing.assert_array_equal(targets, y)
    np.testing.assert_array_equal(large.trace_phi, small.trace_phi)
    # dense large data: no copy (the engine's memory stays O(kappa N)); the torch step
    Xd, yd = _gaussian(2000, 6)
    assert _layout(LogisticRegressionModel(6), Xd, yd) is None


def test_a_diverging_run_ends_non_finite_as_the_torch_steps_does(monkeypatch):
    # a step far too large: the scales collapse (softplus(rho) = 0) and the sums
    # overflow; the kernel must neither raise mid-run nor hide it
    X, y = _one_hot(2000, seed=7)
    settings = dict(noise_multiplier=1.0, clip_norm=2.0, sampling_rate=0.1, n_steps=200,
                    burn_in=50, learning_rate=1e8, preconditioner=30.0)
    compiled, reference, _ = _both_paths(monkeypatch, LogisticRegressionModel(X.shape[1]),
                                         (X, y), **settings)
    assert not np.all(np.isfinite(compiled.phi))
    assert not np.all(np.isfinite(reference.phi))
