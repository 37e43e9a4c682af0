"""Plots of coverage and calibration (needs matplotlib: ``pip install skdpvi[plots]``).

matplotlib is imported only when a plotting function is called, so the rest
of the package works without it.
"""

import numpy as np

from .metrics._calibration import calibration_curve_quantile

__all__ = ["plot_coverage", "plot_calibration"]


def _get_axes(ax):
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "skdpvi.plotting needs matplotlib; install it with "
            "`pip install skdpvi[plots]` (or `pip install matplotlib`)."
        ) from exc
    if ax is None:
        _, ax = plt.subplots()
    return ax


def _diagonal(ax):
    ax.plot([0, 1], [0, 1], linestyle="--", color="0.5", linewidth=1, label="_diagonal")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")


def plot_coverage(result, ax=None, label=None):
    """Plot an expected-coverage curve against the credibility level.

    Draws the coverage curve, its bootstrap 95% band when the result has one,
    and the diagonal of perfect calibration. Curves below the diagonal mean
    over-confident posteriors, above it under-confident ones.

    Parameters
    ----------
    result : TarpResult, MarginalTarpResult, TarpStudyResult or PredictiveCoverageResult
        Anything with ``credibility`` and ``coverage`` (and optionally
        ``coverage_band``). A study result plots its joint TARP curve; a
        marginal result plots one curve per parameter.
    ax : matplotlib Axes, default=None
        Axes to draw on; a new figure is created if None.
    label : str or list of str, default=None
        Legend label(s); for a marginal result, one per parameter (default
        the parameter names).

    Returns
    -------
    ax : matplotlib Axes

    Examples
    --------
    >>> import numpy as np
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from skdpvi.metrics import tarp_coverage
    >>> from skdpvi.plotting import plot_coverage
    >>> rng = np.random.default_rng(0)
    >>> theta = rng.normal(size=(100, 2))
    >>> samples = theta[:, None, :] + rng.normal(size=(100, 200, 2))
    >>> ax = plot_coverage(tarp_coverage(samples, theta, n_bootstrap=50,
    ...                                  random_state=0), label="toy")
    """
    if hasattr(result, "tarp") and not hasattr(result, "coverage"):
        result = result.tarp
    if not (hasattr(result, "credibility") and hasattr(result, "coverage")):
        raise ValueError(
            "result must have credibility and coverage attributes (a TARP or "
            f"predictive coverage result), got {type(result).__name__}."
        )
    ax = _get_axes(ax)
    cred = np.asarray(result.credibility)
    coverage = np.atleast_2d(result.coverage)
    band = getattr(result, "coverage_band", None)
    if band is not None:
        band = np.asarray(band).reshape(2, *coverage.shape)
    if label is None or isinstance(label, str):
        names = getattr(result, "param_names", None)
        if coverage.shape[0] > 1:
            labels = names or [f"parameter {j}" for j in range(coverage.shape[0])]
            if label is not None:
                labels = [f"{label}: {n}" for n in labels]
        else:
            labels = [label]
    else:
        labels = list(label)
        if len(labels) != coverage.shape[0]:
            raise ValueError(
                f"label has {len(labels)} entries for {coverage.shape[0]} curves."
            )
    for j, cov in enumerate(coverage):
        (line,) = ax.plot(cred, cov, marker=".", label=labels[j])
        if band is not None:
            ax.fill_between(cred, band[0, j], band[1, j], color=line.get_color(), alpha=0.25)
    _diagonal(ax)
    ax.set_xlabel("Credibility level")
    ax.set_ylabel("Expected coverage")
    if any(lab is not None for lab in labels):
        ax.legend()
    return ax


def _is_repetitions(y_prob):
    return isinstance(y_prob, (list, tuple)) and len(y_prob) > 0 and np.ndim(y_prob[0]) >= 1


def _mean_curve(y_true, y_probs, n_bins):
    """Mean calibration curve and sd of the fraction of positives over repetitions."""
    if _is_repetitions(y_true):
        y_trues = list(y_true)
        if len(y_trues) != len(y_probs):
            raise ValueError(
                f"y_true holds {len(y_trues)} arrays for {len(y_probs)} "
                "repetitions of y_prob."
            )
    else:
        y_trues = [y_true] * len(y_probs)
    curves = [
        calibration_curve_quantile(yt, yp, n_bins=n_bins)[:2]
        for yt, yp in zip(y_trues, y_probs)
    ]
    if len({c[0].size for c in curves}) == 1:
        # Same number of bins everywhere: average bin by bin.
        x = np.mean([c[1] for c in curves], axis=0)
        ys = np.array([c[0] for c in curves])
    else:
        lo = max(c[1].min() for c in curves)
        hi = min(c[1].max() for c in curves)
        x = np.linspace(lo, hi, n_bins)
        ys = np.array([np.interp(x, c[1], c[0]) for c in curves])
    return x, ys.mean(axis=0), ys.std(axis=0)


def plot_calibration(y_true, y_prob_or_list, ax=None, n_bins=10, labels=None):
    """Plot calibration curve(s) of binary predictions (quantile bins).

    Fraction of positives against mean predicted probability in each bin, as
    in the paper's Fig. 4, with the diagonal of perfect calibration.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or list of such arrays
        Binary labels; a list gives one array per repetition (when the test
        sets differ between repetitions).
    y_prob_or_list : array-like, list of array-like, or dict
        - array of shape (n_samples,) or (n_samples, 2): one curve;
        - list of such arrays (repetitions, e.g. refits with different
          seeds): the mean curve with a band of +- one standard deviation of
          the fraction of positives across repetitions;
        - dict mapping a label to either of the above: one curve per entry.
    ax : matplotlib Axes, default=None
        Axes to draw on; a new figure is created if None.
    n_bins : int, default=10
        Number of quantile bins.
    labels : str or list of str, default=None
        Legend label(s) of the curve(s); for a dict, defaults to its keys.

    Returns
    -------
    ax : matplotlib Axes

    Examples
    --------
    >>> import numpy as np
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from skdpvi.plotting import plot_calibration
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(size=(5, 500))
    >>> y = (rng.uniform(size=(5, 500)) < p).astype(int)
    >>> ax = plot_calibration(list(y), list(p), labels="5 repetitions")
    """
    if isinstance(y_prob_or_list, dict):
        groups = list(y_prob_or_list.items())
    else:
        groups = [(None, y_prob_or_list)]
    if labels is None:
        names = [name for name, _ in groups]
    elif isinstance(labels, str):
        names = [labels]
    else:
        names = list(labels)
    if len(names) != len(groups):
        raise ValueError(f"labels has {len(names)} entries for {len(groups)} curves.")
    ax = _get_axes(ax)
    for name, (_, probs) in zip(names, groups):
        if _is_repetitions(probs):
            x, mean, sd = _mean_curve(y_true, list(probs), n_bins)
            (line,) = ax.plot(x, mean, marker="o", label=name)
            if len(probs) > 1:
                ax.fill_between(x, mean - sd, mean + sd, color=line.get_color(), alpha=0.25)
        else:
            prob_true, prob_pred, _ = calibration_curve_quantile(y_true, probs, n_bins=n_bins)
            ax.plot(prob_pred, prob_true, marker="o", label=name)
    _diagonal(ax)
    ax.set_xlabel("Predicted probability")
    ax.set_ylabel("Fraction of positives")
    if any(n is not None for n in names):
        ax.legend()
    return ax
