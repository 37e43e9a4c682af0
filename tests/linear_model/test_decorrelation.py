"""DPBayesianLogisticRegression(decorrelation=share): the fit in the eigenbasis of the
rows' privately released Gram matrix (skdpvi.linear_model._logistic_decorrelation)."""

import math
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone

from skdpvi import DPBayesianLogisticRegression
from skdpvi.accounting import compose_epsilon, noise_multiplier, total_privacy_spent
from skdpvi.linear_model import _logistic_decorrelation as dec

FAST = dict(max_iter=600, n_posterior_samples=400)


@pytest.fixture(scope="module")
def pair_data():
    """Two strongly correlated features (rho 0.9), one independent; 4,000 rows."""
    rng = np.random.default_rng(3)
    n = 4000
    z = rng.standard_normal((n, 3))
    X = np.c_[z[:, 0], 0.9 * z[:, 0] + math.sqrt(1 - 0.81) * z[:, 1], z[:, 2]]
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ [0.8, -0.5, 0.6] + 0.2)))).astype(int)
    return X, y


@pytest.fixture(scope="module")
def fitted(pair_data):
    return DPBayesianLogisticRegression(decorrelation=0.1, epsilon=3.0, random_state=0,
                                        **FAST).fit(*pair_data)


def test_gram_release_noise_scale_and_row_bound():
    """The release adds N(0, (noise_std * bound^2)^2) to every upper-triangle entry
    and the rows enter scaled to norm at most 1.5 sqrt(p)."""
    X = np.zeros((3, 2))
    X[0] = [100.0, 0.0]  # far beyond the bound: scaled to it
    p = 3
    bound = dec.GRAM_ROW_BOUND * math.sqrt(p)
    row = np.array([100.0, 0.0, 1.0])
    row *= bound / np.linalg.norm(row)
    gram = np.outer(row, row) + 2 * np.outer([0, 0, 1.0], [0, 0, 1.0])
    noise_std = 0.7
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(2000):
        V, lam = dec.private_gram_rotation(X, True, noise_std, rng)
        np.testing.assert_allclose(V.T @ V, np.eye(p), atol=1e-10)  # orthonormal
        draws.append((V * lam) @ V.T)  # the released matrix
    draws = np.array(draws)
    np.testing.assert_allclose(draws, np.swapaxes(draws, 1, 2), atol=1e-9)  # symmetric
    np.testing.assert_allclose(draws.mean(0), gram, atol=5 * noise_std * bound**2 / 40)
    sd = draws.std(0)
    np.testing.assert_allclose(sd, noise_std * bound**2, rtol=0.08)


def test_gram_noise_multiplier_is_the_shares_gaussian():
    whole, _ = noise_multiplier(1.0, 1e-5, 1.0, 1)
    assert dec.gram_noise_multiplier(1.0, 1e-5, 0.25) == pytest.approx(2 * whole)


def test_rotation_keeps_norms_and_maps_back(pair_data):
    X, _ = pair_data
    V, _ = dec.private_gram_rotation(X, True, 5.0, np.random.default_rng(1))
    model = dec.RotatedRowsModel(V, True)
    assert model.n_params == 4 and not model.fit_intercept
    Z, _ = model.prepare_data(torch.tensor(X, dtype=torch.float32), torch.zeros(len(X)))
    Z = Z.double().numpy()
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1),
                               np.linalg.norm(np.c_[X, np.ones(len(X))], axis=1), rtol=1e-5)
    gamma = np.random.default_rng(2).standard_normal(4)
    beta = V @ gamma
    np.testing.assert_allclose(Z @ gamma, X @ beta[:3] + beta[3], atol=1e-4)


