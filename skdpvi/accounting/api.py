"""The public accounting functions, and the choice of the accountant behind them.

They validate their inputs (:mod:`~skdpvi.accounting.budget`), describe the runs as
:class:`~skdpvi.accounting.mechanism.DPSGDMechanism` objects and ask an accountant:

1. if a row is used at all only with probability ``p = 1 - prod (1 - q)^T <= delta``,
   every run is (0, delta)-DP without any noise: :func:`noise_multiplier` says so
   (there is nothing to calibrate) and :func:`compose_epsilon` reports 0;
2. full-batch runs (every ``sampling_rate == 1``) are Gaussian mechanisms, accounted
   exactly in closed form (:mod:`~skdpvi.accounting.gaussian`);
3. everything else goes to the PRV accountant (:mod:`~skdpvi.accounting.prv`), and
   where it cannot serve the budget, to the PLD accountant
   (:mod:`~skdpvi.accounting.pld`).

:func:`total_privacy_spent` reads the mechanisms off fitted estimators and model
searches by duck typing: it imports no estimator.
"""

import math

from .budget import _check_budget, _check_mechanism
from .calibrate import MAX_SIGMA, MIN_SIGMA, BudgetUnreachable
from .gaussian import GaussianAccountant
from .mechanism import DPSGDMechanism
from .pld import PLDAccountant, _TooFine
from .prv import PRVAccountant, PRVFailed

__all__ = [
    "noise_multiplier",
    "epsilon_spent",
    "compose_epsilon",
    "total_privacy_spent",
]

#: The accountants behind the public functions; their searches are cached.
_ACCOUNTANT = PRVAccountant()
_GAUSSIAN = GaussianAccountant()
_FALLBACK = PLDAccountant()


def _sampled_at_all(mechanisms):
    """Probability that a given row enters at least one step of the mechanisms."""
    log_never = sum(m.steps * math.log1p(-m.sampling_rate) if m.sampling_rate < 1
                    else -math.inf for m in mechanisms)
    return -math.expm1(log_never)


def _accountant_for(mechanisms):
    return _GAUSSIAN if all(m.sampling_rate == 1 for m in mechanisms) else _ACCOUNTANT


def _unreachable(epsilon, delta, sampling_rate, steps, why):
    return ValueError(
        f"The budget epsilon={epsilon!r}, delta={delta!r} cannot be reached with "
        f"sampling_rate={sampling_rate!r} and steps={steps!r}: {why}"
    )


