"""Coverage of posterior-predictive intervals on held-out targets.

Parameter TARP needs the true parameters, which only simulations have. On real
data (for instance inside cross-validation) calibration is checked on the
observable instead: the fraction of held-out ``y`` inside the central
``c``-credible interval of its posterior predictive should be ``c`` at every
level ``c``.
"""

from dataclasses import dataclass

import numpy as np

from ._tarp import DEFAULT_ALPHA_GRID, coverage_rmse
from ._validation import _as_float_array, _check_levels

__all__ = ["PredictiveCoverageResult", "predictive_coverage", "predictive_coverage_rmse"]


@dataclass
class PredictiveCoverageResult:
    """Coverage of central posterior-predictive intervals.

    Attributes
    ----------
    credibility : ndarray of shape (n_levels,)
        Credibility levels in increasing order.
    coverage : ndarray of shape (n_levels,)
        Fraction of held-out targets inside the central interval at each
        level.
    rmse : float
        Root mean squared coverage error over the levels (as paper eq. 27).
    """

    credibility: np.ndarray
    coverage: np.ndarray
    rmse: float


def _check_predictive_inputs(y_true, y_samples):
    y_true = _as_float_array(y_true, "y_true")
    if y_true.ndim == 2 and y_true.shape[1] == 1:
        y_true = y_true.ravel()
    if y_true.ndim != 1 or y_true.size == 0:
        raise ValueError(
            f"y_true must be a non-empty 1-D array, got shape {y_true.shape}."
        )
    y_samples = _as_float_array(y_samples, "y_samples", ndim=2)
    if y_samples.shape[0] != y_true.shape[0]:
        raise ValueError(
            "y_samples must have shape (n_samples, n_draws) with n_samples = "
            f"len(y_true) = {y_true.shape[0]}, got {y_samples.shape}."
        )
    if y_samples.shape[1] < 2:
        raise ValueError(
            f"y_samples needs at least 2 draws per target, got {y_samples.shape[1]}."
        )
    return y_true, y_samples


def predictive_coverage(y_true, y_samples, *, credibility=None):
    """Coverage of central posterior-predictive intervals for regression.

    For each level ``c`` the interval is ``[q_{(1-c)/2}, q_{(1+c)/2}]``, the
    equal-tailed empirical quantiles (linear interpolation, as
    :func:`numpy.quantile`) of the predictive draws of each target; the
    coverage is the fraction of ``y_true`` inside it (ends included).

    ``y`` lies in the central ``c``-interval iff ``|2 F(y) - 1| <= c``, with
    ``F`` the predictive CDF: the statistic ``|2 F(y) - 1|`` plays the role of
    TARP's ``f_i`` and is uniform on (0, 1) when the predictive is correct.
    For a symmetric predictive it equals TARP's ``f_i`` with the reference at
    the predictive median, so this is 1-D TARP on ``y`` with that reference;
    for skewed predictives the equal-tailed interval replaces the ball around
    the median, and both are calibrated under correct specification.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Held-out targets.
    y_samples : array-like of shape (n_samples, n_draws)
        Posterior-predictive draws for each target, e.g. ``sample_y(X,
        n_samples=n_draws)`` of a regressor (the layout of
        :meth:`sklearn.gaussian_process.GaussianProcessRegressor.sample_y`).
    credibility : array-like of shape (n_levels,), default=None
        Credibility levels in [0, 1]. Default ``1 - DEFAULT_ALPHA_GRID``, the
        levels of :func:`tarp_coverage`.

    Returns
    -------
    result : PredictiveCoverageResult
        ``credibility``, ``coverage`` and ``rmse``.

    See Also
    --------
    predictive_coverage_rmse : Only the RMSE.
    tarp_coverage : Parameter coverage in simulation studies.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpvi.metrics import predictive_coverage
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.normal(size=2000)
    >>> y = mu + rng.normal(size=2000)                     # truth: N(mu, 1)
    >>> draws = mu[:, None] + rng.normal(size=(2000, 400))  # correct predictive
    >>> res = predictive_coverage(y, draws, credibility=[0.5, 0.9])
    >>> res.coverage.round(2)
    array([0.5 , 0.89])
    """
    y_true, y_samples = _check_predictive_inputs(y_true, y_samples)
    if credibility is None:
        credibility = np.sort(1.0 - DEFAULT_ALPHA_GRID)
    else:
        credibility = _check_levels(credibility, "credibility")
    tails = (1.0 - credibility) / 2.0
    lower = np.quantile(y_samples, tails, axis=1)  # (n_levels, n_samples)
    upper = np.quantile(y_samples, 1.0 - tails, axis=1)
    coverage = ((lower <= y_true) & (y_true <= upper)).mean(axis=1)
    return PredictiveCoverageResult(
        credibility=credibility,
        coverage=coverage,
        rmse=coverage_rmse(credibility, coverage),
    )


def predictive_coverage_rmse(y_true, y_samples, *, credibility=None):
    """RMSE of the predictive-interval coverage errors over credibility levels.

    ``sqrt(mean_c (coverage(c) - c)^2)`` with ``coverage`` from
    :func:`predictive_coverage`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Held-out targets.
    y_samples : array-like of shape (n_samples, n_draws)
        Posterior-predictive draws for each target.
    credibility : array-like of shape (n_levels,), default=None
        Credibility levels; default as in :func:`predictive_coverage`.

    Returns
    -------
    rmse : float
        0 for perfectly calibrated predictive intervals.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpvi.metrics import predictive_coverage_rmse
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=1000)
    >>> too_narrow = 0.3 * rng.normal(size=(1000, 200))
    >>> bool(predictive_coverage_rmse(y, too_narrow) > 0.2)
    True
    """
    return predictive_coverage(y_true, y_samples, credibility=credibility).rmse
