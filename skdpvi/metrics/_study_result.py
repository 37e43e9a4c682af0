"""The outcome of :func:`~skdpvi.metrics.run_tarp_study`: TARP and the draws behind it."""

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ._intervals import ellipsoid_coverage, interval_coverage, posterior_z_scores
from ._tarp import MarginalTarpResult, TarpResult

__all__ = ["TarpStudyResult"]


@dataclass
class TarpStudyResult:
    """Outcome of :func:`run_tarp_study`.

    Attributes
    ----------
    tarp : TarpResult
        Joint TARP coverage (curve, RMSE, frequencies, bootstrap summaries).
    marginal : MarginalTarpResult
        Per-parameter TARP coverage, with the same reference points.
    samples : ndarray of shape (n_simulations, n_draws, n_params)
        Posterior draws of every fit (unconstrained if requested).
    theta_true : ndarray of shape (n_simulations, n_params)
        The simulated parameters, in the same space as ``samples``.
    epsilons : ndarray of shape (n_simulations,)
        ``epsilon_`` of each fitted estimator (NaN if it has none).
    param_names : list of str or None
        ``param_names_`` of the first fitted estimator, if it has them.
    unconstrained : bool
        Whether the comparison was made in the unconstrained space.
    fit_warnings : list of dict
        The warnings the fits raised, grouped by category and text (numbers
        aside): ``category`` (the class name), ``count`` and ``message`` (the
        first of the group). How often a check fired across the simulations is
        itself a diagnostic of the design. Empty for tasks that ran in a thread
        pool (see :func:`run_tarp_study`).
    """

    tarp: TarpResult
    marginal: MarginalTarpResult
    samples: np.ndarray
    theta_true: np.ndarray
    epsilons: np.ndarray
    param_names: Optional[list] = None
    unconstrained: bool = False
    fit_warnings: list = field(default_factory=list)

    @property
    def frequencies(self):
        """ndarray of shape (n_simulations,): the TARP statistics ``f_i``."""
        return self.tarp.frequencies

    @property
    def rmse(self):
        """float: the joint coverage RMSE (paper eq. 27)."""
        return self.tarp.rmse

    def z_scores(self):
        """ndarray of shape (n_simulations, n_params): :func:`posterior_z_scores`."""
        return posterior_z_scores(self.samples, self.theta_true)

    def interval_coverage(self, level=0.9):
        """ndarray of shape (n_params,): :func:`interval_coverage` at ``level``."""
        return interval_coverage(self.samples, self.theta_true, level)

    def ellipsoid_coverage(self, level=0.9):
        """float: :func:`ellipsoid_coverage` at ``level``, the joint check in every
        direction."""
        return ellipsoid_coverage(self.samples, self.theta_true, level)

    def __repr__(self):
        # the per-parameter coverage beside the joint RMSE: TARP can pass a posterior
        # too narrow in some coordinates (the results pages' small-data cell: RMSE
        # 0.05 with 90 % intervals covering well under 0.9 of the truths)
        n_sim, n_draws, n_params = self.samples.shape
        coverage = self.interval_coverage(0.9)
        ellipsoid = (f"ellipsoid_90={self.ellipsoid_coverage(0.9):.2f}, "
                     if n_draws >= n_params + 2 else "")
        return (
            f"{type(self).__name__}(rmse={self.tarp.rmse:.4f}, "
            f"coverage_90={np.nanmin(coverage):.2f}-{np.nanmax(coverage):.2f}, {ellipsoid}"
            f"n_simulations={n_sim}, n_draws={n_draws}, n_params={n_params}, "
            f"unconstrained={self.unconstrained})"
        )
