"""eta's Gaussian posterior from the normal equations of the trace, mixed over the
shrinkage grid of the statistics a trace identifies poorly (groups of them nested) and
with the pooling priors of statistics of one common level
(:mod:`~skdpvi.noise_aware.statistics_pooling`): step 2 of
:func:`skdpvi.noise_aware.statistics_posterior`, also used for the engine's step
matrix (:mod:`skdpvi.noise_aware.preconditioning`).
"""

import itertools

import numpy as np
from scipy.linalg import lapack

from .statistics_pooling import log_normaliser, pooling_prior
from .statistics_sampling import _psd_cholesky

__all__ = ["StatisticsFit"]

#: Grid of the shrinkage scale gamma (relative to each statistic's natural scale).
GAMMA_GRID = (0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)

#: Grid points whose log marginal likelihood falls this far below the best one's
#: (a weight below 1e-15 of it) keep no covariance and get weight 0: at 40 features
#: the 36 points of the nested grid would hold 36 covariances of 900 x 900.
_NEGLIGIBLE_LOG_WEIGHT = 35.0


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
    known : (ndarray of int, ndarray) or None
        Statistics fixed at public values.
    labels : ndarray of int or None
        A shrinkage group for each of ``shrink_index`` (0, 1, ...); each group has its
        own gamma, and the last group's gamma is at most the smallest of the others'
        (nested: the grid is the product of ``gammas`` over the groups with that
        constraint, and the prior is uniform over the other groups' points and, given
        them, over the last group's allowed gammas). None: one group.
    pooled_groups : list of (ndarray of int, ndarray, float)
        The pooling priors already in P, as ``(index, unit, c)``: the marginal
        likelihood takes their normaliser together with the shrinkage prior's
        (:func:`~skdpvi.noise_aware.statistics_pooling.log_normaliser`).

    Attributes
    ----------
    gammas : ndarray of shape (n_grid,) or (n_grid, n_groups)
        The grid (one column per group when there are several).
    index_gammas : ndarray of shape (n_grid, n_shrunk)
        Each grid point's gamma for every shrunk statistic (``shrunk_index`` order).
    log_marginal : ndarray
        Log marginal likelihood of each grid point plus its log prior (up to a
        constant).
    weights : ndarray
        Posterior probability of each grid point.
    means, covs : list of ndarray
        eta's posterior mean and covariance at each grid point (the covariance None
        at points of weight 0: those more than ``_NEGLIGIBLE_LOG_WEIGHT`` below the
        best log marginal likelihood).
    pooling : ndarray or None
        The pooling prior's precision included in P (set by the shrinkage fit), or
        None.
    """

    pooling = None

    def __init__(self, P, h, shrink_index, shrink_scale, gammas=GAMMA_GRID, known=None,
                 labels=None, pooled_groups=()):
        gammas = np.asarray(gammas, float)
        known_index, known_values = known if known is not None else (np.zeros(0, int),
                                                                     np.zeros(0))
        known_index = np.asarray(known_index, int)
        shrink_index = np.asarray(shrink_index, int)
        labels = (np.zeros(len(shrink_index), int) if labels is None
                  else np.asarray(labels, int))
        scale_of = dict(zip(shrink_index.tolist(), np.atleast_1d(shrink_scale)))
        label_of = dict(zip(shrink_index.tolist(), labels.tolist()))
        shrink_index = np.setdiff1d(shrink_index, known_index)
        self.shrunk_index = shrink_index
        scale = np.array([scale_of[i] for i in shrink_index], float)
        label = np.array([label_of[i] for i in shrink_index], int)
        n_groups = int(labels.max()) + 1 if len(labels) else 1
        grid = np.array([point for point in itertools.product(gammas, repeat=n_groups)
                         if point[-1] <= min(point[:-1], default=np.inf)])
        if not len(shrink_index):
            grid = grid[:1]
        point_fit = _PointFit(P, h, known_index, known_values, shrink_index, scale,
                              pooled_groups)
        log_ml, self.means, self.covs, index_gammas = [], [], [], []

        def keep(fitted, log_prior, point):
            self.means.append(fitted[0])
            self.covs.append(fitted[1])
            log_ml.append(fitted[2] + log_prior)
            index_gammas.append(point)
            best = max(log_ml)
            for g, value in enumerate(log_ml):  # drop what can no longer matter
                if value < best - _NEGLIGIBLE_LOG_WEIGHT:
                    self.covs[g] = None

        if n_groups == 1 or not len(shrink_index):
            for point in grid:
                keep(point_fit(point[label]), 0.0, point[label])
        else:
            # the last group's gammas are rank-|group| updates of its loosest one
            last = label == n_groups - 1
            # the fast path below updates the last group's prior alone: a pooling
            # prior that couples its statistics would change its normaliser too
            fast = not any(np.isin(index, shrink_index[last]).any()
                           for index, _, _ in pooled_groups)
            # prior: uniform over the other groups' points, then over the last
            # group's gammas allowed there (so the others' marginal stays uniform)
            for outer in itertools.product(gammas, repeat=n_groups - 1):
                widest = min(outer)
                base = point_fit(np.r_[outer, widest][label])
                allowed = gammas[gammas <= widest]
                tighter = allowed[allowed < widest]
                try:
                    if not fast:
                        raise np.linalg.LinAlgError
                    tightened = dict(zip(tighter.tolist(), _tighten_many(
                        base, shrink_index[last], scale[last], tighter, widest)))
                except np.linalg.LinAlgError:  # a degenerate base: fit in full
                    tightened = {g: point_fit(np.r_[outer, g][label]) for g in tighter.tolist()}
                for gamma in allowed:
                    fitted = base if gamma == widest else tightened[float(gamma)]
                    keep(fitted, -np.log(len(allowed)), np.r_[outer, gamma][label])
        log_ml = np.asarray(log_ml)
        self.gammas = grid[:, 0] if n_groups == 1 else grid
        self.index_gammas = np.array(index_gammas).reshape(len(grid), len(shrink_index))
        self.log_marginal = log_ml
        weights = np.exp(log_ml - log_ml.max())  # scipy's logsumexp: 20x the time
        weights[[cov is None for cov in self.covs]] = 0.0
        self.weights = weights / weights.sum()

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


class _PointFit:
    """eta's Gaussian posterior and log marginal likelihood at one grid point.

    ``pooled_groups`` are the pooling priors ``(index, unit, c)`` already in P; the
    marginal likelihood takes their normaliser together with the shrinkage prior's
    (:func:`~skdpvi.noise_aware.statistics_pooling.log_normaliser`).
    """

    def __init__(self, P, h, known_index, known_values, shrink_index, scale,
                 pooled_groups=()):
        self.P, self.h = P, h
        self.known_index = known_index
        self.known_values = np.asarray(known_values, float)
        self.shrink_index, self.scale = shrink_index, scale
        self.pooled_groups = pooled_groups

    def __call__(self, gamma):
        """gamma: one value per shrunk statistic (0: fixed at 0, like a known one)."""
        P, h, k = self.P, self.h, len(self.h)
        zero = self.shrink_index[gamma == 0.0]
        fixed = np.concatenate([self.known_index, zero]).astype(int)
        values = np.concatenate([self.known_values, np.zeros(len(zero))])
        is_free = np.ones(k, bool)
        is_free[fixed] = False
        free = np.flatnonzero(is_free)
        prior = np.zeros(k)
        positive = gamma > 0.0
        shrunk = self.shrink_index[positive]
        prior[shrunk] = 1.0 / (gamma[positive] * self.scale[positive]) ** 2
        P_free = P[np.ix_(free, free)] + np.diag(prior[free])
        h_free = h[free] - P[np.ix_(free, fixed)] @ values
        mean, cov, lml = _gaussian(P_free, h_free,
                                   log_normaliser(prior, shrunk, self.pooled_groups))
        full_mean, full_cov = np.zeros(k), np.zeros((k, k))
        full_mean[fixed], full_mean[free] = values, mean
        full_cov[np.ix_(free, free)] = cov
        return full_mean, full_cov, lml


def _tighten_many(base, index, scale, gammas, widest):
    """The fits with statistics ``index`` under prior scale ``gamma`` instead of
    ``widest`` (> gamma), for each of ``gammas``: the tighter prior is the looser one
    times a Gaussian factor, i.e. an observation of 0 with precision ``delta``, a
    Kalman update of the base posterior; gamma = 0 conditions them on 0. Same results
    as full fits, for O(k^2 |index|) each instead of O(k^3), in one batched solve.
    Returns a list of (mean, cov, log marginal likelihood)."""
    gammas = np.asarray(gammas, float)
    if not len(gammas):
        return []
    mean, cov, lml = base
    m_i, cov_ii, cov_ki = mean[index], cov[np.ix_(index, index)], cov[:, index]
    widest_precision = 1.0 / (widest * scale) ** 2
    with np.errstate(divide="ignore"):  # delta = inf where gamma = 0: conditioning
        delta = 1.0 / (gammas[:, None] * scale) ** 2 - widest_precision  # (G, |index|)
    A = cov_ii + np.eye(len(index)) / delta[:, None, :]
    chol = np.linalg.cholesky(0.5 * (A + np.swapaxes(A, 1, 2)))
    rhs = np.broadcast_to(np.c_[m_i, cov_ki.T], (len(gammas), len(index), 1 + len(mean)))
    solved = np.linalg.solve(chol, rhs)  # L^-1 [m_I, Sigma_Ik] per gamma
    gain_m, gain_k = solved[:, :, 0], solved[:, :, 1:]
    new_means = mean - np.einsum("gik,gi->gk", gain_k, gain_m)
    new_covs = cov - np.swapaxes(gain_k, 1, 2) @ gain_k
    logdet_a = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(1)
    quad = np.einsum("gi,gi->g", gain_m, gain_m)
    out = []
    for g, gamma in enumerate(gammas):
        new_mean, new_cov = new_means[g], new_covs[g]
        if gamma > 0.0:
            change = (0.5 * np.log(1.0 / (gamma * scale) ** 2 / widest_precision).sum()
                      - 0.5 * (np.log(delta[g]).sum() + logdet_a[g]) - 0.5 * quad[g])
        else:
            change = -0.5 * logdet_a[g] - 0.5 * quad[g] - 0.5 * np.log(widest_precision).sum()
            new_mean[index] = 0.0
            new_cov[index, :] = new_cov[:, index] = 0.0
        out.append((new_mean, 0.5 * (new_cov + new_cov.T), lml + change))
    return out


def _gaussian(P, h, log_prior_norm):
    """Posterior mean, covariance and log marginal likelihood (up to a constant)."""
    if not len(h):  # every statistic fixed
        return np.zeros(0), np.zeros((0, 0)), float(log_prior_norm)
    P = 0.5 * (P + P.T)
    # one factorisation for the mean, the covariance and the determinant (a tiny
    # ridge keeps it defined where the trace leaves a direction flat)
    chol = np.linalg.cholesky(P + 1e-12 * np.trace(P) / len(P) * np.eye(len(P)))
    # the triangular inverse from LAPACK: 2-3x faster than solving for the identity
    root_inv, info = lapack.dtrtri(chol, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError("singular Cholesky factor")
    cov = root_inv.T @ root_inv
    mean = cov @ h
    log_ml = log_prior_norm - np.log(np.diag(chol)).sum() + 0.5 * h @ mean
    return mean, 0.5 * (cov + cov.T), log_ml


def _shrinkage_fit(data_statistics, P, h, pool_correlations=True):
    """eta's posterior from the normal equations (P, h): the model's Gaussian prior
    (if any), the known statistics, the pooling priors (the correlations' only with
    ``pool_correlations``) and the shrinkage grid.

    Returns (fit, prior, shrunk indices, their scales); ``prior`` is the model's
    ``(P, h)`` term plus the pooling priors' precision
    (:func:`~skdpvi.noise_aware.statistics_pooling.pooling_prior`), or
    None.
    """
    index, scale_of = data_statistics.shrinkage_groups()
    labels = data_statistics.shrinkage_labels()
    known = data_statistics.known_statistics()
    correlations = (data_statistics.pooled_correlations() if pool_correlations
                    else (np.zeros(0, int), None))
    pooled = len(data_statistics.pooled_statistics()) or len(correlations[0])
    flat = StatisticsFit(P, h, index, np.full(len(index), 1e6), gammas=(1.0,), known=known)
    prior = data_statistics.gaussian_prior(flat.means[0])
    if prior is not None:
        P, h = P + prior[0], h + prior[1]
        flat = StatisticsFit(P, h, index, np.full(len(index), 1e6), gammas=(1.0,),
                             known=known) if pooled else None
    first = StatisticsFit(P, h, index, np.ones(len(index)), gammas=(0.0,), known=known)
    # the shrunk statistics' scale (sqrt(M_jj M_kk) for an off-diagonal entry) from the
    # diagonal with the off-diagonal held at 0, or from the unshrunk fit where that
    # puts it more than 2 sd higher: with the off-diagonal at 0, a trace that wandered
    # along a nearly flat direction (duplicated or nearly collinear features) explains
    # its small curvature by a diagonal near 0, the scale collapses and no grid point
    # reaches the true correlation (two collinear features: R^2 -0.01 instead of 0.88).
    # Only where significant: at no information the unshrunk diagonal is noise
    scale_eta = first.means[0]
    if flat is not None and flat.covs[0] is not None:
        sd = np.sqrt(np.maximum(np.diag(flat.covs[0]), 0.0))
        higher = flat.means[0] - 2.0 * sd > first.means[0]
        scale_eta = np.where(higher, flat.means[0], first.means[0])
    scale = scale_of(scale_eta) if len(index) else np.zeros(0)
    pooling, groups = pooling_prior(flat, first.means[0], scale_eta,
                                    data_statistics.pooled_statistics(), correlations)
    if pooling is not None:
        P = P + pooling
        prior = (pooling, np.zeros(len(h))) if prior is None else (prior[0] + pooling, prior[1])
    fit = StatisticsFit(P, h, index, scale, known=known, labels=labels, pooled_groups=groups)
    fit.pooling = pooling
    return fit, prior, index, scale