def noise_multiplier(epsilon, delta, sampling_rate, steps, composed_with=()):
    """Gaussian noise multiplier that makes DP-SGD (epsilon, delta)-DP.

    Inverts the accountant for ``steps`` steps of Poisson-subsampled Gaussian DP-SGD
    with rate ``sampling_rate`` under the add/remove-one neighbouring relation: the
    exact Gaussian-mechanism curve when ``sampling_rate == 1``, else the PRV
    accountant, or the PLD accountant where the PRV one cannot serve the budget. The
    certified epsilon (an upper bound) is ``<= epsilon`` and within 0.5 % of it.
    Results are cached, so repeated calls (cross-validation refits) are free.

    Parameters
    ----------
    epsilon : float
        Target privacy loss, > 0.
    delta : float
        Target failure probability, in (0, 1).
    sampling_rate : float
        Poisson sampling rate kappa, in (0, 1].
    steps : int
        Number of DP-SGD steps T, >= 1.
    composed_with : sequence of DPSGDMechanism or of (noise_multiplier, sampling_rate, steps)
        Other mechanisms run on the same data, whose noise is fixed (for example the
        private row-norm bound that chooses an estimator's clipping norm): the budget
        covers the composition, and only the DP-SGD's noise is calibrated.

    Returns
    -------
    sigma : float
        Noise multiplier: the noise standard deviation is ``sigma * clip_norm``.
    epsilon_achieved : float
        The certified epsilon spent with ``sigma`` (by the whole composition).

    Raises
    ------
    ValueError
        If an argument is out of range (the message names it); if ``delta`` is at
        least the probability that a row is sampled at all in ``steps`` steps, so
        that every noise level (even none) meets the budget and there is nothing to
        calibrate; or if the budget needs a noise multiplier outside [0.1, 1e5]. The
        message says what to change.

    Examples
    --------
    >>> from skdpvi.accounting import noise_multiplier
    >>> sigma, eps = noise_multiplier(1.0, 1e-5, 0.1, 10_000)
    >>> round(sigma, 1), 0.995 <= eps <= 1.0
    (37.5, True)
    """
    _check_budget(epsilon, delta, sampling_rate, steps)
    epsilon, delta, sampling_rate, steps = (float(epsilon), float(delta),
                                            float(sampling_rate), int(steps))
    mechanism = DPSGDMechanism(1.0, sampling_rate, steps)
    fixed = tuple(_check_mechanism(m) for m in composed_with)
    p_used = _sampled_at_all([mechanism, *fixed])
    if delta >= p_used:
        raise _unreachable(
            epsilon, delta, sampling_rate, steps,
            f"a row enters any step only with probability {p_used:.4g} <= delta, so "
            "the run is (0, delta)-DP without noise and there is no noise level to "
            "calibrate. Such a delta protects nobody (every row may leak with "
            "probability delta): choose delta well below 1 / n_samples.")
    try:
        try:
            return _accountant_for([mechanism, *fixed]).noise_multiplier(
                epsilon, delta, sampling_rate, steps, fixed)
        except PRVFailed as failed:
            return _FALLBACK.noise_multiplier(epsilon, delta, sampling_rate, steps, fixed,
                                              guess=failed.sigma_hint)
    except BudgetUnreachable as exc:
        if exc.side == "epsilon too small":
            why = (f"it needs a noise multiplier above {MAX_SIGMA:g}. Increase epsilon "
                   "or delta, or reduce sampling_rate or the number of steps.")
        else:
            why = (f"it needs a noise multiplier below {MIN_SIGMA:g}, where the noise "
                   "no longer hides a row and the accounting is not tight. Reduce "
                   f"epsilon, or reduce delta further below {p_used:.4g}, the "
                   "probability that a row is sampled at all.")
        raise _unreachable(epsilon, delta, sampling_rate, steps, why) from None


def epsilon_spent(noise_multiplier, delta, sampling_rate, steps):
    """Certified epsilon of DP-SGD run with a given noise multiplier.

    The inverse of :func:`noise_multiplier`: the certified upper bound on epsilon for
    ``steps`` steps of Poisson-subsampled Gaussian DP-SGD (see :func:`compose_epsilon`).

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the clipping norm, > 0.
    delta : float
        Target failure probability, in (0, 1).
    sampling_rate : float
        Poisson sampling rate, in (0, 1].
    steps : int
        Number of steps, >= 1.

    Returns
    -------
    epsilon : float

    Examples
    --------
    >>> from skdpvi.accounting import epsilon_spent
    >>> 0.99 < epsilon_spent(37.6, 1e-5, 0.1, 10_000) < 1.0
    True
    """
    return compose_epsilon([(noise_multiplier, sampling_rate, steps)], delta)


def compose_epsilon(mechanisms, delta):
    """Certified epsilon of several DP-SGD runs on the same data, composed.

    Parameters
    ----------
    mechanisms : sequence of DPSGDMechanism or of (noise_multiplier, sampling_rate, steps)
        One mechanism (or triple) per run, or per phase of a run.
    delta : float
        Total failure probability, in (0, 1).

    Returns
    -------
    epsilon : float
        Certified upper bound for the composition (exact for full-batch runs, else
        from the PRV accountant or, where it fails, the PLD accountant); 0 if
        ``delta`` is at least the probability that a row is used at all.

    Examples
    --------
    >>> from skdpvi.accounting import compose_epsilon
    >>> one = compose_epsilon([(37.4, 0.1, 10_000)], 1e-5)
    >>> two = compose_epsilon([(37.4, 0.1, 10_000)] * 2, 1e-5)
    >>> one < two < 2 * one
    True
    """
    _check_budget(delta=delta)
    mechanisms = [_check_mechanism(m) for m in mechanisms]
    if not mechanisms:
        raise ValueError("mechanisms must contain at least one (sigma, q, steps) triple.")
    delta = float(delta)
    if delta >= _sampled_at_all(mechanisms):
        return 0.0  # no row is used with probability > delta: (0, delta)-DP
    try:
        try:
            epsilon = _accountant_for(mechanisms).epsilon(mechanisms, delta)
        except PRVFailed:
            epsilon = _FALLBACK.epsilon(mechanisms, delta)
    except _TooFine:  # the PLD's grid cannot hold the privacy loss's range
        raise ValueError(
            "The noise multiplier is too small to account for: the privacy loss spans "
            "more than the PLD accountant's grid can hold (epsilon far above 1,000); "
            f"got noise multipliers {[m.noise_multiplier for m in mechanisms]}.") from None
    if not math.isfinite(epsilon):
        raise ValueError(f"delta={delta!r} is too small to be accounted for in double "
                         "precision; use delta >= 1e-15.")
    return epsilon


