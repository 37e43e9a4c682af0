"""The engine's view of the private data (skdpvi.dpvi.data)."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import skdpvi.dpvi.data as data_module
from skdpvi.dpvi import run_dpvi
from skdpvi.dpvi.data import _Data
from skdpvi.models import LinearRegressionModel, LogisticRegressionModel


def _xy(n=500, d=4, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    X[rng.random(size=X.shape) < 0.6] = 0  # sparse-ish, for the CSR tests
    return X, (X @ np.arange(1, d + 1) + rng.normal(size=n) > 0).astype(float)


def test_large_float32_arrays_are_read_in_place():
    X, y = _xy(dtype=np.float32)
    data = _Data(LogisticRegressionModel(4), (X, y), torch.device("cpu"), prepare=False)
    assert data.columns is None
    assert data.sources[0].data_ptr() == X.__array_interface__["data"][0]  # no copy
    index = torch.tensor([3, 7, 400])
    Xb, yb = data.gather(index)
    np.testing.assert_array_equal(Xb[:, :4].numpy(), X[[3, 7, 400]])
    np.testing.assert_array_equal(Xb[:, 4].numpy(), 1.0)  # the intercept, per batch


@pytest.mark.parametrize("source", ["float64", "float32", "memmap", "csr", "csr-float32",
                                    "reversed"])
def test_every_input_gives_the_batches_and_row_norms_of_the_prepared_data(source, tmp_path):
    X, y = _xy()
    model = LinearRegressionModel(4)
    if source == "float32":
        X = X.astype(np.float32)
    elif source == "reversed":  # a view with a negative stride (X[::-1]): torch has none
        X, y = np.ascontiguousarray(X[::-1])[::-1], y
        assert X.strides[0] < 0
    elif source == "memmap":
        mm = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=np.float32,
                                       shape=X.shape)
        mm[:] = X
        mm.flush()
        X = np.load(tmp_path / "X.npy", mmap_mode="r")  # read-only
    elif source.startswith("csr"):
        X = sp.csr_matrix(X.astype(np.float32) if source == "csr-float32" else X)
    dense = X.toarray() if sp.issparse(X) else np.asarray(X)
    prepared = _Data(model, (dense, y), torch.device("cpu"), prepare=True)
    lazy = _Data(model, (X, y), torch.device("cpu"), prepare=False)
    index = torch.tensor([0, 5, 17, 250, 499], dtype=torch.int32)
    for got, want in zip(lazy.gather(index), prepared.gather(index)):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    weights = torch.linspace(0.5, 2.0, 5, dtype=torch.float64)
    torch.testing.assert_close(lazy.row_sq_norms(weights), prepared.row_sq_norms(weights),
                               rtol=0, atol=0)


def test_csr_rows_with_duplicates_and_empty_rows_densify_like_scipy():
    X = sp.csr_matrix((np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([1, 1, 0, 3, 0]),
                       np.array([0, 2, 2, 5, 5])), shape=(4, 4))  # row 0 and 2: duplicates
    assert X.nnz == 5
    data = _Data(LogisticRegressionModel(4, fit_intercept=False), (X, np.zeros(4)),
                 torch.device("cpu"))
    got = data.gather(torch.tensor([0, 1, 2, 3]))[0].numpy()
    np.testing.assert_array_equal(got, X.toarray())


def test_a_run_is_the_same_whether_the_data_are_prepared_once_or_per_batch(monkeypatch):
    # the torch step's two ways of reading the rows (the compiled kernel, which
    # reads only prepared data, is compared with the torch step in test_logistic_kernel)
    import skdpvi.dpvi.loop as loop

    monkeypatch.setattr(loop, "kernel_layout", lambda *args: None)
    X, y = _xy(n=800, dtype=np.float32)
    kwargs = dict(noise_multiplier=1.0, clip_norm=2.0, sampling_rate=0.2, n_steps=80,
                  burn_in=10, random_state=0)
    once = run_dpvi(LogisticRegressionModel(4), (X, y), **kwargs)
    monkeypatch.setattr(data_module, "_PREPARE_ONCE_BYTES", 0)
    per_batch = run_dpvi(LogisticRegressionModel(4), (X, y), **kwargs)
    np.testing.assert_array_equal(per_batch.phi, once.phi)
    np.testing.assert_array_equal(per_batch.stats.sum_gx, once.stats.sum_gx)


@pytest.mark.parametrize("model", [LogisticRegressionModel(4), LinearRegressionModel(4)])
def test_a_large_step_summed_chunk_by_chunk_is_the_one_pass_sum(model, monkeypatch):
    # Steps of more than _STEP_CHUNK_ROWS rows accumulate their clipped sum over
    # chunks (bounded temporaries for 10^6-10^7 rows); the release is the same sum,
    # up to the float32 summation order.
    import skdpvi.dpvi.loop as loop

    X, y = _xy(n=3000, dtype=np.float32)
    kwargs = dict(noise_multiplier=1.0, clip_norm=2.0, sampling_rate=0.3, n_steps=40,
                  burn_in=8, random_state=3, record_trace=True, return_diagnostics=True)
    monkeypatch.setattr(data_module, "_PREPARE_ONCE_BYTES", 0)  # gathered per batch
    one_pass = run_dpvi(model, (X, y), **kwargs)
    monkeypatch.setattr(loop, "_STEP_CHUNK_ROWS", 128)  # about 7 chunks a step
    chunked = run_dpvi(model, (X, y), **kwargs)
    # float32 sums of a few thousand terms that largely cancel: ~1e-3 absolute; a
    # chunk dropped or counted twice would be off by a tenth of the sum
    np.testing.assert_allclose(chunked.trace_grad, one_pass.trace_grad, rtol=1e-3, atol=2e-2)
    np.testing.assert_allclose(chunked.phi, one_pass.phi, rtol=1e-3, atol=5e-3)
    assert chunked.diagnostics["clipped_fraction"] == one_pass.diagnostics["clipped_fraction"]
