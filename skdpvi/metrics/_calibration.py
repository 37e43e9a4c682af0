"""Calibration of predicted probabilities for binary classifiers.

Four related but different numbers (``o_b`` = fraction of positives in bin
``b``, ``p_b`` = mean predicted probability in bin ``b``, ``n_b`` = number of
predictions in bin ``b``, ``B`` = number of non-empty bins, ``n`` = number of
predictions):

- :func:`calibration_curve_quantile`: the curve ``(o_b, p_b)`` itself, over
  equal-count (quantile) bins, with the bin counts.
- :func:`calibration_rmse`: ``sqrt((1/B) sum_b (o_b - p_b)^2)``, every bin
  weighted equally. This is the NA-DPVI paper's Table 3 metric ("RMSE of the
  calibration errors", with the per-bin error ``o_b - p_b`` of its Fig. 4).
- :func:`expected_calibration_error`: ``sum_b (n_b / n) |o_b - p_b|``, the
  usual count-weighted ECE.
- :func:`brier_score_loss`: ``(1/n) sum_j (p_j - y_j)^2`` over individual
  predictions, a proper scoring rule that mixes calibration and sharpness.

The paper says its RMSE "is the same as the square root of the Brier score".
That is false in general. Murphy's decomposition (with predictions constant
within bins) reads ``Brier = sum_b (n_b/n)(p_b - o_b)^2 - sum_b (n_b/n)(o_b -
o)^2 + o(1 - o)`` with ``o`` the overall positive rate: the Brier score also
contains the resolution and uncertainty terms, which have nothing to do with
calibration. Smallest counterexample: ``y_true = [0, 1]`` and ``y_prob = [0.5,
0.5]`` are perfectly calibrated (one bin, ``o = p = 0.5``, calibration RMSE 0),
yet ``sqrt(Brier) = sqrt(0.25) = 0.5``.

Inputs: ``y_true`` holds binary labels (``{0, 1}``, ``{-1, 1}`` or booleans;
other labels need ``pos_label``); ``y_prob`` is either the probability of the
positive class, shape (n,), or a ``predict_proba`` array of shape (n, 2) whose
column 1 is used.
"""

import numpy as np

from ._validation import _as_float_array, _check_in_unit_interval, _check_int

__all__ = [
    "calibration_curve_quantile",
    "calibration_rmse",
    "expected_calibration_error",
    "brier_score_loss",
]

_STRATEGIES = ("quantile", "uniform")


def _binary_targets(y_true, pos_label):
    """Return y_true as a float array of 0/1 (1 = positive class)."""
    y = np.asarray(y_true)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y_true must be 1-dimensional, got shape {y.shape}.")
    if y.size == 0:
        raise ValueError("y_true must not be empty.")
    if y.dtype.kind in "fc" and not np.all(np.isfinite(y)):
        raise ValueError("y_true contains NaN or infinite values.")
    labels = np.unique(y)
    if labels.size > 2:
        raise ValueError(
            f"y_true must be binary; it takes the values {labels.tolist()}."
        )
    if pos_label is None:
        numeric = y.dtype.kind in "biuf"
        if not numeric or not (
            set(labels.tolist()) <= {0, 1} or set(labels.tolist()) <= {-1, 1}
        ):
            raise ValueError(
                f"y_true takes the values {labels.tolist()} and pos_label is not "
                "given: make y_true take values in {0, 1} or {-1, 1}, or pass "
                "pos_label."
            )
        pos_label = 1
    elif labels.size == 2 and pos_label not in labels.tolist():
        raise ValueError(
            f"pos_label={pos_label!r} is not one of the labels of y_true, "
            f"{labels.tolist()}."
        )
    return (y == pos_label).astype(float)


def _positive_proba(y_prob):
    """Return the positive-class probabilities as a 1-D float array."""
    p = _as_float_array(y_prob, "y_prob")
    if p.ndim == 2 and p.shape[1] in (1, 2):
        if p.shape[1] == 2 and not np.allclose(p.sum(1), 1.0, rtol=0, atol=1e-6):
            raise ValueError(
                "The rows of a two-column y_prob (predict_proba of a binary "
                "classifier) must sum to 1."
            )
        p = p[:, -1]
    elif p.ndim != 1:
        raise ValueError(
            "y_prob must have shape (n_samples,) or (n_samples, 2) (predict_proba "
            f"of a binary classifier), got {p.shape}."
        )
    _check_in_unit_interval(p, "y_prob has values outside [0, 1].")
    return p