def total_privacy_spent(estimators, delta=None):
    """Total (epsilon, delta) of every fit of a model search on the same data.

    Each fit of a DP estimator spends its own budget, and fits on overlapping data
    compose. A ``GridSearchCV`` with 5 folds and 4 candidates runs 20 fits plus a
    refit, and the hyper-parameters it chooses are themselves a function of the
    private data, so the whole search must be accounted, not only the final model.

    Parameters
    ----------
    estimators : iterable of fitted skdpvi estimators, or a fitted search
        Objects with ``noise_multiplier_``, ``sampling_rate``, ``n_iter_`` and
        ``delta_`` (the last step of a ``Pipeline`` is used). For a fitted
        ``GridSearchCV``/``RandomizedSearchCV`` pass the search object: its
        ``cv_results_`` give the candidates and ``n_splits_`` the number of fits
        each; every candidate, an unfitted clone of ``estimator``, describes its
        mechanisms through its ``_dp_mechanism()`` method, which returns a
        ``(DPSGDMechanism, delta)`` pair, or ``(tuple of DPSGDMechanism, delta)`` for
        a fit that runs several (a private clipping norm's histogram beside the
        DP-SGD run).
    delta : float, optional
        Delta at which to report the total. Defaults to the sum of the fits' deltas.

    Returns
    -------
    epsilon : float
        PRV upper bound for the composition of all the fits (conservatively
        assuming every fit saw every row).
    delta : float

    Examples
    --------
    >>> from skdpvi.accounting import total_privacy_spent
    >>> class Fit:  # stands in for a fitted estimator
    ...     noise_multiplier_, sampling_rate, n_iter_, delta_ = 37.4, 0.1, 10_000, 1e-5
    >>> eps, delta = total_privacy_spent([Fit(), Fit()])
    >>> 1.0 < eps < 2.0
    True
    """
    fits = _fits_of(estimators)
    if not fits:
        raise ValueError("estimators must contain at least one fitted estimator.")
    if delta is None:
        delta = min(sum(fit_delta for _, fit_delta in fits), 0.999999)
    return compose_epsilon([m for mechanisms, _ in fits for m in mechanisms], delta), float(delta)


def _fits_of(obj):
    """Expand a search object or a list of estimators into (mechanisms, delta) pairs."""
    return [(_as_tuple(mechanisms), delta) for mechanisms, delta in _raw_fits_of(obj)]


def _as_tuple(mechanisms):
    return (mechanisms,) if isinstance(mechanisms, DPSGDMechanism) else tuple(mechanisms)


def _raw_fits_of(obj):
    if hasattr(obj, "cv_results_") and hasattr(obj, "estimator"):
        from sklearn.base import clone

        fits = []
        n_splits = int(getattr(obj, "n_splits_", 1))
        for params in obj.cv_results_["params"]:
            candidate = _final_step(clone(obj.estimator).set_params(**params))
            fits.extend([candidate._dp_mechanism()] * n_splits)
        if getattr(obj, "refit", False) and hasattr(obj, "best_estimator_"):
            fits.append(_final_step(obj.best_estimator_)._dp_mechanism())
        return fits
    return [_fitted_mechanism(_final_step(est)) for est in obj]


def _fitted_mechanism(est):
    """(mechanisms, delta) of a fitted estimator, read from its fitted attributes."""
    if hasattr(est, "_dp_mechanism") and hasattr(est, "noise_multiplier_"):
        return est._dp_mechanism()
    for name in ("noise_multiplier_", "n_iter_", "delta_"):
        if not hasattr(est, name):
            raise ValueError(f"{type(est).__name__} is not a fitted DP estimator: no {name}.")
    return DPSGDMechanism(est.noise_multiplier_, est.sampling_rate, est.n_iter_), est.delta_


def _final_step(est):
    steps = getattr(est, "steps", None)
    return steps[-1][1] if steps else est