def test_fit_rotates_batches_without_a_copy_of_the_rows(pair_data, monkeypatch):
    """The engine reads the caller's rows (the rotation happens per gathered batch),
    and per-batch rotation gives the fit of rows rotated once up front."""
    import skdpvi.dpvi.data as data_layer
    import skdpvi.linear_model._base as base

    X, y = pair_data
    X = np.ascontiguousarray(X, dtype=np.float32)
    seen = []
    run = base.run_dpvi

    def spy(*, data, **kw):
        seen.append(data[0])
        return run(data=data, **kw)

    monkeypatch.setattr(base, "run_dpvi", spy)
    once = DPBayesianLogisticRegression(decorrelation=0.2, random_state=0, **FAST).fit(X, y)
    assert np.shares_memory(seen[0], X)
    monkeypatch.setattr(data_layer, "_PREPARE_ONCE_BYTES", 0)  # gather and rotate per step
    per_batch = DPBayesianLogisticRegression(decorrelation=0.2, random_state=0,
                                             **FAST).fit(X, y)
    np.testing.assert_allclose(per_batch.coef_, once.coef_, rtol=1e-4, atol=1e-5)
    assert per_batch.clip_norm_ == once.clip_norm_


def test_rotated_components_map_draws_back():
    class Fixed:
        n_components = 1

        def sample(self, index, rng):
            return np.tile([1.0, 2.0], (len(index), 1))

    V = np.array([[0.0, 1.0], [1.0, 0.0]])
    draws = dec.RotatedComponents(Fixed(), V).sample(np.zeros(3, int), None)
    np.testing.assert_array_equal(draws, [[2.0, 1.0]] * 3)


def test_fit_accounts_for_the_gram_release(fitted):
    """epsilon_ certifies the composition of DP-SGD, the clipping histogram and the
    Gram release, and total_privacy_spent sees all three."""
    mechanisms, delta = fitted._dp_mechanism()
    assert len(mechanisms) == 3
    assert mechanisms[-1].noise_multiplier == pytest.approx(fitted.gram_noise_multiplier_)
    assert mechanisms[-1].sampling_rate == 1.0 and mechanisms[-1].steps == 1
    eps = compose_epsilon(mechanisms, delta)
    assert eps <= 3.0 * 1.0001
    assert eps == pytest.approx(fitted.epsilon_, rel=0.01)
    assert total_privacy_spent([fitted])[0] == pytest.approx(eps, rel=1e-6)
    # without the release, the same DP-SGD noise would spend visibly less
    assert compose_epsilon(mechanisms[:2], delta) < 0.97 * eps
    # the unfitted estimator plans the same mechanisms
    planned, _ = clone(fitted)._dp_mechanism()
    assert planned[-1].noise_multiplier == pytest.approx(fitted.gram_noise_multiplier_)


def test_fit_is_in_the_original_coordinates(fitted, pair_data):
    X, y = pair_data
    assert fitted.rotation_.shape == (4, 4)
    assert fitted.error_model_ == "dense_shrunk"
    assert list(fitted.param_names_) == ["coef[0]", "coef[1]", "coef[2]", "intercept"]
    draws = fitted.sample_posterior(500, random_state=0)
    assert draws.shape == (500, 4)
    logits = X[:5] @ fitted._theta_draws[:, :3].T + fitted._theta_draws[:, 3]
    p1 = (1 / (1 + np.exp(-logits))).mean(1)
    np.testing.assert_allclose(fitted.predict_proba(X[:5])[:, 1], p1)
    # the estimate is near the truth (0.8, -0.5, 0.6, 0.2) at epsilon 3 on 4,000 rows
    np.testing.assert_allclose(draws.mean(0), [0.8, -0.5, 0.6, 0.2], atol=0.35)
    from sklearn.linear_model import LogisticRegression

    assert fitted.score(X, y) > LogisticRegression().fit(X, y).score(X, y) - 0.02
    assert "decorrelation" in fitted.inference_diagnostics_