def _check_inputs(y_true, y_prob, pos_label, n_bins=None):
    y = _binary_targets(y_true, pos_label)
    p = _positive_proba(y_prob)
    if y.shape[0] != p.shape[0]:
        raise ValueError(
            f"y_true and y_prob have different lengths: {y.shape[0]} != {p.shape[0]}."
        )
    if n_bins is not None:
        _check_int(n_bins, "n_bins", 1)
        if y.shape[0] < n_bins:
            raise ValueError(
                f"There are {y.shape[0]} samples, fewer than n_bins={n_bins}."
            )
    return y, p


def _binned(y, p, n_bins, strategy):
    """Fraction of positives, mean prediction and count per non-empty bin.

    Same bin edges and assignment as ``sklearn.calibration.calibration_curve``.
    """
    if strategy == "quantile":
        edges = np.percentile(p, np.linspace(0, 100, n_bins + 1))
    elif strategy == "uniform":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    else:
        raise ValueError(
            f"strategy must be one of {_STRATEGIES}, got {strategy!r}."
        )
    ids = np.searchsorted(edges[1:-1], p)
    counts = np.bincount(ids, minlength=n_bins)
    sum_pred = np.bincount(ids, weights=p, minlength=n_bins)
    sum_true = np.bincount(ids, weights=y, minlength=n_bins)
    keep = counts > 0
    return sum_true[keep] / counts[keep], sum_pred[keep] / counts[keep], counts[keep]


def calibration_curve_quantile(y_true, y_prob, *, n_bins=10, pos_label=None):
    """Calibration curve over equal-count (quantile) bins, with bin counts.

    The bin edges are the ``0, 1/n_bins, ..., 1`` quantiles of ``y_prob``;
    each bin holds about ``n / n_bins`` predictions (fewer bins remain when
    tied predictions make some bins empty; empty bins are dropped). The
    values agree with ``sklearn.calibration.calibration_curve(y_true, y_prob,
    n_bins=n_bins, strategy="quantile")``, which does not return the counts.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Binary labels.
    y_prob : array-like of shape (n_samples,) or (n_samples, 2)
        Predicted probability of the positive class, or ``predict_proba``
        output (column 1 is used).
    n_bins : int, default=10
        Number of quantile bins; at most ``n_samples``.
    pos_label : int, float, bool or str, default=None
        The positive label; needed unless ``y_true`` is in ``{0, 1}`` or
        ``{-1, 1}`` (then 1 is positive).

    Returns
    -------
    prob_true : ndarray of shape (n_nonempty_bins,)
        Fraction of positives in each bin.
    prob_pred : ndarray of shape (n_nonempty_bins,)
        Mean predicted probability in each bin.
    bin_counts : ndarray of shape (n_nonempty_bins,)
        Number of predictions in each bin.

    Examples
    --------
    >>> from skdpvi.metrics import calibration_curve_quantile
    >>> y = [0, 0, 1, 0, 1, 1]
    >>> p = [0.1, 0.2, 0.3, 0.6, 0.7, 0.9]
    >>> prob_true, prob_pred, counts = calibration_curve_quantile(y, p, n_bins=2)
    >>> prob_true.round(3), prob_pred.round(3), counts
    (array([0.333, 0.667]), array([0.2  , 0.733]), array([3, 3]))
    """
    y, p = _check_inputs(y_true, y_prob, pos_label, n_bins)
    return _binned(y, p, n_bins, "quantile")


def calibration_rmse(y_true, y_prob, n_bins=10, *, strategy="quantile", pos_label=None):
    """Root mean square of the binned calibration errors (paper Table 3).

    ``sqrt((1/B) sum_b (o_b - p_b)^2)`` over the ``B`` non-empty bins, with
    ``o_b`` the fraction of positives and ``p_b`` the mean predicted
    probability in bin ``b``. Bins are weighted equally, not by count. This is
    NOT the square root of the Brier score, despite the paper's claim (see
    Notes).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Binary labels.
    y_prob : array-like of shape (n_samples,) or (n_samples, 2)
        Predicted probability of the positive class, or ``predict_proba``
        output (column 1 is used).
    n_bins : int, default=10
        Number of bins; at most ``n_samples``.
    strategy : {"quantile", "uniform"}, default="quantile"
        Equal-count bins or equal-width bins on [0, 1] (as in
        :func:`sklearn.calibration.calibration_curve`).
    pos_label : int, float, bool or str, default=None
        The positive label; needed unless ``y_true`` is in ``{0, 1}`` or
        ``{-1, 1}``.

    Returns
    -------
    rmse : float
        0 for a perfectly calibrated predictor (at the resolution of the bins).

    See Also
    --------
    expected_calibration_error : Count-weighted mean absolute error.
    calibration_curve_quantile : The per-bin values.

    Notes
    -----
    ``sqrt(Brier)`` is not this quantity: for ``y_true = [0, 1]`` and
    ``y_prob = [0.5, 0.5]`` the predictions are perfectly calibrated
    (calibration RMSE 0) while ``sqrt(Brier) = 0.5``. The Brier score adds
    the resolution and the irreducible uncertainty of the labels to the
    calibration term (Murphy's decomposition). The paper does not state its
    number of bins or binning strategy; quantile bins with ``n_bins=10`` are
    an assumption.

    Examples
    --------
    >>> from skdpvi.metrics import calibration_rmse, brier_score_loss
    >>> calibration_rmse([0, 1], [0.5, 0.5], n_bins=1)
    0.0
    >>> float(brier_score_loss([0, 1], [0.5, 0.5]) ** 0.5)
    0.5
    >>> round(calibration_rmse([0, 0, 1, 0, 1, 1],
    ...                        [0.1, 0.2, 0.3, 0.6, 0.7, 0.9], n_bins=2), 4)
    0.1054
    """
    y, p = _check_inputs(y_true, y_prob, pos_label, n_bins)
    prob_true, prob_pred, _ = _binned(y, p, n_bins, strategy)
    return float(np.sqrt(np.mean((prob_true - prob_pred) ** 2)))


