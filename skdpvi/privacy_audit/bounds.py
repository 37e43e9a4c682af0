"""From true and false positive counts to a lower bound on epsilon.

An (epsilon, delta)-DP mechanism M and neighbouring data sets D, D' satisfy, for every
set S of outputs, ``P(M(D) in S) <= e^epsilon P(M(D') in S) + delta`` (and the same with
D and D' swapped). A test that says "the canary is in" on S has true positive rate
``TPR = P(M(D') in S)`` and false positive rate ``FPR = P(M(D) in S)``, so
``epsilon >= log((TPR - delta) / FPR)``; the same holds for the complement of S and
for the roles of D and D' swapped. With Clopper-Pearson intervals for the two rates
(each one-sided at level ``(1 - confidence) / 2``), the bound holds with probability
at least ``confidence`` over the trials.

The test (a statistic and a threshold) must not be chosen on the trials that measure
it: :func:`select_test` picks it on held-out trials, :func:`evaluate_test` applies it.
"""

import numpy as np
from scipy.stats import beta

__all__ = ["clopper_pearson", "epsilon_lower_bound", "select_test", "evaluate_test"]


def clopper_pearson(successes, trials, confidence=0.95):
    """Two-sided Clopper-Pearson interval of a binomial proportion.

    Each side holds at level ``(1 - confidence) / 2``. Vectorised over arrays.

    Parameters
    ----------
    successes, trials : int or array-like of int
    confidence : float, default=0.95

    Returns
    -------
    low, high : float or ndarray

    Examples
    --------
    >>> low, high = clopper_pearson(0, 1000)
    >>> low, round(float(high), 5)
    (0.0, 0.00368)
    """
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got confidence={confidence!r}.")
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n) or np.any(k % 1) or np.any(n % 1):
        raise ValueError("successes and trials must be integers with 0 <= successes <= "
                         f"trials and trials >= 1, got {successes!r} of {trials!r}.")
    alpha = (1 - confidence) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(k > 0, beta.ppf(alpha, k, n - k + 1), 0.0)
        high = np.where(k < n, beta.ppf(1 - alpha, k + 1, n - k), 1.0)
    if low.ndim == 0:
        return float(low), float(high)
    return low, high


def epsilon_lower_bound(true_positives, n_positive, false_positives, n_negative, delta,
                        confidence=0.95):
    """Lower confidence bound on epsilon from a distinguishing test.

    ``log((TPR_low - delta) / FPR_high)`` with Clopper-Pearson bounds, each one-sided
    at level ``(1 - confidence) / 2``, so the bound holds with probability at least
    ``confidence``; 0 when the test shows nothing (it never returns a negative value).

    Parameters
    ----------
    true_positives, n_positive : int
        How often the test said "in" when the canary was in, out of how many trials.
    false_positives, n_negative : int
        How often it said "in" when the canary was out, out of how many trials.
    delta : float
    confidence : float, default=0.95

    Returns
    -------
    epsilon_lower : float

    Examples
    --------
    >>> round(epsilon_lower_bound(500, 1000, 10, 1000, 1e-5), 2)
    3.24
    """
    if not 0 <= delta < 1:
        raise ValueError(f"delta must lie in [0, 1), got delta={delta!r}.")
    tpr_low, _ = clopper_pearson(true_positives, n_positive, confidence)
    _, fpr_high = clopper_pearson(false_positives, n_negative, confidence)
    return float(_bound(tpr_low, fpr_high, delta))


def _bound(tpr_low, fpr_high, delta):
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.log(np.maximum(tpr_low - delta, 0.0) / fpr_high)
    return np.maximum(np.nan_to_num(value, nan=0.0, neginf=0.0), 0.0)


#: The four ways a threshold t on a score turns into a test, as
#: (which class counts as "positive", whether the test region is score >= t).
_ORIENTATIONS = (("in", "above"), ("in", "below"), ("out", "above"), ("out", "below"))


def _counts(scores_in, scores_out, thresholds):
    """#{score >= t} for each threshold, for both classes (scores sorted inside)."""
    above_in = len(scores_in) - np.searchsorted(np.sort(scores_in), thresholds, side="left")
    above_out = len(scores_out) - np.searchsorted(np.sort(scores_out), thresholds, side="left")
    return above_in, above_out


def _bounds_all(scores_in, scores_out, thresholds, delta, confidence):
    """Lower bounds of every (threshold, orientation): array (n_thresholds, 4)."""
    n_in, n_out = len(scores_in), len(scores_out)
    above_in, above_out = _counts(scores_in, scores_out, thresholds)
    out = np.empty((len(thresholds), 4))
    for j, (positive, side) in enumerate(_ORIENTATIONS):
        hit_in = above_in if side == "above" else n_in - above_in
        hit_out = above_out if side == "above" else n_out - above_out
        if positive == "in":  # TPR from the canary runs, FPR from the others
            tp, n_tp, fp, n_fp = hit_in, n_in, hit_out, n_out
        else:
            tp, n_tp, fp, n_fp = hit_out, n_out, hit_in, n_in
        tpr_low, _ = clopper_pearson(tp, n_tp, confidence)
        _, fpr_high = clopper_pearson(fp, n_fp, confidence)
        out[:, j] = _bound(tpr_low, fpr_high, delta)
    return out


def select_test(scores_in, scores_out, delta, confidence=0.95, n_thresholds=400):
    """The statistic, threshold and orientation with the best bound on held-out trials.

    Parameters
    ----------
    scores_in, scores_out : dict of {name: ndarray}
        The held-out trials' scores under each candidate statistic, with the canary
        and without it.
    delta, confidence : float
    n_thresholds : int, default=400
        Candidate thresholds per statistic: quantiles of the pooled scores.

    Returns
    -------
    test : dict
        ``statistic``, ``threshold``, ``orientation`` (see ``_ORIENTATIONS``) and the
        held-out ``bound``.
    """
    best = dict(bound=-1.0)
    for name in scores_in:
        pooled = np.concatenate([scores_in[name], scores_out[name]])
        thresholds = np.unique(np.quantile(pooled, np.linspace(0, 1, n_thresholds)))
        bounds = _bounds_all(scores_in[name], scores_out[name], thresholds, delta, confidence)
        i, j = np.unravel_index(np.argmax(bounds), bounds.shape)
        if bounds[i, j] > best["bound"]:
            best = dict(statistic=name, threshold=float(thresholds[i]),
                        orientation=_ORIENTATIONS[j], bound=float(bounds[i, j]))
    return best


def evaluate_test(test, scores_in, scores_out, delta, confidence=0.95):
    """Apply a selected test to fresh trials; return the bound and the counts.

    Returns
    -------
    result : dict
        ``epsilon_lower``, ``true_positives``, ``n_positive``, ``false_positives``,
        ``n_negative`` (in the orientation of the test).
    """
    positive, side = test["orientation"]
    s_in, s_out = scores_in[test["statistic"]], scores_out[test["statistic"]]
    hit_in = int(np.sum(s_in >= test["threshold"]))
    hit_out = int(np.sum(s_out >= test["threshold"]))
    if side == "below":
        hit_in, hit_out = len(s_in) - hit_in, len(s_out) - hit_out
    if positive == "in":
        tp, n_tp, fp, n_fp = hit_in, len(s_in), hit_out, len(s_out)
    else:
        tp, n_tp, fp, n_fp = hit_out, len(s_out), hit_in, len(s_in)
    return dict(epsilon_lower=epsilon_lower_bound(tp, n_tp, fp, n_fp, delta, confidence),
                true_positives=tp, n_positive=n_tp, false_positives=fp, n_negative=n_fp)
