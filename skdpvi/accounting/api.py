"""The public accounting functions, on the accountant every fit uses (PRV).

They validate their inputs (:mod:`~skdpvi.accounting.budget`), describe the runs as
:class:`~skdpvi.accounting.mechanism.DPSGDMechanism` objects and ask the accountant
(:mod:`~skdpvi.accounting.prv`). :func:`total_privacy_spent` reads the mechanisms off
fitted estimators and model searches by duck typing: it imports no estimator.
"""

from .budget import _check_budget, _check_mechanism
from .mechanism import DPSGDMechanism
from .prv import PRVAccountant

__all__ = [
    "noise_multiplier",
    "epsilon_spent",
    "compose_epsilon",
    "total_privacy_spent",
]

#: The accountant behind the public functions; its searches are cached.
_ACCOUNTANT = PRVAccountant()


def noise_multiplier(epsilon, delta, sampling_rate, steps):
    """Gaussian noise multiplier that makes DP-SGD (epsilon, delta)-DP.

    Inverts the PRV accountant for ``steps`` steps of Poisson-subsampled Gaussian
    DP-SGD with rate ``sampling_rate`` under the add/remove-one neighbouring relation.
    The certified epsilon (accountant upper bound) is ``<= epsilon`` and within 0.5 %
    of it. Results are cached, so repeated calls (cross-validation refits) are free.

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

    Returns
    -------
    sigma : float
        Noise multiplier: the noise standard deviation is ``sigma * clip_norm``.
    epsilon_achieved : float
        The certified epsilon spent with ``sigma``.

    Raises
    ------
    ValueError
        If an argument is out of range (the message names it) or no noise level
        reaches the budget.

    Examples
    --------
    >>> from skdpvi.accounting import noise_multiplier
    >>> sigma, eps = noise_multiplier(1.0, 1e-5, 0.1, 10_000)
    >>> round(sigma, 1), eps <= 1.0
    (37.3, True)
    """
    _check_budget(epsilon, delta, sampling_rate, steps)
    return _ACCOUNTANT.noise_multiplier(epsilon, delta, sampling_rate, steps)


def epsilon_spent(noise_multiplier, delta, sampling_rate, steps):
    """Certified epsilon of DP-SGD run with a given noise multiplier.

    The inverse of :func:`noise_multiplier`: the PRV accountant's upper bound on
    epsilon for ``steps`` steps of Poisson-subsampled Gaussian DP-SGD.

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
    >>> 0.99 < epsilon_spent(37.4, 1e-5, 0.1, 10_000) < 1.0
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
        PRV upper bound for the composition.

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
    return _ACCOUNTANT.epsilon(mechanisms, delta)


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
        mechanism through its ``_dp_mechanism()`` method, which returns a
        ``(DPSGDMechanism, delta)`` pair.
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
    return compose_epsilon([mechanism for mechanism, _ in fits], delta), float(delta)


def _fits_of(obj):
    """Expand a search object or a list of estimators into (DPSGDMechanism, delta) pairs."""
    if hasattr(obj, "cv_results_") and hasattr(obj, "estimator"):
        from sklearn.base import clone

        fits = []
        n_splits = int(getattr(obj, "n_splits_", 1))
        for params in obj.cv_results_["params"]:
            candidate = clone(obj.estimator).set_params(**params)
            fits.extend([candidate._dp_mechanism()] * n_splits)
        if getattr(obj, "refit", False) and hasattr(obj, "best_estimator_"):
            fits.append(_final_step(obj.best_estimator_)._dp_mechanism())
        return fits
    return [_fitted_mechanism(_final_step(est)) for est in obj]


def _fitted_mechanism(est):
    """(DPSGDMechanism, delta) of a fitted estimator, read from its fitted attributes."""
    for name in ("noise_multiplier_", "n_iter_", "delta_"):
        if not hasattr(est, name):
            raise ValueError(f"{type(est).__name__} is not a fitted DP estimator: no {name}.")
    return DPSGDMechanism(est.noise_multiplier_, est.sampling_rate, est.n_iter_), est.delta_


def _final_step(est):
    steps = getattr(est, "steps", None)
    return steps[-1][1] if steps else est
