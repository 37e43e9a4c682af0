"""Scorers for model selection with scikit-learn (``GridSearchCV`` and friends).

Each scorer is a plain callable ``scorer(estimator, X, y) -> float``. Pass it
as ``scoring=`` alone, or as a value of a multi-metric ``scoring`` dict (then
``refit="<key>"`` selects by it). Errors are negated (``neg_...``) because
scikit-learn maximises scores. scikit-learn does not know the string names
below: pass the scorer object, or look it up with :func:`get_scorer`.

Classifier scorers use ``estimator.predict_proba(X)[:, 1]`` as the probability
of ``estimator.classes_[1]``, so string or other non-0/1 labels work.
The regression scorer uses posterior-predictive draws from
``estimator.sample_y(X, n_samples=200, random_state=0)`` (shape (n, 200), the
layout of ``GaussianProcessRegressor.sample_y``) and needs no true parameters,
so it works on real data inside cross-validation.

Privacy warning
---------------
A hyper-parameter search on private data is not free. Every fit inside the
search (one per candidate and fold, plus the refit) runs DP-SGD on the
private rows and spends its own (epsilon, delta); the total follows from the
composition of all those runs, not from the ``epsilon`` of one estimator.
The choice of hyper-parameters is itself a function of the private data and
leaks through the selected model, and the validation scores computed here are
not noised. Budget for the whole search, e.g. with
``skdpvi.accounting.total_privacy_spent``, or tune on public or simulated
data and fit once on the private data.
"""

import numpy as np
from sklearn.metrics import get_scorer as _sklearn_get_scorer

from ._calibration import brier_score_loss, calibration_rmse, expected_calibration_error
from ._predictive import predictive_coverage_rmse
from ._validation import _check_int

__all__ = [
    "neg_calibration_rmse_scorer",
    "neg_expected_calibration_error_scorer",
    "neg_brier_score_scorer",
    "neg_predictive_coverage_rmse_scorer",
    "make_predictive_coverage_scorer",
    "get_scorer",
]


def _positive_class_proba(estimator, X, y):
    """``(y == classes_[1], P(classes_[1]))`` for a fitted binary classifier."""
    if not hasattr(estimator, "predict_proba"):
        raise ValueError(
            f"estimator {type(estimator).__name__} has no predict_proba method; "
            "calibration scorers need a probabilistic binary classifier."
        )
    proba = np.asarray(estimator.predict_proba(X))
    classes = getattr(estimator, "classes_", None)
    if classes is None or len(classes) != 2 or proba.ndim != 2 or proba.shape[1] != 2:
        raise ValueError(
            "estimator must be a fitted binary classifier with two classes_ and "
            f"predict_proba of shape (n_samples, 2), got shape {proba.shape}."
        )
    y_pos = (np.asarray(y) == classes[1]).astype(int)
    return y_pos, proba[:, 1]


def neg_calibration_rmse_scorer(estimator, X, y):
    """Negated calibration RMSE (paper Table 3) of a binary classifier.

    ``-calibration_rmse(y, estimator.predict_proba(X)[:, 1], n_bins=10)``
    with quantile bins and ``estimator.classes_[1]`` as the positive class.

    Parameters
    ----------
    estimator : fitted binary classifier
        Must have ``predict_proba`` and ``classes_``.
    X : array-like of shape (n_samples, n_features)
        Validation inputs.
    y : array-like of shape (n_samples,)
        Validation labels; at least 10 (one per bin).

    Returns
    -------
    score : float
        At most 0; larger (closer to 0) is better calibrated.

    Notes
    -----
    Privacy: every fit in a search spends privacy budget, and the choice of
    hyper-parameters leaks information about the private data; see the
    module docstring and ``skdpvi.accounting.total_privacy_spent``.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import GridSearchCV
    >>> from skdpvi.metrics import neg_calibration_rmse_scorer
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> search = GridSearchCV(LogisticRegression(), {"C": [0.01, 1.0]},
    ...                       scoring=neg_calibration_rmse_scorer, cv=3).fit(X, y)
    >>> bool(search.best_score_ <= 0)
    True
    """
    y_pos, p = _positive_class_proba(estimator, X, y)
    return -calibration_rmse(y_pos, p, n_bins=10)


