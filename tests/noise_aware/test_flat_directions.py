"""Directions the likelihood cannot see (skdpvi.noise_aware.flat_directions)."""

import pickle

import numpy as np
import pytest

from skdpvi import DPBayesianLinearRegression, DPBayesianLogisticRegression
from skdpvi.models.components import (GaussianComponents, MeanFieldComponents,
                                      NormalInverseGammaComponents)
from skdpvi.exceptions import IdentifiabilityWarning
from skdpvi.noise_aware import FlatPriorComponents, find_onehot_blocks, onehot_flat_directions
from skdpvi.noise_aware import flat_directions as flat_module


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


@pytest.mark.parametrize("kind", ["mean_field", "gaussian", "normal_inverse_gamma"])
def test_draws_keep_their_orthogonal_part_and_take_the_prior_along_the_flat_ones(kind):
    rng = np.random.default_rng(1)
    p, M = 6, 40
    F = onehot_flat_directions([[2, 3, 4]], 5)  # over the 5 coefficients and intercept
    if kind == "mean_field":
        base = MeanFieldComponents(np.c_[rng.normal(size=(M, p)), rng.normal(size=(M, p)) - 1])
        sd = 2.0
    elif kind == "gaussian":
        chol = np.tril(rng.normal(size=(M, p, p))) * 0.3 + 0.5 * np.eye(p)
        base = GaussianComponents(rng.normal(size=(M, p)), chol)
        sd = 2.0
    else:  # the linear model's draws: (coefficients, intercept, u = softplus^-1(sigma^2))
        chol = np.tril(rng.normal(size=(M, p, p))) * 0.3 + 0.5 * np.eye(p)
        base = NormalInverseGammaComponents(rng.normal(size=(M, p)), chol, 20.0,
                                            rng.uniform(0.3, 0.7, M))
        F = np.pad(F, ((0, 0), (0, 1)))  # the noise variance is not touched

        def sd(draws):
            return 2.0 * np.sqrt(np.logaddexp(0.0, draws[:, -1]))
    flat = FlatPriorComponents(base, F, sd)
    index = np.random.default_rng(2).integers(M, size=50_000)
    draws = flat.sample(index, np.random.default_rng(3))
    plain = base.sample(index, np.random.default_rng(3))  # the same base draws
    P = np.eye(F.shape[1]) - F.T @ F
    np.testing.assert_allclose(draws @ P, plain @ P, atol=1e-12)
    scale = sd(plain) if callable(sd) else sd
    z = (draws @ F.T)[:, 0] / scale
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1.0) < 0.02
    assert abs(np.corrcoef(z, (plain @ F.T)[:, 0])[0, 1]) < 0.02  # fresh, not the base's
    assert flat.n_components == M


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


def test_a_constant_column_beside_the_intercept_is_a_block_of_one():
    # a column of ones (e.g. from sm.add_constant) duplicates the intercept: the
    # likelihood is flat along coef - intercept, which a block of one column declares
    X, y = _one_hot_data(n=2000)
    X = np.c_[X[:, :3], np.ones(len(X))]
    kwargs = dict(max_iter=1000, random_state=0)
    flat = DPBayesianLogisticRegression(onehot_blocks=[[3]], **kwargs).fit(X, y)
    F = onehot_flat_directions([[3]], X.shape[1])
    np.testing.assert_allclose(np.abs(F), [[0, 0, 0, 2 ** -0.5, 2 ** -0.5]])
    along = flat.sample_posterior(4000, random_state=0) @ F[0]
    assert abs(along.mean()) < 0.1 and abs(along.std() - 1.0) < 0.05
    with pytest.raises(ValueError, match="exactly one 1"):
        DPBayesianLogisticRegression(onehot_blocks=[[2]], **kwargs).fit(X, y)


@pytest.mark.parametrize("blocks, message", [
    ("3456", "sequence of sequences"), ([[]], "one or more"),
    ([[3, 3]], "one or more distinct"), ([[3.0, 4.0]], "integer"),
    ([[3, 4], [4, 5]], "share columns"), ([[3, 9]], "column 9 outside"),
    ([[-1, 3]], "column -1 outside"),
    ([[0, 1]], "exactly one 1"),
])
def test_onehot_blocks_are_validated(blocks, message):
    X, y = _one_hot_data(300)
    with pytest.raises(ValueError, match=message):
        DPBayesianLogisticRegression(max_iter=50, onehot_blocks=blocks).fit(X, y)


