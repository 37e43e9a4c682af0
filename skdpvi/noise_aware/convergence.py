"""Has the trace settled? A split-window test on the released pairs.

The gradient model assumes one linear relation ``E[g_i | phi_t] = kappa a_i (phi_t,i -
phi*_i)`` over the whole recording window. A transient that follows that line is
harmless (the model describes it), but where DP-SGD is still travelling through
ground of changing curvature (a run stopped too early, a burn-in too short, a step
too small for the budget of steps), or clipping changes the dynamics part-way, the
relation the first half of the window shows differs from the second's, and the
noise-aware posterior, which averages them, is not to be trusted. Per
coordinate, a Chow test compares one least-squares line through both halves with a
line per half (an F statistic with 2 and n - 4 degrees of freedom); the smallest
p-value times the number of coordinates (Bonferroni) is the run's p-value. It reads
only the released statistics (:attr:`TraceStatistics.halves`), so it costs no privacy
and does not grow with the number of steps.

The ``statistics`` backend runs the same check on its own regression (the two halves'
estimates of the data statistics eta against the pooled one, a chi-squared test with
the noise known): :func:`_statistics_split_check`.
"""

import warnings

import numpy as np
from scipy.stats import chi2
from scipy.stats import f as f_dist
from sklearn.exceptions import ConvergenceWarning

__all__ = ["split_window_test", "SPLIT_TEST_LEVEL"]

#: The p-value below which the split-window checks warn (ConvergenceWarning).
SPLIT_TEST_LEVEL = 1e-3


def _residual_sum_of_squares(stats):
    n = stats.count
    sxx = stats.sum_xx - stats.sum_x**2 / n
    sgx = stats.sum_gx - stats.sum_x * stats.sum_g / n
    sgg = stats.sum_gg - stats.sum_g**2 / n
    fit = np.divide(sgx**2, sxx, out=np.zeros_like(sgg), where=sxx > 0)
    return np.maximum(sgg - fit, 0.0)


def split_window_test(stats):
    """Chow test of one linear gradient relation across the two halves of the window.

    Parameters
    ----------
    stats : skdpvi.dpvi.TraceStatistics
        Statistics with their ``halves`` (every run of the engine records them).

    Returns
    -------
    p_value : float
        Bonferroni-corrected smallest per-coordinate p-value (at most 1); small when
        some coordinate's relation changed between the halves. NaN when the
        statistics carry no halves or a half has fewer than 3 pairs.
    p_values : ndarray of shape (d,)
        The per-coordinate p-values.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpvi.dpvi import TraceStatistics
    >>> rng = np.random.default_rng(0)
    >>> phi = np.zeros((2001, 1)); g = np.zeros((2000, 1))
    >>> for t in range(2000):  # settled: one relation with phi* = 0
    ...     g[t] = 0.1 * phi[t] + rng.normal(0, 1.0)
    ...     phi[t + 1] = phi[t] - 0.05 * g[t]
    >>> split_window_test(TraceStatistics.from_trace(phi, g, 0))[0] > 0.01
    True
    >>> g[1000:] += 0.2  # the optimum moved half-way: the halves disagree
    >>> split_window_test(TraceStatistics.from_trace(phi, g, 0))[0] < 1e-3
    True
    """
    halves = getattr(stats, "halves", None)
    if halves is None or min(h.count for h in halves) < 3:
        return float("nan"), np.full(stats.dim, np.nan)
    n = stats.count
    rss_split = sum(_residual_sum_of_squares(h) for h in halves)
    rss_pooled = _residual_sum_of_squares(stats)
    dof = n - 4
    scale = np.maximum(rss_split, np.finfo(float).tiny) / dof
    statistic = np.maximum(rss_pooled - rss_split, 0.0) / 2 / scale
    p_values = f_dist.sf(statistic, 2, dof)
    return float(min(1.0, p_values.min() * len(p_values))), p_values


def _statistics_split_check(parts, fit, index, scale, P, h, yy, n_values):
    """The statistics backend's split-window test and residual scatter (the caller
    warns: :func:`_warn_unsettled`).

    With the noise known, ``sum_k h_k^T P_k^-1 h_k - h^T P^-1 h`` is chi-squared with
    as many degrees of freedom as statistics if both halves of the recording window
    follow the same eta; a ridge at the most probable shrinkage keeps it defined for
    poorly identified statistics (degrees of freedom adjusted to match).
    """
    best = fit.index_gammas[np.argmax(fit.weights)]
    gamma_of = dict(zip(fit.shrunk_index.tolist(), best.tolist()))
    ridge = np.full(len(h), 1e-9 * np.trace(P) / len(h))
    if len(index):
        gamma = np.array([gamma_of.get(i, best.max(initial=1.0)) for i in np.asarray(index)])
        ridge[index] += 1.0 / (np.maximum(gamma, 1e-3) * scale) ** 2
    stat, dof = 0.0, 0.0
    for sign, (P_k, h_k) in ((1, parts[0][:2]), (1, parts[1][:2]), (-1, (P, h))):
        inv = np.linalg.inv(P_k + np.diag(ridge))
        stat += sign * float(h_k @ inv @ h_k)
        dof += sign * float(np.trace(P_k @ inv))
    p_value = float(chi2.sf(stat, max(dof, 1.0)))
    mean = fit.mean
    residual = yy - 2 * h @ mean + mean @ P @ mean
    ratio = float(residual / max(n_values - len(h), 1))
    return {"split_p_value": p_value, "split_dof": dof, "variance_ratio": ratio}


def _warn_unsettled(p_value, stacklevel):
    """The statistics backend's warning that the window's halves disagree."""
    warnings.warn(
        "The released DP-SGD gradients do not follow the model's expected gradient "
        f"(the two halves of the recording window disagree with p = {p_value:.1e}). "
        "Clipping or a transient distorts the trace, so the credible intervals may "
        "be miscalibrated: increase max_iter or burn_in, or raise clip_norm.",
        ConvergenceWarning, stacklevel=stacklevel + 1,
    )
