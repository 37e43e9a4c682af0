"""The lockstep engine gives every data set the run run_dpvi would give it alone."""

import numpy as np
import pytest

import skdpvi.dpvi.loop as dpvi
from skdpvi.datasets import make_dirichlet_categorical, make_nig_linear_regression
from skdpvi.dpvi import run_dpvi, run_dpvi_batched
from skdpvi.models import DirichletCategoricalModel, LinearRegressionModel, LogisticRegressionModel


def _logistic_data(seed, n=300):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, (X @ [1.0, -2.0, 0.5] + rng.logistic(size=n) > 0).astype(float)


CASES = {
    # dense path, a constrained parameter, clipping active
    "linear": (LinearRegressionModel(4),
               [make_nig_linear_regression(300, n_features=4, random_state=k)[:2]
                for k in range(3)], dict(clip_norm=5.0, preconditioner=50.0)),
    # generic model with closed-form gradients on a 2-simplex
    "dirichlet": (DirichletCategoricalModel(),
                  [(np.asarray(make_dirichlet_categorical(300, random_state=k)[0], float),)
                   for k in range(3)], dict(clip_norm=2.0, preconditioner=5.0)),
    "logistic": (LogisticRegressionModel(3), [_logistic_data(k) for k in range(3)],
                 dict(clip_norm=1.0, preconditioner=30.0)),
}
# the same with exact expectations over q instead of Monte Carlo draws
_exact_dirichlet = DirichletCategoricalModel()
_exact_dirichlet.exact_expectations = True
CASES.update(
    linear_exact=(LinearRegressionModel(4, exact_expectations=True), *CASES["linear"][1:]),
    dirichlet_exact=(_exact_dirichlet, *CASES["dirichlet"][1:]),
    logistic_exact=(LogisticRegressionModel(3, exact_expectations=True),
                    *CASES["logistic"][1:]),
)


