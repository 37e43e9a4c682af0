"""Tests of the calibration metrics of binary classifiers (skdpvi.metrics._calibration)."""

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss as sk_brier_score_loss

from skdpvi.metrics import (
    brier_score_loss,
    calibration_curve_quantile,
    calibration_rmse,
    expected_calibration_error,
)


Y_SMALL = np.array([0, 0, 1, 0, 1, 1])
P_SMALL = np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.9])


def test_calibration_hand_computed():
    prob_true, prob_pred, counts = calibration_curve_quantile(Y_SMALL, P_SMALL, n_bins=2)
    np.testing.assert_allclose(prob_true, [1 / 3, 2 / 3])
    np.testing.assert_allclose(prob_pred, [0.2, 2.2 / 3])
    np.testing.assert_array_equal(counts, [3, 3])
    errors = np.array([1 / 3 - 0.2, 2 / 3 - 2.2 / 3])
    assert calibration_rmse(Y_SMALL, P_SMALL, n_bins=2) == pytest.approx(
        np.sqrt(np.mean(errors**2))
    )
    assert expected_calibration_error(Y_SMALL, P_SMALL, n_bins=2) == pytest.approx(0.1)
    # Unequal counts: ECE weights by count, RMSE does not.
    y = np.array([0, 0, 0, 1])
    p = np.array([0.1, 0.1, 0.1, 0.9])  # edges 0.1, 0.1, 0.9 -> bins {0.1 x3}, {0.9}
    prob_true, prob_pred, counts = calibration_curve_quantile(y, p, n_bins=2)
    np.testing.assert_array_equal(counts, [3, 1])
    assert expected_calibration_error(y, p, n_bins=2) == pytest.approx(0.75 * 0.1 + 0.25 * 0.1)
    assert calibration_rmse(y, p, n_bins=2) == pytest.approx(0.1)


@pytest.mark.parametrize("n_bins", [1, 3, 10, 25])
@pytest.mark.parametrize("ties", [False, True])
def test_calibration_curve_matches_sklearn(n_bins, ties):
    rng = np.random.default_rng(n_bins)
    p = rng.beta(2, 3, size=500)
    if ties:
        p = np.round(p, 1)
    y = (rng.uniform(size=500) < p ** 1.5).astype(int)
    prob_true, prob_pred, counts = calibration_curve_quantile(y, p, n_bins=n_bins)
    sk_true, sk_pred = calibration_curve(y, p, n_bins=n_bins, strategy="quantile")
    np.testing.assert_allclose(prob_true, sk_true)
    np.testing.assert_allclose(prob_pred, sk_pred)
    assert counts.sum() == 500
    if not ties:
        assert counts.max() - counts.min() <= 1  # equal-count bins
    for strategy in ("quantile", "uniform"):
        sk_true, sk_pred = calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
        rmse = calibration_rmse(y, p, n_bins=n_bins, strategy=strategy)
        assert rmse == pytest.approx(np.sqrt(np.mean((sk_true - sk_pred) ** 2)))


def test_calibration_accepts_predict_proba_and_labels():
    reference = calibration_rmse(Y_SMALL, P_SMALL, n_bins=2)
    assert reference > 0
    proba = np.column_stack([1 - P_SMALL, P_SMALL])
    assert calibration_rmse(Y_SMALL, proba, n_bins=2) == reference
    assert calibration_rmse(2 * Y_SMALL - 1, P_SMALL, n_bins=2) == reference
    assert calibration_rmse(Y_SMALL.astype(bool), P_SMALL, n_bins=2) == reference
    labels = np.where(Y_SMALL == 1, "yes", "no")
    assert calibration_rmse(labels, P_SMALL, 2, pos_label="yes") == reference
    assert expected_calibration_error(labels, P_SMALL, 2, pos_label="yes") == pytest.approx(0.1)


def test_brier_matches_sklearn():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=200)
    y = (rng.uniform(size=200) < p).astype(int)
    w = rng.uniform(size=200)
    assert brier_score_loss(y, p) == pytest.approx(sk_brier_score_loss(y, p))
    assert brier_score_loss(y, np.column_stack([1 - p, p])) == pytest.approx(
        sk_brier_score_loss(y, p)
    )
    assert brier_score_loss(y, p, sample_weight=w) == pytest.approx(
        sk_brier_score_loss(y, p, sample_weight=w)
    )


def test_calibration_rmse_is_not_sqrt_brier():
    # Perfectly calibrated, yet sqrt(Brier) = 0.5 (the paper's claim is false).
    y, p = np.array([0, 1]), np.array([0.5, 0.5])
    assert calibration_rmse(y, p, n_bins=1) == 0.0
    assert calibration_rmse(y, p, n_bins=2) == 0.0  # tied edges: one bin
    assert np.sqrt(brier_score_loss(y, p)) == pytest.approx(0.5)
    # And on realistic calibrated predictions the two are far apart.
    rng = np.random.default_rng(0)
    p = rng.uniform(size=20000)
    y = (rng.uniform(size=20000) < p).astype(int)
    assert calibration_rmse(y, p) < 0.02
    assert np.sqrt(brier_score_loss(y, p)) > 0.35


def test_calibration_detects_miscalibration():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=20000)
    y = (rng.uniform(size=20000) < p).astype(int)
    over = np.clip(0.5 + 1.8 * (p - 0.5), 0, 1)  # over-confident
    assert calibration_rmse(y, over) > 5 * calibration_rmse(y, p)
    assert expected_calibration_error(y, over) > 5 * expected_calibration_error(y, p)


@pytest.mark.parametrize(
    "y, p, kwargs, match",
    [
        ([0, 1, 1], [0.1, 0.2], {}, "lengths"),
        ([0, 1, 1], [0.1, np.nan, 0.3], {}, "y_prob"),
        ([0, 1, 1], [0.1, 1.2, 0.3], {}, "y_prob"),
        ([0, 1, 1], [-0.1, 0.2, 0.3], {}, "y_prob"),
        ([0, 1, 1], np.full((3, 3), 1 / 3), {}, "y_prob"),
        ([0, 1, 2], [0.1, 0.2, 0.3], {}, "binary"),
        (["a", "b", "b"], [0.1, 0.2, 0.3], {}, "pos_label"),
        (["a", "b", "b"], [0.1, 0.2, 0.3], dict(pos_label="A"), "pos_label='A' is not"),
        ([0, 1, 1], [[0.9, 0.2], [0.5, 0.5], [0.3, 0.7]], {}, "sum to 1"),
        ([0, np.nan, 1], [0.1, 0.2, 0.3], {}, "y_true"),
        ([0, 1, 1], [0.1, 0.2, 0.3], dict(n_bins=4), "n_bins"),
        ([0, 1, 1], [0.1, 0.2, 0.3], dict(n_bins=0), "n_bins"),
        ([0, 1, 1], [0.1, 0.2, 0.3], dict(n_bins=2, strategy="kmeans"), "strategy"),
    ],
)
def test_calibration_bad_input(y, p, kwargs, match):
    with pytest.raises(ValueError, match=match):
        calibration_rmse(y, p, **kwargs)
    if "strategy" not in kwargs:
        with pytest.raises(ValueError, match=match):
            calibration_curve_quantile(y, p, **kwargs)


def test_brier_refuses_all_zero_weights():
    with pytest.raises(ValueError, match="all zero"):  # was a ZeroDivisionError
        brier_score_loss([0, 1, 1], [0.1, 0.2, 0.3], sample_weight=np.zeros(3))
