"""The pooling priors of the statistics posterior: statistics of one common level.

Step 2 of :func:`skdpvi.noise_aware.statistics_posterior`, beside the shrinkage grid
(:mod:`~skdpvi.noise_aware.statistics_fit`): a group of statistics that share a level
(linear regression: the features' diagonal of X^T X; their correlations, the
off-diagonal over ``sqrt(M_jj M_kk)``) gets a Gaussian prior on its contrasts, its
scale tau chosen by marginal likelihood (:func:`pooling_prior`), and the shrinkage
grid's marginal likelihood takes the normaliser of the two priors together
(:func:`log_normaliser`).
"""

import numpy as np

from .statistics_sampling import _psd_cholesky

__all__ = ["TAU_GRID", "pooling_prior", "log_normaliser"]

#: Grid of the pooling scale tau (relative to the pooled statistics' mean level).
TAU_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)


def pooling_prior(flat, first_mean, scale_eta, levels, correlations):
    """The precision of the pooling priors, each at its most probable tau, and the
    pooled groups ``(index, unit, 1 / tau^2)``; ``(None, [])`` where nothing is pooled.

    Two groups may be pooled. The *levels* (``levels``, what
    ``data_statistics.pooled_statistics()`` returned;
    linear regression: the features' diagonal of X^T X) get the prior ``N(mu 1, (tau
    level)^2 I)`` with a flat prior on their common mu, ``level`` their mean in a first
    fit. The *correlations* (``correlations``, what
    ``data_statistics.pooled_correlations()`` returned; linear
    regression: the features' off-diagonal of X^T X) get the same prior on the
    entries over their natural scales, ``eta_jk / scale_jk ~ N(mu, tau^2)``, scales
    from ``scale_eta``: a common correlation, not a common value. Each prior's
    precision is ``c W (I - 1 1^T / m) W`` on its m entries (W the diagonal of 1 /
    level or 1 / scale, ``c = 1 / tau^2``), tau chosen on :data:`TAU_GRID` by its
    marginal likelihood under flat off-diagonal statistics (``flat``, the fit without
    shrinkage that the caller has made anyway; empirical Bayes: one value, not a
    mixture). Adding it to a Gaussian posterior N(m, S) changes the log marginal
    likelihood by ``(m - 1)/2 log c - 1/2 log|I + S_pp D| - 1/2 m_p^T D (I + S_pp
    D)^-1 m_p`` (D the precision block): one fit for the whole grid. Features of one
    scale have diagonals within a few per cent of each other, which the trace alone
    resolves to tens of per cent at small epsilon; unequal scales, or unequal
    correlations, choose a large tau.
    """
    k = len(first_mean)
    precision = np.zeros((k, k))
    groups = []
    pool = np.asarray(levels, int)
    if len(pool) >= 2:
        level = float(np.mean(first_mean[pool]))
        if np.isfinite(level) and level > 0.0:
            groups += _add_pooling(precision, flat, pool, np.full(len(pool), level))
    pool, scale_of = correlations
    pool = np.asarray(pool, int)
    if len(pool) >= 2:
        unit = np.asarray(scale_of(scale_eta), float)
        if np.all(np.isfinite(unit)) and np.all(unit > 0.0):
            groups += _add_pooling(precision, flat, pool, unit)
    return (precision, groups) if groups else (None, [])


def _add_pooling(precision, flat, pool, unit):
    """Add the pooling prior of ``pool`` (entries over ``unit``) at its best tau to
    ``precision``; return ``[(pool, unit, 1 / tau^2)]``, or [] where no tau has a
    finite score.

    With S = W (I - 1 1^T / m) W, cov = L L^T and L^T S L = U diag(lambda) U^T (one
    eigendecomposition for the whole grid), ``log|I + c cov S| = sum log(1 + c
    lambda)`` and, by Woodbury, ``m^T D (I + cov D)^-1 m = c a - c^2 sum b^2 / (1 + c
    lambda)`` with ``a = m^T S m`` and ``b = U^T L^T S m``.
    """
    m = len(pool)
    mean, cov = flat.means[0][pool], flat.covs[0][np.ix_(pool, pool)]
    contrast = np.eye(m) - np.full((m, m), 1.0 / m)
    shape = contrast / np.outer(unit, unit)
    root = _psd_cholesky(cov)
    lam, U = np.linalg.eigh(root.T @ shape @ root)
    lam = np.maximum(lam, 0.0)
    s_mean = shape @ mean
    a = float(mean @ s_mean)
    b2 = (U.T @ (root.T @ s_mean)) ** 2
    scores = []
    for tau in TAU_GRID:
        c = 1.0 / tau ** 2
        logdet = np.log1p(c * lam).sum()
        quad = c * a - c * c * (b2 / (1.0 + c * lam)).sum()
        scores.append(0.5 * (m - 1) * np.log(c) - 0.5 * logdet - 0.5 * quad)
    if not np.isfinite(np.max(scores)):
        return []
    tau = TAU_GRID[int(np.argmax(scores))]
    precision[np.ix_(pool, pool)] += shape / tau ** 2
    return [(pool, unit, 1.0 / tau ** 2)]


def log_normaliser(prior, shrunk, pooled_groups):
    """Log normaliser of the shrunk statistics' prior: shrinkage times pooling.

    ``prior`` holds the shrinkage precisions ``1 / (gamma scale)^2`` at ``shrunk``
    (the statistics with gamma > 0), ``pooled_groups`` the pooling priors ``(index,
    unit, c)`` already in P. Where one couples shrunk statistics, their prior is the
    product of the two, and the marginal likelihood needs that product's normaliser
    ``1/2 log|diag(prior) + c W C W|``: with the shrinkage prior's own normaliser
    alone, the pooled contrasts would pay the shrinkage's Occam factor a second time
    and the grid would choose gamma = 0 (every pooled correlation fixed at zero).

    A pooled group ``(index, unit, c)`` adds ``c W C W`` (W = diag(1 / unit), C
    the centring matrix) to the diagonal ``diag(p)`` of its shrinkage precision;
    where ``p unit^2`` is one value q (the shrinkage's scale is the pooling's
    unit, as for linear regression's correlations) the determinant is ``q (q +
    c)^(m - 1) / prod(unit)^2``, else it is computed.
    """
    total = 0.5 * np.log(prior[shrunk]).sum()
    for index, unit, c in pooled_groups:
        m = len(index)
        inside = np.isin(index, shrunk)  # the others are fixed (gamma = 0)
        if not inside.any():
            continue
        p = prior[index[inside]]
        q = p * unit[inside] ** 2
        if inside.all() and np.allclose(q, q[0], rtol=1e-9, atol=0.0):
            logdet = np.log(q[0]) + (m - 1) * np.log(q[0] + c) - 2.0 * np.log(unit).sum()
        else:  # the free entries' block of the group's precision
            shape = (np.eye(m) - 1.0 / m) / np.outer(unit, unit)
            block = c * shape[np.ix_(inside, inside)]
            logdet = np.linalg.slogdet(np.diag(p) + block)[1]
        total += 0.5 * (logdet - np.log(p).sum())
    return total
