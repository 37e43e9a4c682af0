"""Directions the likelihood cannot see (skdpvi.noise_aware.flat_directions)."""

import numpy as np
import pytest

from skdpvi import DPBayesianLogisticRegression
from skdpvi.models.components import GaussianComponents, MeanFieldComponents
from skdpvi.noise_aware import onehot_flat_directions, prior_along_flat_directions


def _rows(n, rng, n_gaussian=2, blocks=(3, 4)):
    """Rows of Gaussian features and one-hot blocks, with the intercept's 1 last."""
    parts = [rng.normal(size=(n, n_gaussian))]
    for size in blocks:
        parts.append(np.eye(size)[rng.integers(size, size=n)])
    return np.hstack(parts)


@pytest.mark.parametrize("fit_intercept, k", [(True, 2), (False, 1)])
def test_flat_directions_are_orthonormal_and_orthogonal_to_every_row(fit_intercept, k):
    rng = np.random.default_rng(0)
    X = _rows(200, rng)
    blocks = [[2, 3, 4], [5, 6, 7, 8]]
    F = onehot_flat_directions(blocks, X.shape[1], fit_intercept)
    assert F.shape == (k, X.shape[1] + fit_intercept)
    np.testing.assert_allclose(F @ F.T, np.eye(k), atol=1e-12)
    rows = np.c_[X, np.ones(len(X))] if fit_intercept else X
    np.testing.assert_allclose(rows @ F.T, 0.0, atol=1e-12)
    # and they are all there is: adding a Gaussian column breaks every one of them
    assert onehot_flat_directions([blocks[0]], X.shape[1], False).shape == (0, X.shape[1])


@pytest.mark.parametrize("kind", ["mean_field", "gaussian"])
def test_prior_replaces_the_flat_part_and_keeps_the_orthogonal_part(kind):
    rng = np.random.default_rng(1)
    n, M = 6, 40
    F = onehot_flat_directions([[2, 3, 4]], 5)
    phi = np.c_[rng.normal(size=(M, n)), rng.normal(size=(M, n)) - 1.0]
    base = MeanFieldComponents(phi)
    if kind == "gaussian":
        chol = np.tril(rng.normal(size=(M, n, n))) * 0.3 + 0.5 * np.eye(n)
        base = GaussianComponents(phi[:, :n], chol)
    out = prior_along_flat_directions(base, F, prior_scale=2.0)
    P = np.eye(n) - F.T @ F
    means = base.means if kind == "mean_field" else base.mean
    roots = (base.scales[:, :, None] * np.eye(n) if kind == "mean_field" else base.chol)
    cov = roots @ roots.transpose(0, 2, 1)
    out_cov = out.chol @ out.chol.transpose(0, 2, 1)
    np.testing.assert_allclose(out.mean @ F.T, 0.0, atol=1e-12)
    np.testing.assert_allclose(out.mean @ P, means @ P, atol=1e-12)
    np.testing.assert_allclose(P @ out_cov @ P, P @ cov @ P, atol=1e-10)
    np.testing.assert_allclose(F @ out_cov @ F.T, 4.0 * np.ones((M, 1, 1)), atol=1e-10)
    np.testing.assert_allclose(F @ out_cov @ P, 0.0, atol=1e-10)  # independent of the rest
    assert prior_along_flat_directions(base, np.zeros((0, n)), 1.0) is base


def _one_hot_data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = _rows(n, rng, n_gaussian=3, blocks=(4,))
    theta = rng.normal(size=X.shape[1] + 1)
    p = 1 / (1 + np.exp(-(X @ theta[:-1] + theta[-1])))
    return X, (rng.random(n) < p).astype(int)


def test_estimator_gives_the_prior_along_the_blocks_and_the_same_predictions():
    X, y = _one_hot_data()
    kwargs = dict(max_iter=1500, inference="exact", random_state=0)
    plain = DPBayesianLogisticRegression(**kwargs).fit(X, y)
    flat = DPBayesianLogisticRegression(onehot_blocks=[[3, 4, 5, 6]], **kwargs).fit(X, y)
    F = onehot_flat_directions([[3, 4, 5, 6]], X.shape[1])
    along_plain = plain.sample_posterior(4000, random_state=0) @ F[0]
    along_flat = flat.sample_posterior(4000, random_state=0) @ F[0]
    # DP-SGD's means random-walk along F; the trace's posterior there is not the prior
    assert abs(along_plain.mean()) > 0.3 or abs(along_plain.std() - 1.0) > 0.3
    assert abs(along_flat.mean()) < 0.1 and abs(along_flat.std() - 1.0) < 0.05
    # every row obeys the schema, so the predictive distribution is the same
    np.testing.assert_allclose(flat.predict_proba(X[:50]), plain.predict_proba(X[:50]),
                               atol=0.02)
    # the same release and the same post-processing before the projection
    np.testing.assert_array_equal(flat.dpvi_result_.phi, plain.dpvi_result_.phi)


@pytest.mark.parametrize("blocks, message", [
    ("3456", "sequence of sequences"), ([[3]], "at least two"),
    ([[3, 3]], "at least two distinct"), ([[3.0, 4.0]], "integer"),
    ([[3, 4], [4, 5]], "share columns"), ([[3, 9]], "outside"),
    ([[0, 1]], "exactly one 1"),
])
def test_onehot_blocks_are_validated(blocks, message):
    X, y = _one_hot_data(300)
    with pytest.raises(ValueError, match=message):
        DPBayesianLogisticRegression(max_iter=50, onehot_blocks=blocks).fit(X, y)
