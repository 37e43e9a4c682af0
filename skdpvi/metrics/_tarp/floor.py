"""The coverage RMSE that a perfectly calibrated method gets from K simulations."""

import numpy as np

from .coverage import _coverage_curve, _credibility_grid, _rmse

__all__ = ["coverage_rmse_floor"]


def coverage_rmse_floor(n_simulations, *, alpha_grid=None, n_repeats=2000, quantiles=(0.05, 0.95),
                        random_state=None):
    """TARP coverage RMSE that a perfectly calibrated method gets with K simulations.

    With a finite number K of simulations the estimated coverage curve is noisy,
    so even an exact posterior has an RMSE of roughly ``sqrt(1 / (6 K))`` (on average
    0.058 for K = 40 and 0.017 for K = 500 with the default grid). This simulates it: for a calibrated method the
    TARP frequencies are i.i.d. Uniform(0, 1). Compare a study's RMSE with this
    floor before reading anything into it.

    Parameters
    ----------
    n_simulations : int
        K, the number of simulated data sets of the study.
    alpha_grid : array-like, default=None
        The alpha values of the study; default :data:`DEFAULT_ALPHA_GRID`.
    n_repeats : int, default=2000
        Simulated studies.
    quantiles : tuple of float, default=(0.05, 0.95)
    random_state : int, numpy Generator or None

    Returns
    -------
    mean : float
        Expected RMSE of a calibrated method.
    bounds : ndarray of shape (len(quantiles),)
        Its quantiles: an RMSE above the upper one is evidence of miscalibration.

    Examples
    --------
    >>> from skdpvi.metrics import coverage_rmse_floor
    >>> mean, (lo, hi) = coverage_rmse_floor(500, random_state=0)
    >>> bool(0.01 < mean < 0.025)
    True
    """
    if not isinstance(n_simulations, (int, np.integer)) or n_simulations < 1:
        raise ValueError(f"n_simulations must be a positive integer, got {n_simulations!r}.")
    if not isinstance(n_repeats, (int, np.integer)) or n_repeats < 2:
        raise ValueError(f"n_repeats must be an integer >= 2, got {n_repeats!r}.")
    q = np.asarray(quantiles, float)
    if q.ndim != 1 or np.any(np.diff(q) < 0) or np.any((q < 0) | (q > 1)):
        raise ValueError(f"quantiles must be increasing values in [0, 1], got {quantiles!r}.")
    rng = np.random.default_rng(random_state)
    credibility = _credibility_grid(alpha_grid)
    f = rng.random((n_repeats, n_simulations))
    coverage = _coverage_curve(f.T, credibility)  # (n_repeats, L)
    rmse = _rmse(credibility, coverage)
    return float(rmse.mean()), np.quantile(rmse, quantiles)
