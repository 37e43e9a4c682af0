"""DPBayesianLogisticRegression(variational_family="full_rank")."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone

from skdpvi import DPBayesianLogisticRegression
from skdpvi.dpvi import FullRankRelease
from skdpvi.metrics import run_tarp_study


def _data(seed=0, n=600):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ [1.0, -1.0, 0.5] + 0.3)))).astype(int)
    return X, y


def _estimator(**params):
    return DPBayesianLogisticRegression(variational_family="full_rank", max_iter=300,
                                        random_state=0, **params)


def test_fit_predict_and_reproducible():
    X, y = _data()
    est = _estimator().fit(X, y)
    assert isinstance(est.dpvi_result_, FullRankRelease)
    assert est.posterior_.method == "full_rank"
    assert est.error_model_ is None and est.wander_correction_ == "probit"
    assert est.inference_diagnostics_["wander_width"] >= 0
    assert est.epsilon_ <= 1.0 and est.clip_norm_ > 0
    assert est.predict_proba(X[:4]).shape == (4, 2)
    assert est.sample_posterior(7).shape == (7, 4)
    assert len(est.dpvi_result_.phi) == 2 * 4 + 6
    again = _estimator().fit(X, y)
    np.testing.assert_array_equal(again.coef_, est.coef_)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).predict_proba(X[:4]),
                                  est.predict_proba(X[:4]))
    assert clone(est).get_params()["variational_family"] == "full_rank"


@pytest.mark.parametrize("params, name", [
    (dict(variational_family="full"), "variational_family"),
    (dict(variational_family="full_rank", inference="emcee"), "inference"),
    (dict(variational_family="full_rank", error_model="dense"), "error_model"),
    (dict(variational_family="full_rank", wander_correction="probit", fit_intercept=False),
     "fit_intercept"),
    (dict(variational_family="full_rank", decorrelation=0.1), "decorrelation"),
])
def test_unsupported_combinations_name_the_parameter(params, name):
    X, y = _data()
    with pytest.raises(ValueError, match=name):
        DPBayesianLogisticRegression(max_iter=50, **params).fit(X, y)


def test_onehot_blocks_take_the_prior_along_their_flat_direction():
    rng = np.random.default_rng(1)
    n = 800
    onehot = np.eye(3)[rng.integers(3, size=n)]
    X = np.c_[rng.standard_normal((n, 1)), onehot]
    y = (rng.random(n) < 0.5).astype(int)
    est = _estimator(onehot_blocks=[[1, 2, 3]], prior_scale=2.0).fit(X, y)
    flat = np.r_[0.0, 1.0, 1.0, 1.0, -1.0] / 2.0
    draws = est.sample_posterior(4000, random_state=0)
    assert abs(np.std(draws @ flat) / 2.0 - 1) < 0.05


def test_tarp_study_fits_one_by_one_as_fit_does():
    X, y = _data()
    assert not _estimator()._batch_fit_supported()

    def simulator(rng):
        return np.zeros(4), X, y

    kw = dict(n_simulations=3, n_draws=20, random_state=0, n_jobs=1, alpha_grid=[0.5, 0.9])
    study = run_tarp_study(_estimator(), simulator, **kw)
    assert study.samples.shape == (3, 20, 4) and np.all(np.isfinite(study.samples))
    np.testing.assert_array_equal(run_tarp_study(_estimator(), simulator, **kw).samples,
                                  study.samples)
