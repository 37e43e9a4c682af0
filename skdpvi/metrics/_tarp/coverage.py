"""Coverage curves: from the TARP frequencies f_i to C(alpha) (eq. A62) and its RMSE (eq. 27)."""

import numpy as np

from .._validation import _as_float_array, _check_in_unit_interval, _check_levels

__all__ = ["DEFAULT_ALPHA_GRID", "coverage_rmse", "coverage_from_frequencies"]

#: The paper authors' grid of alpha values: 0.001, 0.05, 0.10, ..., 0.95, 0.999.
DEFAULT_ALPHA_GRID = np.concatenate(
    [[0.001], np.round(np.arange(1, 20) * 0.05, 10), [0.999]]
)


def _credibility_grid(alpha_grid):
    """Credibility levels ``1 - alpha`` in increasing order."""
    alpha = DEFAULT_ALPHA_GRID if alpha_grid is None else alpha_grid
    alpha = _check_levels(alpha, "alpha_grid")
    return np.sort(1.0 - alpha)


def _coverage_curve(frequencies, credibility):
    """C at each level: mean over simulations of ``1[f_i < level]`` (A62).

    ``frequencies`` has shape (K,) or (K, P); the result (L,) or (P, L).
    """
    return (frequencies[..., None] < credibility).mean(axis=0)


def _rmse(credibility, coverage):
    """Root mean squared difference over the last axis (eq. 27), unchecked."""
    return np.sqrt(np.mean((coverage - credibility) ** 2, axis=-1))


def coverage_rmse(credibility, coverage):
    """Root mean squared coverage error over credibility levels (paper eq. 27).

    ``sqrt(mean_l (coverage_l - credibility_l) ** 2)``.

    Parameters
    ----------
    credibility : array-like of shape (n_levels,)
        Credibility levels ``1 - alpha`` in [0, 1].
    coverage : array-like of shape (..., n_levels)
        Expected coverage at each level; leading axes (bootstrap replicates,
        parameters) are kept.

    Returns
    -------
    rmse : float or ndarray of shape coverage.shape[:-1]

    Examples
    --------
    >>> from skdpvi.metrics import coverage_rmse
    >>> coverage_rmse([0.5, 0.9], [0.5, 0.9])
    0.0
    >>> round(coverage_rmse([0.5, 0.9], [0.4, 0.8]), 3)
    0.1
    """
    credibility = _as_float_array(credibility, "credibility", ndim=1)
    coverage = _as_float_array(coverage, "coverage")
    if credibility.size == 0:
        raise ValueError("credibility must hold at least one level, got none.")
    if coverage.ndim == 0 or coverage.shape[-1] != credibility.shape[0]:
        raise ValueError(
            f"coverage must have shape (..., {credibility.shape[0]}) to match "
            f"credibility, got {coverage.shape}."
        )
    for name, arr in (("credibility", credibility), ("coverage", coverage)):
        _check_in_unit_interval(arr, f"{name} must lie in [0, 1].")
    rmse = _rmse(credibility, coverage)
    return float(rmse) if rmse.ndim == 0 else rmse


def coverage_from_frequencies(frequencies, *, alpha_grid=None):
    """Coverage curve from TARP frequencies ``f_i`` (paper eq. A62).

    Use it to re-summarise stored :attr:`TarpResult.frequencies` on another
    grid of levels, or after pooling the frequencies of several runs.

    Parameters
    ----------
    frequencies : array-like of shape (n_simulations,) or (n_simulations, n_params)
        Values of ``f_i`` in [0, 1].
    alpha_grid : array-like of shape (n_levels,), default=None
        The alpha values; default :data:`DEFAULT_ALPHA_GRID`.

    Returns
    -------
    credibility : ndarray of shape (n_levels,)
        ``1 - alpha`` in increasing order.
    coverage : ndarray of shape (n_levels,) or (n_params, n_levels)
        ``mean_i 1[f_i < credibility]``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpvi.metrics import coverage_from_frequencies, coverage_rmse
    >>> f = np.array([0.1, 0.2, 0.8, 0.9])
    >>> cred, cov = coverage_from_frequencies(f, alpha_grid=[0.5, 0.25])
    >>> cred, cov
    (array([0.5 , 0.75]), array([0.5, 0.5]))
    >>> float(round(coverage_rmse(cred, cov), 4))
    0.1768
    """
    frequencies = _as_float_array(frequencies, "frequencies")
    if frequencies.ndim not in (1, 2) or frequencies.shape[0] == 0:
        raise ValueError(
            "frequencies must have shape (n_simulations,) or "
            f"(n_simulations, n_params), got {frequencies.shape}."
        )
    _check_in_unit_interval(frequencies, "frequencies must lie in [0, 1].")
    credibility = _credibility_grid(alpha_grid)
    coverage = _coverage_curve(frequencies, credibility)
    return credibility, coverage
