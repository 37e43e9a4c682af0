"""Plots of coverage, calibration and credible intervals (needs matplotlib: ``pip install skdpvi[plots]``).

matplotlib is imported only when a plotting function is called, so the rest
of the package works without it.
"""

import numpy as np

from .metrics._calibration import calibration_curve_quantile

__all__ = ["plot_coverage", "plot_calibration", "plot_intervals"]


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


def plot_intervals(posterior, *, credibility=0.9, params=None, truth=None, ax=None,
                   label=None, offset=0.0, n_samples=20_000, random_state=0):
    """Forest plot: the posterior mean and central credible interval of each parameter.

    One row per parameter, named after the posterior's ``param_names``
    (``coef[age]`` when the estimator was fitted on a DataFrame), the first at
    the top, with a dot at the mean and a line over the interval, as
    :func:`arviz.plot_forest`. Call it again on the same axes with another
    ``offset`` and ``label`` to compare posteriors (e.g. the noise-aware one and
    the naive last iterate).

    Parameters
    ----------
    posterior : NoiseAwarePosterior or fitted estimator
        Anything with a ``summary(credibility, n_samples=..., random_state=...,
        as_frame=False)`` method and ``param_names``, or an estimator with such a
        ``posterior_``.
    credibility : float, default=0.9
        Mass of the central intervals.
    params : sequence of str or int, default=None
        The parameters to show (names or column indices), in that order;
        default all.
    truth : array-like or dict, default=None
        True values to mark with a cross (simulations): one per shown parameter,
        or a dict from name to value.
    ax : matplotlib Axes, default=None
        Axes to draw on; a new figure is created if None.
    label : str, default=None
        Legend label of these intervals.
    offset : float, default=0.0
        Vertical shift of the rows (in row units), to place several posteriors
        side by side.
    n_samples : int, default=20_000
    random_state : int, numpy Generator or None, default=0
        Monte Carlo draws behind the summary.

    Returns
    -------
    ax : matplotlib Axes

    Examples
    --------
    >>> import numpy as np
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from skdpvi import NoiseAwarePosterior
    >>> from skdpvi.models import LogisticRegressionModel
    >>> from skdpvi.plotting import plot_intervals
    >>> phi = np.array([[0.5, -1.0, -2.0, -2.0]])
    >>> post = NoiseAwarePosterior(phi, LogisticRegressionModel(1), "last_iterate",
    ...                            param_names=["coef[age]", "intercept"])
    >>> ax = plot_intervals(post, truth={"coef[age]": 0.4})
    >>> [t.get_text() for t in ax.get_yticklabels()]
    ['coef[age]', 'intercept']
    """
    post = getattr(posterior, "posterior_", posterior)
    if not (hasattr(post, "summary") and hasattr(post, "param_names")):
        raise ValueError(
            "posterior must be a NoiseAwarePosterior or a fitted estimator with a "
            f"posterior_, got {type(posterior).__name__}."
        )
    table = post.summary(credibility, n_samples=n_samples, random_state=random_state,
                         as_frame=False)
    names = [str(n) for n in table["param"]]
    if params is None:
        index = list(range(len(names)))
    else:
        index = []
        for p in params:
            if isinstance(p, (int, np.integer)) and not isinstance(p, bool):
                if not 0 <= p < len(names):
                    raise ValueError(f"parameter index {p} out of range for {len(names)}.")
                index.append(int(p))
            elif str(p) in names:
                index.append(names.index(str(p)))
            else:
                raise ValueError(f"unknown parameter {p!r}; the names are {names}.")
    lower, upper = table.dtype.names[3], table.dtype.names[4]
    ax = _get_axes(ax)
    rows = -np.arange(len(index), dtype=float)  # first parameter at the top
    y = rows + offset
    (dots,) = ax.plot(table["mean"][index], y, "o", label=label)
    ax.hlines(y, table[lower][index], table[upper][index], color=dots.get_color())
    if truth is not None:
        if isinstance(truth, dict):
            shown = [names[i] for i in index]
            pairs = [(y[k], float(truth[n])) for k, n in enumerate(shown) if n in truth]
            ty, tx = (np.array(v) for v in zip(*pairs)) if pairs else ([], [])
        else:
            tx = np.asarray(truth, dtype=float).ravel()
            if tx.size != len(index):
                raise ValueError(
                    f"truth has {tx.size} values for {len(index)} shown parameters."
                )
            ty = y
        ax.plot(tx, ty, "x", color="k", label="_truth")
    ax.set_yticks(rows)
    ax.set_yticklabels([names[i] for i in index])
    ax.axvline(0.0, color="0.8", linewidth=1, zorder=0)
    ax.set_xlabel(f"posterior mean and {100 * credibility:.10g}% central credible interval")
    if label is not None:
        ax.legend()
    return ax
