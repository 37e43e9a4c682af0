"""What one DPVI run releases: :class:`DPVIResult`."""

from dataclasses import dataclass, field, replace

import numpy as np

from .statistics import TraceStatistics, _statistics

__all__ = ["DPVIResult"]


@dataclass
class DPVIResult:
    """What a DPVI run releases, all of it covered by the privacy guarantee.

    Attributes
    ----------
    phi : ndarray of shape (d,)
        The last iterate phi_T = (mu, rho).
    stats : TraceStatistics
        Sufficient statistics of the pairs after burn-in.
    noise_multiplier, clip_norm, sampling_rate : float
    preconditioner : ndarray of shape (d,)
        beta.
    learning_rate : ndarray of shape (d,)
        Per-coordinate step size lambda * beta.
    n_steps, burn_in : int
        T, and the first step of the recording window (the run's burn-in, or a later
        start a post-processing chose: :meth:`with_window`).
    trace_phi, trace_grad : ndarray or None
        The full trace (T+1, d) and noisy gradients (T, d) if recorded.
    diagnostics : dict
        Only filled on request (``return_diagnostics=True``). Holds statistics of the
        private data computed WITHOUT noise (e.g. the clipped fraction): for
        simulation and benchmarking only, never to be released.
    """

    phi: np.ndarray
    stats: TraceStatistics
    noise_multiplier: float
    clip_norm: float
    sampling_rate: float
    preconditioner: np.ndarray
    learning_rate: np.ndarray
    n_steps: int
    burn_in: int
    trace_phi: np.ndarray = None
    trace_grad: np.ndarray = None
    diagnostics: dict = field(default_factory=dict)

    def with_window(self, start):
        """The same release with its recording window starting at step ``start``.

        Post-processing may choose a later start than the run's burn-in from the
        release itself (:func:`~skdpvi.noise_aware.statistics_posterior`'s
        ``settle``); the window's statistics are recomputed from the recorded trace,
        which this needs.

        Parameters
        ----------
        start : int
            In ``[burn_in, n_steps - 4]``.

        Returns
        -------
        DPVIResult
        """
        start = int(start)
        if start == self.burn_in:
            return self
        if self.trace_phi is None or self.trace_grad is None:
            raise ValueError("Moving the recording window needs the recorded trace "
                             "(record_trace=True).")
        if not self.burn_in <= start <= self.n_steps - 4:
            raise ValueError(f"start must be in [burn_in, n_steps - 4] = [{self.burn_in}, "
                             f"{self.n_steps - 4}], got {start}.")
        return replace(self, burn_in=start,
                       stats=TraceStatistics.from_trace(self.trace_phi, self.trace_grad, start))

    @property
    def noise_std(self):
        """Standard deviation of the DP noise in each coordinate of g_tilde."""
        return self.noise_multiplier * self.clip_norm / self.preconditioner


def _result(phi, sums, shift, cross, plan, trace_phi, trace_grad, clip_counts, *,
            noise_multiplier, clip_norm, sampling_rate, n_steps, burn_in):
    """Assemble the DPVIResult of one run; ``clip_counts`` = (clipped, seen) or None."""
    diagnostics = {}
    if clip_counts is not None:
        n_clipped, n_seen = clip_counts
        diagnostics["clipped_fraction"] = n_clipped / max(n_seen, 1)
        diagnostics["mean_batch_size"] = n_seen / n_steps
    return DPVIResult(
        phi=phi,
        stats=_statistics(sums, shift, n_steps - burn_in, cross),
        noise_multiplier=float(noise_multiplier),
        clip_norm=float(clip_norm),
        sampling_rate=float(sampling_rate),
        preconditioner=plan.beta,
        learning_rate=plan.lr,
        n_steps=int(n_steps),
        burn_in=int(burn_in),
        trace_phi=trace_phi,
        trace_grad=trace_grad,
        diagnostics=diagnostics,
    )
