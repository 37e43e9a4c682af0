"""The statistics as the clipped mechanism sees them: a model's design linearised in
what clipping removes (:func:`skdpvi.models.clipping_correction.clipping_correction`)."""

import numpy as np

from ..models.clipping_correction import clipping_correction
from ..models.statistics import DataStatistics

#: Models with more statistics than this take the slope of the correction at a few
#: anchors of the trace instead of at every step (cost: one evaluation per statistic).
_PER_STEP_SLOPE_MAX = 4
#: Number of anchors (means of consecutive segments of the recording window).
_N_ANCHORS = 16


class _ClippedStatistics:
    """A model's statistics with the clipped mechanism's design, linearised at eta_hat.

    The expected released gradient is ``J eta + r - lost(phi, eta)``; linearised at
    eta_hat it is ``(J - L) eta + r - lost(phi, eta_hat) + L eta_hat`` with
    ``L = d lost / d eta`` (central differences). For models with few statistics
    (the exponential families) L is taken at every step; for many (linear
    regression: one per entry of X^T X) at the nearest of a few anchors along the
    trace, where it varies slowly. Given the trace (``trace_phi``), ``lost`` at
    eta_hat is computed once for its steps and looked up.

    Delegates everything else (prior predictive, conditional posterior, ...) to the
    model's own :class:`~skdpvi.models.statistics.DataStatistics`.
    """

    def __init__(self, base, eta_hat, preconditioner, clip_norms, trace_phi=None, lost=None):
        self.base, self.eta_hat = base, np.asarray(eta_hat, float)
        self.preconditioner, self.clip_norms = preconditioner, clip_norms
        self._rows, self._anchors, self._anchor_slopes = {}, None, None
        if trace_phi is not None:
            trace_phi = np.asarray(trace_phi, float)
            self._trace_lost = (self._lost(trace_phi, self.eta_hat) if lost is None
                                else np.asarray(lost, float))
            self._rows = {row.tobytes(): i for i, row in enumerate(trace_phi)}
            if base.n_statistics > _PER_STEP_SLOPE_MAX:
                segments = np.array_split(trace_phi, min(_N_ANCHORS, len(trace_phi)))
                self._anchors = np.array([s.mean(0) for s in segments])
                self._anchor_slopes = self._slope(self._anchors)

    def __getattr__(self, name):
        return getattr(self.base, name)

    def _lost(self, phi, eta):
        return clipping_correction(self.base, phi, eta, self.preconditioner, self.clip_norms)

    def _slope(self, phi):
        """d lost / d eta at eta_hat, (T, d, n_statistics)."""
        J_shape = (len(phi), phi.shape[1], self.base.n_statistics)
        slope = np.empty(J_shape)
        for k in range(J_shape[2]):
            step = np.zeros_like(self.eta_hat)
            step[k] = 1e-4 * max(abs(self.eta_hat[k]), 1.0)
            slope[:, :, k] = ((self._lost(phi, self.eta_hat + step)
                               - self._lost(phi, self.eta_hat - step)) / (2 * step[k]))
        return slope

    def _lookup(self, phi):
        """lost(phi_t, eta_hat) of the given steps, from the trace where they are in it."""
        index = [self._rows.get(row.tobytes()) for row in phi] if self._rows else [None]
        if all(i is not None for i in index):
            return self._trace_lost[np.asarray(index, int)]
        return self._lost(phi, self.eta_hat)

    def _nearest_anchor(self, phi):
        return np.argmin(((phi[:, None, :] - self._anchors[None]) ** 2).sum(-1), 1)

    def design(self, phi):
        phi = np.atleast_2d(np.asarray(phi, float))
        J, r = self.base.design(phi)
        lost = self._lookup(phi)
        slope = (self._slope(phi) if self._anchors is None
                 else self._anchor_slopes[self._nearest_anchor(phi)])
        return J - slope, r - lost + slope @ self.eta_hat

    def normal_equations(self, phi, target, precision):
        """The normal equations of the clipped design.

        With one slope S per anchor, ``(J_t - S)^T W (J_t - S)`` sums to the model's
        own normal equations (its fast path) for the shifted target
        ``target + lost - S eta_hat``, less ``S^T W sum_t J_t`` and its transpose,
        plus ``n S^T W S``, per anchor.
        """
        if self._anchors is None:
            return DataStatistics.normal_equations(self, phi, target, precision)
        phi = np.atleast_2d(np.asarray(phi, float))
        nearest = self._nearest_anchor(phi)
        slopes = self._anchor_slopes
        shifted = target + self._lookup(phi) - (slopes @ self.eta_hat)[nearest]
        P, h, yy = self.base.normal_equations(phi, shifted, precision)
        for a in np.unique(nearest):
            steps = np.flatnonzero(nearest == a)
            J_sum, r_sum = self.base.design_sum(phi[steps])
            y_sum = shifted[steps].sum(0) - r_sum
            WS = precision[:, None] * slopes[a]
            cross = J_sum.T @ WS
            P = P - cross - cross.T + len(steps) * slopes[a].T @ WS
            h = h - WS.T @ y_sum
        return P, h, yy

    def expected_gradient(self, phi, eta):
        if self._anchors is None:
            return DataStatistics.expected_gradient(self, phi, eta)
        phi = np.atleast_2d(np.asarray(phi, float))
        moved = self._anchor_slopes @ (np.asarray(eta, float) - self.eta_hat)  # (A, d)
        return (self.base.expected_gradient(phi, eta) - self._lookup(phi)
                - moved[self._nearest_anchor(phi)])