def test_correlated_pair_errs_together(fitted):
    """Mapped back, the posterior carries the pair's negative correlation (the exact
    posterior's is about -0.9) and none with the independent feature."""
    draws = fitted.sample_posterior(4000, random_state=1)
    corr = np.corrcoef(draws[:, 0], draws[:, 1])[0, 1]
    assert corr < -0.5
    assert abs(np.corrcoef(draws[:, 0], draws[:, 2])[0, 1]) < 0.5


def test_reproducible_pickled_and_batch_equals_fit(fitted, pair_data):
    X, y = pair_data
    again = clone(fitted).fit(X, y)
    np.testing.assert_array_equal(again.coef_, fitted.coef_)
    np.testing.assert_array_equal(again.rotation_, fitted.rotation_)
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X[:3]), fitted.predict_proba(X[:3]))
    batch = clone(fitted)._fit_batch([(X, y), (X[:3000], y[:3000])], [0, 7])
    np.testing.assert_allclose(batch[0].coef_, fitted.coef_, rtol=1e-4, atol=1e-4)
    assert batch[1].rotation_.shape == (4, 4)
    assert batch[1].random_state == 7


def test_lockstep_batch_fits_each_data_set_in_its_own_basis(pair_data):
    """Data sets of one shape run in lockstep with one model: each must still be fitted
    in its own rotation, as its own fit would (a shared model once rotated every data
    set by the first one's basis)."""
    X, y = pair_data
    rng = np.random.default_rng(3)
    datasets = [(X[:2000], y[:2000]), (X[2000:], y[2000:]),
                (X[:2000] @ np.diag([1.0, -1.0, 0.5]) + rng.normal(0, 0.3, (2000, 3)),
                 y[:2000])]
    est = DPBayesianLogisticRegression(decorrelation=0.2, **FAST)
    batch = est._fit_batch(datasets, [1, 2, 3])
    for member, (Xk, yk), seed in zip(batch, datasets, [1, 2, 3]):
        single = clone(est).set_params(random_state=seed).fit(Xk, yk)
        np.testing.assert_allclose(member.rotation_, single.rotation_)
        np.testing.assert_allclose(member.coef_, single.coef_, rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(member.predict_proba(Xk[:20]), single.predict_proba(Xk[:20]),
                                   atol=1e-3)


@pytest.mark.parametrize("value", [0, 1, 1.5, -0.1, float("nan"), "half", True])
def test_bad_decorrelation_is_named(pair_data, value):
    X, y = pair_data
    with pytest.raises(ValueError, match="decorrelation"):
        DPBayesianLogisticRegression(decorrelation=value, **FAST).fit(X[:200], y[:200])


def test_probit_correction_is_refused(pair_data):
    X, y = pair_data
    with pytest.raises(ValueError, match="probit"):
        DPBayesianLogisticRegression(decorrelation=0.1, wander_correction="probit",
                                     **FAST).fit(X[:200], y[:200])


def test_onehot_blocks_take_the_prior_in_the_original_coordinates():
    """A declared one-hot block still gets the prior along its flat direction: the
    flat direction is one of beta's, applied after the rotation is undone."""
    rng = np.random.default_rng(5)
    n = 3000
    cats = np.eye(3)[rng.integers(3, size=n)]
    X = np.c_[rng.standard_normal(n), cats]
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ [1.0, 0.5, -0.5, 0.0])))).astype(int)
    est = DPBayesianLogisticRegression(decorrelation=0.1, onehot_blocks=[[1, 2, 3]],
                                       random_state=0, **FAST).fit(X, y)
    flat = np.array([0, 1, 1, 1, -1.0]) / 2.0
    along = est.sample_posterior(4000, random_state=0) @ flat
    assert along.std() == pytest.approx(1.0, rel=0.1)  # the prior's sd, N(0, 1)


