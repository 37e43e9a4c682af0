"""The linear estimator warns when the release shows uncentred features."""

import warnings

import numpy as np
import pytest

from skdpvi import DPBayesianLinearRegression
from skdpvi.exceptions import IdentifiabilityWarning


def _data(shift, n=1500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) + shift
    y = (X - shift) @ [0.3, -0.2, 0.1] + rng.normal(0, 0.2, n)
    return X, y


def _estimator():
    return DPBayesianLinearRegression(epsilon=3.0, max_iter=800, n_posterior_samples=200,
                                      random_state=0)


def test_uncentred_features_warn_with_the_release_estimate():
    X, y = _data(shift=4.0)
    with pytest.warns(IdentifiabilityWarning, match="far from centred"):
        est = _estimator().fit(X, y)
    # three features 4 sds off: 49 (the trace reads it low, one reason to warn)
    assert est.inference_diagnostics_["intercept_inflation"] > 10


def test_centred_features_do_not_warn():
    X, y = _data(shift=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentifiabilityWarning)
        est = _estimator().fit(X, y)
    assert est.inference_diagnostics_["intercept_inflation"] < 2.0
