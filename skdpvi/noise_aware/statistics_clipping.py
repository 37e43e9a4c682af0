"""The statistics as the clipped mechanism sees them: a model's design linearised in
what clipping removes (:func:`skdpvi.models.statistics.clipping_correction`)."""

import numpy as np

from ..models.statistics import DataStatistics, clipping_correction


class _ClippedStatistics:
    """A model's statistics with the clipped mechanism's design, linearised at eta_hat.

    Delegates everything else (prior predictive, conditional posterior, ...) to the
    model's own :class:`~skdpvi.models.statistics.DataStatistics`.
    """

    def __init__(self, base, eta_hat, preconditioner, clip_norm):
        self.base, self.eta_hat = base, np.asarray(eta_hat, float)
        self.preconditioner, self.clip_norm = preconditioner, clip_norm

    def __getattr__(self, name):
        return getattr(self.base, name)

    def _lost(self, phi, eta):
        return clipping_correction(self.base, phi, eta, self.preconditioner, self.clip_norm)

    def design(self, phi):
        J, r = self.base.design(phi)
        lost = self._lost(phi, self.eta_hat)
        slope = np.empty_like(J)
        for k in range(J.shape[2]):
            step = np.zeros_like(self.eta_hat)
            step[k] = 1e-4 * max(abs(self.eta_hat[k]), 1.0)
            slope[:, :, k] = ((self._lost(phi, self.eta_hat + step)
                               - self._lost(phi, self.eta_hat - step)) / (2 * step[k]))
        return J - slope, r - lost + slope @ self.eta_hat

    def normal_equations(self, phi, target, precision):
        return DataStatistics.normal_equations(self, phi, target, precision)

    def expected_gradient(self, phi, eta):
        return DataStatistics.expected_gradient(self, phi, eta)
