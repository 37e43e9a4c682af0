"""The design checks before any privacy mechanism (skdpvi.linear_model._input_checks):
nearly collinear features warn, with their variance inflation factors; the check
skips one-hot blocks and constant columns, reads sparse input, and stores nothing."""
import warnings

import numpy as np
import pytest
from scipy import sparse

from skdpvi import DPBayesianLinearRegression, DPBayesianLogisticRegression
from skdpvi.exceptions import IdentifiabilityWarning
from skdpvi.linear_model._input_checks import (LARGEST_VARIANCE_INFLATION, check_input_design,
                                               variance_inflation)


def _pair(rho, n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 1] = rho * X[:, 0] + np.sqrt(1 - rho**2) * X[:, 1]
    return X


def test_variance_inflation_of_a_correlated_pair():
    # two features with correlation rho: 1 / (1 - rho^2) for both, 1 for the others
    vif = variance_inflation(_pair(0.98, n=20_000))
    np.testing.assert_allclose(vif, [1 / (1 - 0.98**2)] * 2 + [1.0] * 2, rtol=0.05)
    np.testing.assert_allclose(variance_inflation(sparse.csr_matrix(_pair(0.98))),
                               variance_inflation(_pair(0.98)))
    skipped = variance_inflation(_pair(0.98), skip={1})
    assert np.isnan(skipped[1]) and np.all(skipped[[0, 2, 3]] < 1.01)
    # an exact duplicate: inf for the two copies, finite for the rest
    X = _pair(0.0)
    vif = variance_inflation(np.c_[X, X[:, 2]])
    assert np.isinf(vif[2]) and np.isinf(vif[4]) and np.all(vif[[0, 1, 3]] < 1.01)
    # a constant column is left out (NaN), and one column alone has no factor
    assert np.isnan(variance_inflation(np.c_[X, np.ones(len(X))])[4])
    assert np.all(np.isnan(variance_inflation(X[:, :1])))


def test_variance_inflation_reads_at_most_its_rows(monkeypatch):
    from skdpvi.linear_model import _input_checks

    monkeypatch.setattr(_input_checks, "_COLLINEARITY_ROWS", (500, 10**6))
    vif = variance_inflation(_pair(0.9, n=50_000))
    assert np.all(np.abs(vif[:2] / (1 / (1 - 0.81)) - 1) < 0.3)


def test_the_design_check_warns_about_collinear_columns_only():
    def messages(X, declared=(), fit_intercept=True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_input_design(X, [np.asarray(b) for b in declared], fit_intercept)
        return [str(w.message) for w in caught]

    shown = messages(_pair(0.98))
    assert len(shown) == 1 and "Columns [0, 1] of X are nearly collinear" in shown[0]
    assert "0: 2" in shown[0] or "1: 2" in shown[0]  # the factors, about 25
    rho = np.sqrt(1 - 1 / LARGEST_VARIANCE_INFLATION) - 0.02  # just below the bound
    assert messages(_pair(rho, n=20_000)) == []
    # a complete one-hot block (exactly collinear with the intercept) is the one-hot
    # check's, declared or not; a block encoded without its first category passes
    rng = np.random.default_rng(1)
    block = np.eye(4)[rng.integers(0, 4, 3000)]
    X = np.c_[_pair(0.0), block]
    undeclared = messages(X)
    assert len(undeclared) == 1 and "one-hot" in undeclared[0]
    assert messages(X, declared=[[4, 5, 6, 7]]) == []
    assert messages(X[:, :7]) == []


def test_logistic_fit_warns_about_collinear_columns_and_stores_nothing():
    X = _pair(0.99, n=400)
    y = (X[:, 0] + X[:, 2] > 0).astype(int)
    with pytest.warns(IdentifiabilityWarning, match="nearly collinear"):
        est = DPBayesianLogisticRegression(max_iter=100, random_state=0).fit(X, y)
    assert "collinear" not in repr(est.__dict__)
    # the linear model reads X^T X off its release (measured calibrated on the
    # diabetes data's collinear serum features): no such warning
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*nearly collinear")
        DPBayesianLinearRegression(max_iter=100, random_state=0).fit(
            X, 0.3 * X[:, 0] + 0.2 * X[:, 2])


def test_features_standardised_on_these_rows_warn_about_privacy():
    """A StandardScaler fitted on the private rows keeps their means and sds, outside
    the guarantee; only exactly standardised columns (mean 0, sd 1 to rounding) warn."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skdpvi.exceptions import PrivacyWarning
    from skdpvi.linear_model._input_checks import warn_private_standardisation

    def warned(X):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn_private_standardisation(X)
        return any(issubclass(w.category, PrivacyWarning) for w in caught)

    rng = np.random.default_rng(3)
    X = 3.0 + 2.0 * rng.normal(size=(500, 3))
    onehot = np.eye(3)[rng.integers(0, 3, 500)]
    scaled = StandardScaler().fit_transform(X)
    assert warned(scaled) and warned(scaled.astype(np.float32))
    assert warned(np.c_[scaled, onehot])  # binary columns are left as they are
    assert not warned(X) and not warned((X - 3.0) / 2.0)  # public constants
    assert not warned(StandardScaler().fit(X[:250]).transform(X[250:]))  # other rows
    assert not warned(onehot) and not warned(sparse.csr_matrix(scaled))
    y = (X[:, 0] > 3.0).astype(int)
    with pytest.warns(PrivacyWarning, match="standardised with the means"):
        make_pipeline(StandardScaler(), DPBayesianLogisticRegression(
            max_iter=100, random_state=0)).fit(X, y)


@pytest.mark.parametrize("Estimator", [DPBayesianLinearRegression, DPBayesianLogisticRegression])
@pytest.mark.parametrize("factor", [1e20, 1e40, 1e300])
def test_values_beyond_float32_arithmetic_are_refused_by_name(Estimator, factor):
    # before: the logistic fit ran on X * 1e40 (inf in float32) to coefficients near 0,
    # and on X * 1e300 failed with "Eigenvalues did not converge"
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    y = (rng.random(50) < 0.5).astype(float)
    est = Estimator(max_iter=20)
    with pytest.raises(ValueError, match=r"^X has an entry of magnitude .*Rescale X"):
        est.fit(X * factor, y)
    with pytest.raises(ValueError, match="^X has an entry of magnitude"):
        est.fit(sparse.csr_matrix(X * factor), y)
    if Estimator is DPBayesianLinearRegression:
        with pytest.raises(ValueError, match=r"^y has an entry of magnitude .*Rescale y"):
            est.fit(X, y * factor)


def test_the_magnitude_check_lets_large_but_safe_values_through():
    from skdpvi.linear_model._input_checks import (LARGEST_INPUT_MAGNITUDE,
                                                   check_input_magnitude)
    check_input_magnitude("X", np.array([[LARGEST_INPUT_MAGNITUDE, -LARGEST_INPUT_MAGNITUDE]]))
    check_input_magnitude("X", np.empty((0, 3)))
    check_input_magnitude("X", sparse.csr_matrix((3, 3)))
    with pytest.raises(ValueError, match="X has an entry of magnitude 2e"):
        check_input_magnitude("X", np.array([[0.0, -2 * LARGEST_INPUT_MAGNITUDE]]))
