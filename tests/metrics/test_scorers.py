"""Tests of the model-selection scorers (skdpvi.metrics._scorers)."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss as sk_brier_score_loss
from sklearn.model_selection import GridSearchCV, KFold

from skdpvi.metrics import (
    calibration_rmse,
    expected_calibration_error,
    get_scorer,
    make_predictive_coverage_scorer,
    neg_brier_score_scorer,
    neg_calibration_rmse_scorer,
    neg_expected_calibration_error_scorer,
    neg_predictive_coverage_rmse_scorer,
    predictive_coverage_rmse,
)


@pytest.fixture(scope="module")
def classification_data():
    return make_classification(n_samples=600, n_features=5, random_state=0)


def test_classifier_scorer_values(classification_data):
    X, y = classification_data
    clf = LogisticRegression().fit(X[:400], y[:400])
    p = clf.predict_proba(X[400:])[:, 1]
    assert neg_calibration_rmse_scorer(clf, X[400:], y[400:]) == pytest.approx(
        -calibration_rmse(y[400:], p)
    )
    assert neg_expected_calibration_error_scorer(clf, X[400:], y[400:]) == pytest.approx(
        -expected_calibration_error(y[400:], p)
    )
    assert neg_brier_score_scorer(clf, X[400:], y[400:]) == pytest.approx(
        -sk_brier_score_loss(y[400:], p)
    )
    # String labels: classes_[1] is the positive class.
    labels = np.where(y == 1, "yes", "no")
    clf_s = LogisticRegression().fit(X[:400], labels[:400])
    assert neg_calibration_rmse_scorer(clf_s, X[400:], labels[400:]) == pytest.approx(
        neg_calibration_rmse_scorer(clf, X[400:], y[400:])
    )


def test_scorer_in_grid_search_alone(classification_data):
    X, y = classification_data
    cv = KFold(3, shuffle=True, random_state=0)
    grid = {"C": [1e-3, 1.0]}
    search = GridSearchCV(LogisticRegression(), grid, scoring=neg_calibration_rmse_scorer,
                          cv=cv).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(scores <= 0)
    # Recompute one cell by hand.
    train, test = next(cv.split(X))
    clf = LogisticRegression(C=1e-3).fit(X[train], y[train])
    expected = -calibration_rmse(y[test], clf.predict_proba(X[test]))
    assert search.cv_results_["split0_test_score"][0] == pytest.approx(expected)
    # Heavy regularisation squeezes probabilities to 0.5: badly calibrated.
    assert search.best_params_ == {"C": 1.0}


def test_scorers_in_multimetric_grid_search(classification_data):
    X, y = classification_data
    scoring = {
        "cal": neg_calibration_rmse_scorer,
        "ece": get_scorer("neg_expected_calibration_error"),
        "brier": neg_brier_score_scorer,
        "acc": "accuracy",
    }
    search = GridSearchCV(LogisticRegression(), {"C": [1e-3, 1e-2, 1.0]},
                          scoring=scoring, refit="ece", cv=3).fit(X, y)
    for key in ("cal", "ece", "brier"):
        assert np.all(search.cv_results_[f"mean_test_{key}"] <= 0)
    assert search.best_index_ == np.argmax(search.cv_results_["mean_test_ece"])
    assert hasattr(search.best_estimator_, "predict_proba")


class SampleYRegressor(RegressorMixin, BaseEstimator):
    """Least squares with Gaussian predictive draws scaled by ``scale``."""

    def __init__(self, scale=1.0):
        self.scale = scale

    def fit(self, X, y):
        X1 = np.column_stack([X, np.ones(len(X))])
        self.coef_, *_ = np.linalg.lstsq(X1, y, rcond=None)
        self.sigma_ = np.std(y - X1 @ self.coef_)
        return self

    def predict(self, X):
        return np.column_stack([X, np.ones(len(X))]) @ self.coef_

    def sample_y(self, X, n_samples=1, random_state=0):
        rng = np.random.default_rng(random_state)
        noise = rng.normal(size=(len(X), n_samples))
        return self.predict(X)[:, None] + self.scale * self.sigma_ * noise


def test_regression_scorer_in_grid_search():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=900)
    grid = {"scale": [0.3, 1.0, 3.0]}
    search = GridSearchCV(SampleYRegressor(), grid, cv=3,
                          scoring=neg_predictive_coverage_rmse_scorer).fit(X, y)
    assert search.best_params_ == {"scale": 1.0}
    assert search.best_score_ > -0.05
    multi = GridSearchCV(
        SampleYRegressor(), grid, cv=3, refit="coverage",
        scoring={"coverage": get_scorer("neg_predictive_coverage_rmse"),
                 "mse": "neg_mean_squared_error"},
    ).fit(X, y)
    assert multi.best_params_ == {"scale": 1.0}
    # MSE cannot tell the scales apart; coverage can.
    np.testing.assert_allclose(multi.cv_results_["mean_test_mse"],
                               multi.cv_results_["mean_test_mse"][0])
    est = SampleYRegressor().fit(X, y)
    draws = est.sample_y(X, n_samples=200, random_state=0)
    assert neg_predictive_coverage_rmse_scorer(est, X, y) == pytest.approx(
        -predictive_coverage_rmse(y, draws)
    )
    scorer = make_predictive_coverage_scorer(n_samples=50, random_state=3)
    assert scorer(est, X, y) == pytest.approx(
        -predictive_coverage_rmse(y, est.sample_y(X, n_samples=50, random_state=3))
    )


def test_regression_scorer_unwraps_a_pipeline():
    # Pipeline has no sample_y: the scorer draws from its last step on the data its
    # other steps transform (every fold scored NaN before)
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(1)
    X = rng.normal(3.0, 2.0, size=(600, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=600)
    pipe = make_pipeline(StandardScaler(), SampleYRegressor()).fit(X, y)
    est = pipe[-1]
    expected = -predictive_coverage_rmse(
        y, est.sample_y(pipe[0].transform(X), n_samples=200, random_state=0))
    assert neg_predictive_coverage_rmse_scorer(pipe, X, y) == pytest.approx(expected)
    scores = cross_val_score(make_pipeline(StandardScaler(), SampleYRegressor()), X, y, cv=3,
                             scoring=neg_predictive_coverage_rmse_scorer)
    assert np.all(np.isfinite(scores)) and scores.mean() > -0.1


def test_get_scorer_and_bad_estimators(classification_data):
    assert get_scorer("neg_calibration_rmse") is neg_calibration_rmse_scorer
    assert get_scorer("neg_expected_calibration_error") is neg_expected_calibration_error_scorer
    assert get_scorer("neg_predictive_coverage_rmse") is neg_predictive_coverage_rmse_scorer
    assert callable(get_scorer("accuracy"))
    assert get_scorer(neg_brier_score_scorer) is neg_brier_score_scorer
    with pytest.raises(ValueError, match="neg_calibration_rmse"):
        get_scorer("neg_calibration_mse")
    X, y = classification_data
    reg = SampleYRegressor().fit(X, y.astype(float))
    with pytest.raises(ValueError, match="predict_proba"):
        neg_calibration_rmse_scorer(reg, X, y)
    clf = LogisticRegression().fit(X, y)
    with pytest.raises(ValueError, match="sample_y"):
        neg_predictive_coverage_rmse_scorer(clf, X, y)
    with pytest.raises(ValueError, match="n_samples"):
        make_predictive_coverage_scorer(n_samples=1)