def test_linear_estimator_gives_the_prior_along_the_blocks_given_sigma():
    rng = np.random.default_rng(4)
    X = _rows(3000, rng, n_gaussian=2, blocks=(3,))
    w = rng.normal(size=X.shape[1] + 1)
    y = X @ w[:-1] + w[-1] + rng.normal(0.0, 0.2, len(X))
    kwargs = dict(max_iter=1500, random_state=0)
    plain = DPBayesianLinearRegression(**kwargs).fit(X, y)
    flat = DPBayesianLinearRegression(onehot_blocks=[[2, 3, 4]], **kwargs).fit(X, y)
    F = onehot_flat_directions([[2, 3, 4]], X.shape[1])[0]
    draws = flat.posterior_.sample(20_000, random_state=0, unconstrained=True)
    sd = 2.0 * np.sqrt(np.logaddexp(0.0, draws[:, -1]))  # prior_weight_scale sigma
    z = draws[:, :-1] @ F / sd
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1.0) < 0.03
    np.testing.assert_allclose(flat.predict(X[:50]), plain.predict(X[:50]), atol=0.02)
    # the prior's sd is a function of each draw's sigma^2, and the fit still pickles
    again = pickle.loads(pickle.dumps(flat))
    np.testing.assert_array_equal(again.sample_posterior(5, random_state=1),
                                  flat.sample_posterior(5, random_state=1))


def test_find_onehot_blocks_finds_complete_encodings_only():
    rng = np.random.default_rng(5)
    X = _rows(500, rng, n_gaussian=2, blocks=(3, 4, 2))  # columns 2-4, 5-8, 9-10
    assert find_onehot_blocks(X) == [[2, 3, 4], [5, 6, 7, 8], [9, 10]]
    # a dropped category (reference coding) leaves no flat direction: no block
    assert find_onehot_blocks(np.delete(X, [2, 9], axis=1)) == [[4, 5, 6, 7]]
    # declared columns are skipped; the rest is still found
    assert find_onehot_blocks(X, skip=[5, 6, 7, 8]) == [[2, 3, 4], [9, 10]]
    # binary columns that are not exclusive, or not exhaustive, are no block
    binary = (rng.random((500, 3)) < 0.5).astype(float)
    assert find_onehot_blocks(binary) == []
    assert find_onehot_blocks(np.c_[binary[:, :1], 1.0 - binary[:, :1]]) == [[0, 1]]
    # a column of ones is a block of one; an all-zero column inside a block belongs to it
    assert find_onehot_blocks(np.c_[X[:, :2], np.ones(500)]) == [[2]]
    assert find_onehot_blocks(np.c_[np.zeros(500), X[:, 2:5]]) == [[0, 1, 2, 3]]


def test_find_onehot_blocks_checks_every_row_and_reads_sparse_input(monkeypatch):
    from scipy import sparse

    rng = np.random.default_rng(6)
    X = _rows(300, rng, n_gaussian=1, blocks=(3,))
    monkeypatch.setattr(flat_module, "_SCAN_ROWS", 50)
    monkeypatch.setattr(flat_module, "_CHECK_ROWS", 64)
    assert find_onehot_blocks(X) == [[1, 2, 3]]
    broken = X.copy()
    broken[250, 1:4] = 0.0  # a row past the scanned ones, in the fourth chunk
    assert find_onehot_blocks(broken) == []
    assert find_onehot_blocks(sparse.csr_matrix(X)) == [[1, 2, 3]]