def expected_calibration_error(
    y_true, y_prob, n_bins=10, strategy="quantile", *, pos_label=None
):
    """Expected calibration error: count-weighted mean absolute bin error.

    ``ECE = sum_b (n_b / n) |o_b - p_b|`` with ``n_b`` the number of
    predictions, ``o_b`` the fraction of positives and ``p_b`` the mean
    predicted probability in bin ``b``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Binary labels.
    y_prob : array-like of shape (n_samples,) or (n_samples, 2)
        Predicted probability of the positive class, or ``predict_proba``
        output (column 1 is used).
    n_bins : int, default=10
        Number of bins; at most ``n_samples``.
    strategy : {"quantile", "uniform"}, default="quantile"
        Equal-count or equal-width bins.
    pos_label : int, float, bool or str, default=None
        The positive label; needed unless ``y_true`` is in ``{0, 1}`` or
        ``{-1, 1}``.

    Returns
    -------
    ece : float
        In [0, 1]; 0 for a perfectly calibrated predictor.

    See Also
    --------
    calibration_rmse : Unweighted root mean square of the same bin errors.

    Examples
    --------
    >>> from skdpvi.metrics import expected_calibration_error
    >>> round(expected_calibration_error([0, 0, 1, 0, 1, 1],
    ...                                  [0.1, 0.2, 0.3, 0.6, 0.7, 0.9], n_bins=2), 4)
    0.1
    """
    y, p = _check_inputs(y_true, y_prob, pos_label, n_bins)
    prob_true, prob_pred, counts = _binned(y, p, n_bins, strategy)
    return float(np.sum(counts / y.shape[0] * np.abs(prob_true - prob_pred)))


def brier_score_loss(y_true, y_prob, *, sample_weight=None, pos_label=None):
    """Brier score of binary probabilistic predictions.

    ``(1/n) sum_j (p_j - y_j)^2`` (weighted mean with ``sample_weight``), the
    same value as :func:`sklearn.metrics.brier_score_loss` for binary
    targets; this wrapper also accepts a ``predict_proba`` array of shape
    (n, 2) on every scikit-learn version. It is a proper scoring rule, not a
    calibration measure: its square root is not the calibration RMSE (see
    :func:`calibration_rmse`).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Binary labels.
    y_prob : array-like of shape (n_samples,) or (n_samples, 2)
        Predicted probability of the positive class, or ``predict_proba``
        output (column 1 is used).
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights.
    pos_label : int, float, bool or str, default=None
        The positive label; needed unless ``y_true`` is in ``{0, 1}`` or
        ``{-1, 1}``.

    Returns
    -------
    score : float
        In [0, 1]; smaller is better.

    Examples
    --------
    >>> from skdpvi.metrics import brier_score_loss
    >>> round(brier_score_loss([0, 1, 1], [[0.8, 0.2], [0.3, 0.7], [0.5, 0.5]]), 4)
    0.1267
    """
    y, p = _check_inputs(y_true, y_prob, pos_label)
    if sample_weight is not None:
        sample_weight = _as_float_array(sample_weight, "sample_weight", ndim=1)
        if sample_weight.shape != y.shape or np.any(sample_weight < 0):
            raise ValueError(
                "sample_weight must be non-negative with shape "
                f"{y.shape}, got shape {sample_weight.shape}."
            )
        if not sample_weight.sum() > 0:
            raise ValueError("sample_weight must not be all zero.")
    return float(np.average((p - y) ** 2, weights=sample_weight))
