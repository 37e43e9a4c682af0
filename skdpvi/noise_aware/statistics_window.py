"""Which part of the recording window the statistics posterior fits (``settle``).

The statistics posterior's split-window check compares eta estimated from the two
halves of the recording window. A transient that outlasts the burn-in shows as
halves that disagree (measured: linear regression with a vague noise prior, whose
draws with large coefficients were still descending at the burn-in step, the noise
variance's intervals 14-32 sds off). Where the check rejects the recorded window,
:func:`settled_window` fits the window's later part instead, from each start of
:data:`WINDOW_OFFSETS` in turn, and keeps the first the check accepts, else the one
it rejects least. The window is chosen from the release alone: post-processing, no
privacy cost. :func:`warn_about_window` says what was found either way.
"""

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .convergence import SPLIT_TEST_LEVEL, _statistics_split_check, _warn_unsettled

__all__ = ["WINDOW_OFFSETS", "settled_window", "split_check", "warn_about_window"]

#: Later starts of the recording window that ``settle`` tries, as fractions of the
#: recorded window, where the split-window check rejects the whole of it.
WINDOW_OFFSETS = (0.25, 0.5, 0.75)


def split_check(window):
    """The split-window check of a window's fit (a dict with its ``regression``,
    ``phi`` and ``precision``), computed once and kept in it as ``"check"``."""
    if window.get("check") is None:
        regression = window["regression"]
        window["check"] = _statistics_split_check(
            regression["parts"], regression["fit"], regression["index"],
            regression["scale"], regression["P"], regression["h"], regression["yy"],
            len(window["phi"]) * int(np.count_nonzero(window["precision"])))
    return window["check"]


def settled_window(fit_window, burn_in, n_steps):
    """The recorded window's fit, or, where the split check rejects it, a later one.

    Parameters
    ----------
    fit_window : callable
        ``start -> window``: the fit on the pairs from step ``start`` on (a dict as
        :func:`split_check` reads); raises ValueError when too few pairs are left.
    burn_in, n_steps : int
        The recorded window's first step and the run's length.

    Returns
    -------
    window : dict
        The fit taken: the recorded window's, or the first later start's that the
        check accepts, else the start's it rejects least.
    p_recorded : float or None
        The check's p-value on the recorded window when another window was taken.
    """
    recorded = fit_window(burn_in)
    p_recorded = split_check(recorded)["split_p_value"]
    if not p_recorded < SPLIT_TEST_LEVEL:
        return recorded, None
    best, best_p = recorded, p_recorded
    for fraction in WINDOW_OFFSETS:
        try:
            window = fit_window(burn_in + int(fraction * (n_steps - burn_in)))
        except ValueError:  # too few pairs left
            break
        p_value = split_check(window)["split_p_value"]
        if p_value > best_p:
            best, best_p = window, p_value
        if p_value >= SPLIT_TEST_LEVEL:
            break
    return best, (p_recorded if best is not recorded else None)


def warn_about_window(p_value, start, p_recorded):
    """Warn (:class:`~sklearn.exceptions.ConvergenceWarning`, at the caller of
    :func:`~skdpvi.noise_aware.statistics_posterior`) where the recorded window was
    rejected, naming the window used (``p_recorded`` given), or where the window used
    is rejected (``p_value`` below ``SPLIT_TEST_LEVEL``, 1e-3)."""
    if p_recorded is None:
        if p_value < SPLIT_TEST_LEVEL:
            _warn_unsettled(p_value, stacklevel=4)
        return
    verdict = ("where they agree" if p_value >= SPLIT_TEST_LEVEL
               else "where they disagree least")
    warnings.warn(
        "The released DP-SGD gradients do not follow the model's expected gradient over "
        f"the recording window (its two halves disagree with p = {p_recorded:.1e}): a "
        "transient or clipping distorts the trace. The posterior is fitted on the "
        f"window from step {start} on, {verdict} (p = {p_value:.2g}; "
        "inference_diagnostics_['window_start']); its credible intervals may still be "
        "miscalibrated: increase max_iter or burn_in, or raise clip_norm.",
        ConvergenceWarning, stacklevel=4)