def neg_expected_calibration_error_scorer(estimator, X, y):
    """Negated expected calibration error (10 quantile bins) of a binary classifier.

    ``-expected_calibration_error(y, estimator.predict_proba(X)[:, 1])`` with
    ``estimator.classes_[1]`` as the positive class.

    Parameters
    ----------
    estimator : fitted binary classifier
        Must have ``predict_proba`` and ``classes_``.
    X : array-like of shape (n_samples, n_features)
        Validation inputs.
    y : array-like of shape (n_samples,)
        Validation labels; at least 10 (one per bin).

    Returns
    -------
    score : float
        At most 0; larger is better calibrated.

    Notes
    -----
    Privacy: every fit in a search spends privacy budget, and the choice of
    hyper-parameters leaks information about the private data; see the
    module docstring and ``skdpvi.accounting.total_privacy_spent``.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import cross_val_score
    >>> from skdpvi.metrics import neg_expected_calibration_error_scorer
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> scores = cross_val_score(LogisticRegression(), X, y, cv=3,
    ...                          scoring=neg_expected_calibration_error_scorer)
    >>> bool((scores <= 0).all())
    True
    """
    y_pos, p = _positive_class_proba(estimator, X, y)
    return -expected_calibration_error(y_pos, p, n_bins=10)


def neg_brier_score_scorer(estimator, X, y):
    """Negated Brier score of a binary classifier.

    ``-brier_score_loss(y, estimator.predict_proba(X)[:, 1])`` with
    ``estimator.classes_[1]`` as the positive class; the same value as
    scikit-learn's ``"neg_brier_score"`` but it also accepts labels outside
    ``{0, 1}`` / ``{-1, 1}``.

    Parameters
    ----------
    estimator : fitted binary classifier
        Must have ``predict_proba`` and ``classes_``.
    X : array-like of shape (n_samples, n_features)
        Validation inputs.
    y : array-like of shape (n_samples,)
        Validation labels.

    Returns
    -------
    score : float
        In [-1, 0]; larger is better.

    Notes
    -----
    Privacy: every fit in a search spends privacy budget, and the choice of
    hyper-parameters leaks information about the private data; see the
    module docstring and ``skdpvi.accounting.total_privacy_spent``.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdpvi.metrics import neg_brier_score_scorer
    >>> X, y = make_classification(n_samples=200, random_state=0)
    >>> clf = LogisticRegression().fit(X, y)
    >>> bool(-1 <= neg_brier_score_scorer(clf, X, y) <= 0)
    True
    """
    y_pos, p = _positive_class_proba(estimator, X, y)
    return -brier_score_loss(y_pos, p)


class _PredictiveCoverageScorer:
    """Callable behind :func:`make_predictive_coverage_scorer`."""

    def __init__(self, n_samples, random_state, credibility):
        self.n_samples = n_samples
        self.random_state = random_state
        self.credibility = credibility

    def __call__(self, estimator, X, y):
        if not hasattr(estimator, "sample_y") and hasattr(estimator, "steps"):
            # a Pipeline: its last step draws, on the data its other steps transform
            X, estimator = estimator[:-1].transform(X), estimator[-1]
        if not hasattr(estimator, "sample_y"):
            raise ValueError(
                f"estimator {type(estimator).__name__} has no sample_y method; "
                "the predictive-coverage scorer needs posterior-predictive draws."
            )
        draws = np.asarray(
            estimator.sample_y(X, n_samples=self.n_samples, random_state=self.random_state)
        )
        if draws.ndim == 3 and draws.shape[1] == 1:
            draws = draws[:, 0, :]
        if draws.ndim != 2:
            raise ValueError(
                "estimator.sample_y must return shape (n_samples, n_draws) for a "
                f"single target, got {draws.shape}."
            )
        return -predictive_coverage_rmse(y, draws, credibility=self.credibility)

    def __repr__(self):
        return (
            f"make_predictive_coverage_scorer(n_samples={self.n_samples}, "
            f"random_state={self.random_state!r})"
        )


