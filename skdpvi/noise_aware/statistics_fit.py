"""eta's Gaussian posterior from the normal equations of the trace, mixed over the
shrinkage grid of the statistics a trace identifies poorly: step 2 of
:func:`skdpvi.noise_aware.statistics_posterior`, also used for the engine's step
matrix (:mod:`skdpvi.noise_aware.preconditioning`).
"""

import numpy as np
from scipy.special import logsumexp

from .statistics_sampling import _psd_cholesky

__all__ = ["StatisticsFit"]

#: Grid of the shrinkage scale gamma (relative to each statistic's natural scale).
GAMMA_GRID = (0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)


class StatisticsFit:
    """The Gaussian posterior of eta from the trace, mixed over the shrinkage grid.

    Parameters
    ----------
    P, h : ndarray
        Normal equations of the whole recording window.
    shrink_index : ndarray of int
        Statistics under the shrinkage prior.
    shrink_scale : ndarray
        Their natural scales.
    gammas : sequence of float

    Attributes
    ----------
    weights : ndarray
        Posterior probability of each gamma.
    means, covs : list of ndarray
        eta's posterior mean and covariance under each gamma.
    """

    def __init__(self, P, h, shrink_index, shrink_scale, gammas=GAMMA_GRID, known=None):
        k = len(h)
        self.gammas = np.asarray(gammas, float)
        known_index, known_values = known if known is not None else (np.zeros(0, int),
                                                                     np.zeros(0))
        known_index = np.asarray(known_index, int)
        shrink_index = np.asarray(shrink_index, int)
        scale_of = dict(zip(shrink_index.tolist(), np.atleast_1d(shrink_scale)))
        shrink_index = np.setdiff1d(shrink_index, known_index)
        log_ml, self.means, self.covs = [], [], []
        for gamma in self.gammas:
            # gamma = 0: the shrunk statistics are exactly 0, like the known ones
            zero = shrink_index if gamma == 0.0 else np.zeros(0, int)
            fixed = np.concatenate([known_index, zero]).astype(int)
            values = np.concatenate([np.asarray(known_values, float), np.zeros(len(zero))])
            free = np.setdiff1d(np.arange(k), fixed)
            prior = np.zeros(k)
            shrunk = shrink_index if gamma > 0.0 else np.zeros(0, int)
            if len(shrunk):
                prior[shrunk] = 1.0 / (gamma * np.array([scale_of[i] for i in shrunk])) ** 2
            P_free = P[np.ix_(free, free)] + np.diag(prior[free])
            h_free = h[free] - P[np.ix_(free, fixed)] @ values
            mean, cov, lml = _gaussian(P_free, h_free, 0.5 * np.log(prior[shrunk]).sum())
            full_mean, full_cov = np.zeros(k), np.zeros((k, k))
            full_mean[fixed], full_mean[free] = values, mean
            full_cov[np.ix_(free, free)] = cov
            self.means.append(full_mean)
            self.covs.append(full_cov)
            log_ml.append(lml)
            if not len(shrink_index):
                break
        log_ml = np.asarray(log_ml)
        self.gammas = self.gammas[: len(log_ml)]
        self.log_marginal = log_ml
        self.weights = np.exp(log_ml - logsumexp(log_ml))

    @property
    def mean(self):
        return sum(w * m for w, m in zip(self.weights, self.means))

    def sample(self, n, rng, return_labels=False):
        """n draws of eta from the mixture over gamma (and their gamma's index)."""
        which = rng.choice(len(self.weights), size=n, p=self.weights)
        out = np.empty((n, len(self.means[0])))
        for g in np.unique(which):
            rows = np.flatnonzero(which == g)
            chol = _psd_cholesky(self.covs[g])
            out[rows] = self.means[g] + rng.standard_normal((len(rows), chol.shape[0])) @ chol.T
        return (out, which) if return_labels else out


def _gaussian(P, h, log_prior_norm):
    """Posterior mean, covariance and log marginal likelihood (up to a constant)."""
    P = 0.5 * (P + P.T)
    chol = np.linalg.cholesky(P + 1e-12 * np.trace(P) / len(P) * np.eye(len(P)))
    mean = np.linalg.solve(P, h) if np.linalg.cond(P) < 1e14 else np.linalg.lstsq(P, h, rcond=None)[0]
    cov = np.linalg.inv(P)
    log_ml = log_prior_norm - np.log(np.diag(chol)).sum() + 0.5 * h @ mean
    return mean, 0.5 * (cov + cov.T), log_ml


def _shrinkage_fit(data_statistics, P, h):
    """eta's posterior from the normal equations (P, h): the model's Gaussian prior
    (if any), the known statistics and the shrinkage grid.

    Returns (fit, prior, shrunk indices, their scales); ``prior`` is the model's
    ``(P, h)`` term or None.
    """
    index, scale_of = data_statistics.shrinkage_groups()
    known = data_statistics.known_statistics()
    rough = StatisticsFit(P, h, index, np.full(len(index), 1e6), gammas=(1.0,),
                          known=known).means[0]
    prior = data_statistics.gaussian_prior(rough)
    if prior is not None:
        P, h = P + prior[0], h + prior[1]
    first = StatisticsFit(P, h, index, np.ones(len(index)), gammas=(0.0,), known=known)
    scale = scale_of(first.means[0]) if len(index) else np.zeros(0)
    return StatisticsFit(P, h, index, scale, known=known), prior, index, scale