def test_sparse_and_float32_input_give_the_dense_fit(pair_data):
    import scipy.sparse as sp

    X, y = pair_data
    X, y = X[:1500], y[:1500]
    dense = DPBayesianLogisticRegression(decorrelation=0.2, random_state=0, **FAST).fit(X, y)
    sparse = DPBayesianLogisticRegression(decorrelation=0.2, random_state=0,
                                          **FAST).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.rotation_, dense.rotation_, atol=1e-8)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=1e-4, atol=1e-4)
    single = DPBayesianLogisticRegression(decorrelation=0.2, random_state=0,
                                          **FAST).fit(X.astype(np.float32), y)
    np.testing.assert_allclose(single.coef_, dense.coef_, atol=0.05)


def test_signal_only_rotation_keeps_the_axes_where_the_release_is_noise():
    """With ``signal``, directions the release cannot tell from its noise stay the
    coordinate axes (projected off the kept ones); the kept ones are eigenvectors."""
    rng = np.random.default_rng(0)
    n = 20_000
    common = rng.standard_normal((n, 1))
    # one strong direction (eigenvalue about 2.6 n) above three times the noise's
    # spectral norm (2 sqrt(5) 100 1.5^2 5 = 5,031), the rest (0.2 n, 0.05 n) below
    X = np.c_[np.sqrt(0.2) * rng.standard_normal((n, 3)) + np.sqrt(0.8) * common,
              np.sqrt(0.05) * rng.standard_normal((n, 2))]
    V, lam = dec.private_gram_rotation(X, False, 100.0, np.random.default_rng(1), signal=3.0)
    np.testing.assert_allclose(V.T @ V, np.eye(5), atol=1e-12)
    common_dir = np.r_[np.ones(3) / np.sqrt(3), 0, 0]
    assert abs(V[:, 0] @ common_dir) > 0.99  # the one direction above the noise
    # the independent features' axes are kept (up to sign)
    assert np.max(np.abs(V[3:, 1:]), axis=1).min() > 0.99
    full, _ = dec.private_gram_rotation(X, False, 100.0, np.random.default_rng(1))
    assert np.max(np.abs(full[3:, :]), axis=1).min() < 0.99  # noise mixes them
    none_kept, _ = dec.private_gram_rotation(X, False, 100.0, np.random.default_rng(1),
                                             signal=1e9)
    np.testing.assert_array_equal(none_kept, np.eye(5))


def test_without_intercept(pair_data):
    X, y = pair_data
    est = DPBayesianLogisticRegression(decorrelation=0.1, fit_intercept=False, epsilon=3.0,
                                       random_state=0, **FAST).fit(X[:2000], y[:2000])
    assert est.rotation_.shape == (3, 3) and est.intercept_ == 0.0
    assert est.sample_posterior(10, random_state=0).shape == (10, 3)
    assert est.predict_proba(X[:4]).shape == (4, 2)


def test_collinearity_warning_names_the_option_and_is_quiet_with_it(pair_data):
    from skdpvi.exceptions import IdentifiabilityWarning

    X, y = pair_data
    X = np.c_[X[:, :1], X[:, :1] + 0.05 * X[:, 1:2], X[:, 2:]]  # a nearly duplicated pair
    with pytest.warns(IdentifiabilityWarning, match="decorrelation=0.1"):
        DPBayesianLogisticRegression(max_iter=50, n_posterior_samples=50,
                                     random_state=0).fit(X[:500], y[:500])
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DPBayesianLogisticRegression(decorrelation=0.1, max_iter=50, n_posterior_samples=50,
                                     random_state=0).fit(X[:500], y[:500])
    assert not any("nearly collinear" in str(w.message) for w in caught)


def test_accounting_follows_the_fit_not_later_params(fitted, pair_data):
    X, y = pair_data
    est = clone(fitted)
    est.fit(X[:1500], y[:1500])
    ran, _ = est._dp_mechanism()
    est.set_params(decorrelation=None)
    assert est._dp_mechanism()[0] == ran  # the Gram release that ran stays accounted
    est.fit(X[:1500], y[:1500])  # refitted without: no Gram release, no rotation
    assert not hasattr(est, "rotation_") and len(est._dp_mechanism()[0]) == 2