def make_predictive_coverage_scorer(*, n_samples=200, random_state=0, credibility=None):
    """Build a negated predictive-coverage-RMSE scorer for regressors.

    The scorer calls ``estimator.sample_y(X, n_samples=n_samples,
    random_state=random_state)`` (shape (n, n_samples); for a ``Pipeline``, its last
    step's on ``X`` transformed by the other steps) and returns
    ``-predictive_coverage_rmse(y, draws, credibility=credibility)``.

    Parameters
    ----------
    n_samples : int, default=200
        Posterior-predictive draws per validation point.
    random_state : int or None, default=0
        Passed to ``sample_y``; a fixed value makes scores comparable across
        candidates.
    credibility : array-like, default=None
        Credibility levels; default those of :func:`predictive_coverage`.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``, at most 0.

    Notes
    -----
    Privacy: every fit in a search spends privacy budget, and the choice of
    hyper-parameters leaks information about the private data; see the
    module docstring and ``skdpvi.accounting.total_privacy_spent``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process import GaussianProcessRegressor
    >>> from skdpvi.metrics import make_predictive_coverage_scorer
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(size=(40, 1)); y = np.sin(6 * X[:, 0])
    >>> gp = GaussianProcessRegressor(alpha=0.01, optimizer=None).fit(X, y)
    >>> scorer = make_predictive_coverage_scorer(n_samples=50)
    >>> bool(scorer(gp, X, y) <= 0)
    True
    """
    n_samples = _check_int(n_samples, "n_samples", 2)
    return _PredictiveCoverageScorer(n_samples, random_state, credibility)


_default_predictive_scorer = make_predictive_coverage_scorer()


def neg_predictive_coverage_rmse_scorer(estimator, X, y):
    """Negated RMSE of posterior-predictive interval coverage for regressors.

    Draws ``estimator.sample_y(X, n_samples=200, random_state=0)`` and
    returns ``-predictive_coverage_rmse(y, draws)``: how far the coverage of
    the central predictive intervals of held-out ``y`` is from nominal. Use
    :func:`make_predictive_coverage_scorer` for other settings.

    Parameters
    ----------
    estimator : fitted regressor
        Must have ``sample_y(X, n_samples, random_state)`` returning shape
        (n_samples_X, n_samples).
    X : array-like of shape (n_samples, n_features)
        Validation inputs.
    y : array-like of shape (n_samples,)
        Validation targets.

    Returns
    -------
    score : float
        At most 0; larger is better calibrated.

    Notes
    -----
    Privacy: every fit in a search spends privacy budget, and the choice of
    hyper-parameters leaks information about the private data; see the
    module docstring and ``skdpvi.accounting.total_privacy_spent``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process import GaussianProcessRegressor
    >>> from sklearn.model_selection import cross_val_score
    >>> from skdpvi.metrics import neg_predictive_coverage_rmse_scorer
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(size=(60, 1)); y = np.sin(6 * X[:, 0])
    >>> scores = cross_val_score(GaussianProcessRegressor(optimizer=None), X, y, cv=3,
    ...                          scoring=neg_predictive_coverage_rmse_scorer)
    >>> bool((scores <= 0).all())
    True
    """
    return _default_predictive_scorer(estimator, X, y)


_SCORERS = {
    "neg_calibration_rmse": neg_calibration_rmse_scorer,
    "neg_expected_calibration_error": neg_expected_calibration_error_scorer,
    "neg_brier_score": neg_brier_score_scorer,
    "neg_predictive_coverage_rmse": neg_predictive_coverage_rmse_scorer,
}


def get_scorer(name):
    """Look up a scorer by name: skdpvi's own names, then scikit-learn's.

    Parameters
    ----------
    name : str or callable
        One of ``"neg_calibration_rmse"``, ``"neg_expected_calibration_error"``,
        ``"neg_brier_score"``, ``"neg_predictive_coverage_rmse"``, or any name
        :func:`sklearn.metrics.get_scorer` knows. A callable is returned
        unchanged.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``.

    Notes
    -----
    Privacy: every fit in a search spends privacy budget, and the choice of
    hyper-parameters leaks information about the private data; see the
    module docstring and ``skdpvi.accounting.total_privacy_spent``.

    Examples
    --------
    >>> from skdpvi.metrics import get_scorer
    >>> scoring = {"cal": get_scorer("neg_calibration_rmse"),
    ...            "acc": get_scorer("accuracy")}
    >>> get_scorer("neg_calibration_rmse").__name__
    'neg_calibration_rmse_scorer'
    """
    if callable(name):
        return name
    if isinstance(name, str):
        if name in _SCORERS:
            return _SCORERS[name]
        try:
            return _sklearn_get_scorer(name)
        except ValueError:
            pass
    raise ValueError(
        f"Unknown scorer name {name!r}: use one of {sorted(_SCORERS)} or a "
        "scikit-learn scorer name (sklearn.metrics.get_scorer_names())."
    )
