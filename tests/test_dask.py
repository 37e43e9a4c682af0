"""Studies and model searches on a dask.distributed cluster, through joblib.

Repetitions and searches go through joblib, so ``joblib.parallel_backend("dask")``
sends them to a cluster; the results must equal the local run's for the same seeds.
A small in-process LocalCluster (two single-threaded workers) stands in for a real one.
"""

import joblib
import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

from skdpvi import DPBayesianLinearRegression, DPBayesianLogisticRegression
from skdpvi.datasets import make_nig_linear_regression
from skdpvi.metrics import (make_predictive_coverage_scorer, neg_calibration_rmse_scorer,
                            run_tarp_study)

distributed = pytest.importorskip("distributed")

QUICK = dict(max_iter=100, n_posterior_samples=100, inference="exact", epsilon=2.0,
             random_state=0)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None, silence_logs=50) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def simulator(rng):
    X, y, theta = make_nig_linear_regression(300, n_features=2, random_state=rng)
    return theta, X, y


def _classification(n=600):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    return X, (X @ [1.5, -1.0, 0.5] + rng.logistic(size=n) > 0).astype(int)


def test_tarp_study_on_a_cluster_equals_the_local_run(client):
    est = DPBayesianLinearRegression(**{**QUICK, "random_state": None})
    kwargs = dict(n_simulations=12, n_draws=100, unconstrained=True, random_state=0,
                  batch_size=4, alpha_grid=np.linspace(0, 1, 6))
    local = run_tarp_study(est, simulator, n_jobs=1, **kwargs)
    with joblib.parallel_backend("dask"):
        remote = run_tarp_study(est, simulator, n_jobs=-1, **kwargs)
    np.testing.assert_array_equal(remote.samples, local.samples)
    np.testing.assert_array_equal(remote.frequencies, local.frequencies)
    assert remote.rmse == local.rmse


def test_cross_val_score_with_a_package_scorer_on_a_cluster(client):
    X, y = _classification()
    est = DPBayesianLogisticRegression(**QUICK)
    cv = KFold(3, shuffle=True, random_state=0)
    local = cross_val_score(est, X, y, scoring=neg_calibration_rmse_scorer, cv=cv, n_jobs=1)
    with joblib.parallel_backend("dask"):
        remote = cross_val_score(est, X, y, scoring=neg_calibration_rmse_scorer, cv=cv,
                                 n_jobs=-1)
    np.testing.assert_array_equal(remote, local)


def test_grid_search_with_a_package_scorer_on_a_cluster(client):
    _, X, y = simulator(np.random.default_rng(1))
    grid = dict(epsilon=[1.0, 3.0])
    scorer = make_predictive_coverage_scorer(n_samples=50)
    est = DPBayesianLinearRegression(**QUICK)
    local = GridSearchCV(est, grid, scoring=scorer, cv=2, n_jobs=1).fit(X, y)
    with joblib.parallel_backend("dask"):
        remote = GridSearchCV(est, grid, scoring=scorer, cv=2, n_jobs=-1).fit(X, y)
    np.testing.assert_array_equal(remote.cv_results_["mean_test_score"],
                                  local.cv_results_["mean_test_score"])
    assert remote.best_params_ == local.best_params_
    np.testing.assert_array_equal(remote.best_estimator_.coef_, local.best_estimator_.coef_)