@pytest.mark.parametrize("glm_path", [False, True], ids=["dense", "glm"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_run_equals_the_single_run_with_its_seed(case, glm_path, monkeypatch):
    model, datasets, extra = CASES[case]
    if glm_path and case.startswith("dirichlet"):
        pytest.skip("not a GLM")
    monkeypatch.setattr(dpvi, "_GLM_PATH_MIN_BLOCK", 0 if glm_path else float("inf"))
    kwargs = dict(noise_multiplier=1.5, sampling_rate=0.1, n_steps=700, burn_in=150,
                  learning_rate=1e-3, return_diagnostics=True, record_trace=True, **extra)
    seeds = [11, 5, 11]  # a repeated seed on a different data set is a different run
    batched = run_dpvi_batched(model, datasets, random_states=seeds, **kwargs)
    assert len(batched) == 3
    for data, seed, got in zip(datasets, seeds, batched):
        want = run_dpvi(model, data, random_state=seed, **kwargs)
        # the draws are identical; only float32 summation order differs
        assert got.diagnostics["mean_batch_size"] == want.diagnostics["mean_batch_size"]
        assert got.diagnostics["clipped_fraction"] == pytest.approx(
            want.diagnostics["clipped_fraction"], abs=1e-3)
        np.testing.assert_allclose(got.trace_phi, want.trace_phi, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(got.phi, want.phi, rtol=1e-4, atol=1e-6)
        for name in ("shift", "sum_x", "sum_xx", "sum_g", "sum_gg", "sum_gx"):
            np.testing.assert_allclose(getattr(got.stats, name), getattr(want.stats, name),
                                       rtol=1e-3, atol=1e-6)
        assert got.stats.count == want.stats.count
        np.testing.assert_array_equal(got.preconditioner, want.preconditioner)
    if case.startswith("linear"):
        assert batched[0].diagnostics["clipped_fraction"] > 0.05  # clipping is exercised
    assert not np.allclose(batched[0].phi, batched[2].phi)
    if case.endswith("_exact"):  # the exact expectations ran: with the draws (same
        # seed, same random stream) the run would be identical to the last bit
        draws = CASES[case[:-len("_exact")]][0]
        exact = run_dpvi(model, datasets[0], random_state=seeds[0], **kwargs)
        assert not np.array_equal(run_dpvi(draws, datasets[0], random_state=seeds[0],
                                           **kwargs).trace_phi, exact.trace_phi)


def test_runs_of_different_batch_sizes_keep_their_own_subsamples():
    """Padding must not leak rows: a tiny sampling rate gives very unequal batches."""
    model, datasets, _ = CASES["linear"]
    kwargs = dict(noise_multiplier=1.0, clip_norm=5.0, sampling_rate=0.01, n_steps=300,
                  burn_in=50, learning_rate=1e-3, preconditioner=50.0,
                  return_diagnostics=True)
    batched = run_dpvi_batched(model, datasets, random_states=[1, 2, 3], **kwargs)
    for data, seed, got in zip(datasets, [1, 2, 3], batched):
        want = run_dpvi(model, data, random_state=seed, **kwargs)
        assert got.diagnostics["mean_batch_size"] == want.diagnostics["mean_batch_size"]
        np.testing.assert_allclose(got.phi, want.phi, rtol=1e-4, atol=1e-6)


def test_bad_arguments_are_rejected():
    model, datasets, _ = CASES["linear"]
    kwargs = dict(noise_multiplier=1.0, clip_norm=5.0, sampling_rate=0.1, n_steps=10,
                  burn_in=2)
    with pytest.raises(ValueError, match="random_states"):
        run_dpvi_batched(model, datasets, random_states=[1, 2], **kwargs)
    with pytest.raises(ValueError, match="same number of rows"):
        run_dpvi_batched(model, [datasets[0], (datasets[1][0][:100], datasets[1][1][:100])],
                         random_states=[1, 2], **kwargs)
    with pytest.raises(ValueError, match="at least one"):
        run_dpvi_batched(model, [], random_states=[], **kwargs)
    # a start that is not a point: named, not NaN releases
    with pytest.raises(ValueError, match="init_scale"):
        run_dpvi_batched(model, datasets, random_states=range(len(datasets)),
                         init_scale=float("nan"), **kwargs)


def test_glm_models_that_do_not_broadcast_run_under_vmap(monkeypatch):
    """A third-party GLMModel written for one run still works in lockstep."""

    class OneRunOnly(LogisticRegressionModel):
        broadcasts_lead_axes = False

        def glm_gradients(self, theta, eps, X, y):
            assert theta.dim() == 2 and X.dim() == 2  # vmap hands it one run at a time
            return super().glm_gradients(theta, eps, X, y)

    monkeypatch.setattr(dpvi, "_GLM_PATH_MIN_BLOCK", 0)
    datasets = CASES["logistic"][1]
    kwargs = dict(noise_multiplier=1.5, clip_norm=1.0, sampling_rate=0.1, n_steps=100,
                  burn_in=20, learning_rate=1e-3, preconditioner=30.0)
    batched = run_dpvi_batched(OneRunOnly(3), datasets, random_states=[1, 2, 3], **kwargs)
    for data, seed, got in zip(datasets, [1, 2, 3], batched):
        want = run_dpvi(LogisticRegressionModel(3), data, random_state=seed, **kwargs)
        np.testing.assert_allclose(got.phi, want.phi, rtol=1e-4, atol=1e-6)


def test_padded_indices_point_into_each_runs_rows():
    # run r's row i sits at r * n_examples + i; padding points at the run's own first
    # row with mask 0; int32 unless the rows need int64
    from types import SimpleNamespace

    import torch

    from skdpvi.dpvi.batched import _padded_indices

    def block(rows, count, dtype):
        return SimpleNamespace(index=torch.tensor([rows], dtype=dtype),
                               counts=torch.tensor([count]))

    for dtype in (torch.int32, torch.int64):
        index, mask, widths = _padded_indices(
            [block([0, 3, 0], 2, dtype), block([1, 2, 4], 3, dtype)], 5, "cpu")
        assert index.dtype == dtype and widths == [3]
        assert index.tolist() == [[[0, 3, 0], [6, 7, 9]]]
        assert mask.tolist() == [[[True, True, False], [True, True, True]]]