@pytest.mark.parametrize("estimator", [DPBayesianLogisticRegression, DPBayesianLinearRegression])
def test_fit_warns_about_undeclared_onehot_blocks_and_stores_nothing(estimator):
    import warnings

    X, y = _one_hot_data(400)  # columns 3-6 are one block
    if estimator is DPBayesianLinearRegression:
        y = 0.5 * X[:, 0] + 0.3 * X[:, 4]
    kwargs = dict(max_iter=100, random_state=0)
    with pytest.warns(IdentifiabilityWarning, match=r"onehot_blocks=\[\[3, 4, 5, 6\]\]"):
        est = estimator(**kwargs).fit(X, y)
    assert "3, 4, 5, 6" not in repr(est.__dict__)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Columns .* one-hot")
        estimator(onehot_blocks=[[3, 4, 5, 6]], **kwargs).fit(X, y)
        # without an intercept one block is the intercept's column: nothing is flat
        estimator(fit_intercept=False, **kwargs).fit(X, y)
    # without an intercept, a second block makes a flat direction again
    X2 = np.c_[X, np.eye(2)[np.arange(len(X)) % 2]]
    with pytest.warns(IdentifiabilityWarning, match=r"\[\[3, 4, 5, 6\], \[7, 8\]\]"):
        estimator(fit_intercept=False, **kwargs).fit(X2, y)
    with pytest.warns(IdentifiabilityWarning, match=r"onehot_blocks=\[\[3, 4, 5, 6\], \[7, 8\]\]"):
        estimator(fit_intercept=False, onehot_blocks=[[3, 4, 5, 6]], **kwargs).fit(X2, y)


@pytest.mark.parametrize("estimator", [DPBayesianLogisticRegression, DPBayesianLinearRegression])
def test_fit_warns_about_constant_columns_and_stores_nothing(estimator):
    """A column of zeros (or any constant but 1) carries no information about its
    coefficient: a new user's probe found its logistic posterior away from the prior
    and wider than it, without a word. Columns of ones are the one-hot check's."""
    import warnings

    from scipy import sparse

    X, y = _one_hot_data(400)  # columns 3-6 are one block
    if estimator is DPBayesianLinearRegression:
        y = 0.5 * X[:, 0] + 0.3 * X[:, 4]
    kwargs = dict(max_iter=100, random_state=0, onehot_blocks=[[3, 4, 5, 6]])
    Xc = np.c_[X, np.zeros(len(X)), 2.5 * np.ones(len(X))]
    for data in (Xc, sparse.csr_matrix(Xc)):
        with pytest.warns(IdentifiabilityWarning, match=r"Columns \[7, 8\] of X are constant"):
            est = estimator(**kwargs).fit(data, y)
        assert "[7, 8]" not in repr(est.__dict__)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Columns .* constant")
        estimator(**kwargs).fit(X, y)
        # a column of ones is left to the one-hot check (a block of one)
        with pytest.warns(IdentifiabilityWarning, match=r"one-hot"):
            estimator(**kwargs).fit(np.c_[X, np.ones(len(X))], y)
        # without an intercept (and no one-hot block) a nonzero constant column is
        # the intercept
        estimator(max_iter=100, random_state=0, fit_intercept=False).fit(
            np.c_[X[:, :3], 2.5 * np.ones(len(X))], y)
    with pytest.warns(IdentifiabilityWarning, match=r"Columns \[7\] of X are constant"):
        estimator(**{**kwargs, "fit_intercept": False}).fit(Xc, y)


@pytest.mark.parametrize("blocks, message", [
    ([[-1, 2]], "blocks refers to column -1"),
    ([[1, 1]], "each block of blocks must list one or more distinct"),
    ([[1, 2], [2, 3]], r"blocks must not share columns; column\(s\) \[2\]"),
    ([[1, 9]], "blocks refers to column 9 outside the 4 columns"),
    ([[1.5]], "distinct integer column indices"),
])
def test_onehot_flat_directions_refuses_bad_blocks_by_name(blocks, message):
    # before: a negative column silently took the intercept's, repeats and overlaps
    # gave a basis of the wrong directions
    with pytest.raises(ValueError, match=message):
        onehot_flat_directions(blocks, 4)
    with pytest.raises(ValueError, match="n_features must be a positive int"):
        onehot_flat_directions([[0]], 0)


def test_find_onehot_blocks_needs_a_2d_x():
    with pytest.raises(ValueError, match="X must be 2-dimensional"):
        find_onehot_blocks(np.zeros(5))
