"""The linear model's priors from the design: which statistics are public, shrunk or pooled.

Mixed into :class:`~skdpvi.models.linear_statistics.LinearRegressionStatistics`
(whose index bookkeeping, ``rows``, ``cols``, ``diagonal`` and ``p``, it reads): the
intercept's ``(X^T X)_pp = N`` is public, the intercept's column sums shrink with a
gamma of their own, and the features' diagonal of X^T X and their correlations are
pooled towards their common levels (:mod:`skdpvi.noise_aware.statistics_pooling`).
Measurements behind each choice are on the results pages ("Two priors from the
design", "Pooling the features' correlations").
"""

import numpy as np

__all__ = ["LinearDesignPriors"]


class LinearDesignPriors:
    """The statistics posterior's priors from the design, for linear regression."""

    #: Whether the intercept's column sums get their own shrinkage scale
    #: (:meth:`shrinkage_labels`).
    separate_intercept_shrinkage = True

    #: Whether the features' diagonal of X^T X is pooled towards its common level
    #: (:meth:`pooled_statistics`).
    pool_diagonal = True

    #: Whether the features' correlations (the off-diagonal of X^T X over its natural
    #: scale) are pooled towards their common level (:meth:`pooled_correlations`).
    pool_correlations = True

    def known_statistics(self):
        """With an intercept, its column of ones gives ``(X^T X)_pp = N`` (N is public)."""
        if not self.model.fit_intercept:
            return super().known_statistics()
        last = np.flatnonzero((self.rows == self.p - 1) & (self.cols == self.p - 1))
        return last, np.array([float(self.n_examples)])

    def shrinkage_labels(self):
        """The intercept's column sums ``X^T 1`` shrink with their own gamma, at most
        the features' off-diagonal one.

        On centred features they are O(sqrt(N)), far below their natural scale
        ``sqrt(N (X^T X)_jj)``, while the features' correlations may be large; one
        shared gamma left them as loose as the trace made them, and their noise enters
        the intercept's variance ``sigma^2 / (N - s^T S^-1 s)`` (strongly correlated
        features: intercept intervals three times too wide). An unconstrained gamma of
        their own was too loose where the trace says little (epsilon 0.1: every
        interval wider); bounded by the features' gamma it is never looser than the
        shared one. Uncentred features also make the off-diagonal of X^T X large
        (``m_j m_k`` over ``1 + m_j^2``), so both may be. Off with
        ``separate_intercept_shrinkage``.
        """
        index, _ = self.shrinkage_groups()
        if not (self.model.fit_intercept and self.separate_intercept_shrinkage):
            return None
        last = self.p - 1
        return ((self.rows[index] == last) | (self.cols[index] == last)).astype(int)

    def pooled_statistics(self):
        """The features' diagonal of X^T X (``pool_diagonal``; results pages, "Pooling
        the diagonal of X^T X")."""
        return self.scale_statistics() if self.pool_diagonal else np.zeros(0, dtype=int)

    def pooled_correlations(self):
        """The features' off-diagonal of X^T X, on the scale ``sqrt(M_jj M_kk)``
        (``pool_correlations``; results pages, "Pooling the features' correlations").

        A trace resolves each of the ``d (d - 1) / 2`` entries only to a few per cent of
        the diagonal at small epsilon; their noise spreads the eigenvalues of X^T X
        (equicorrelated features: the eleven equal ones of twelve features read 0.4-2
        times their value), and the posterior is too narrow along the directions whose
        curvature it overstates. Pooled towards their common correlation, with the
        pooling's scale chosen by marginal likelihood, equal correlations keep their
        level and lose the spread; unequal ones (AR(1), blocks) choose a loose pooling.
        The intercept's column sums are not pooled (they are the features' means).
        """
        if not self.pool_correlations:
            return np.zeros(0, dtype=int), lambda eta: np.zeros(0)
        index, scale = self.shrinkage_groups()
        last = self.p - 1
        if self.model.fit_intercept:
            keep = (self.rows[index] != last) & (self.cols[index] != last)
        else:
            keep = np.ones(len(index), bool)

        def features_scale(eta):
            return scale(eta)[keep]

        return index[keep], features_scale

    def scale_statistics(self):
        """The diagonal of X^T X, except a known one (the intercept's)."""
        return np.setdiff1d(self.diagonal, self.known_statistics()[0])
