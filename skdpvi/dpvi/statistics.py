"""What a run keeps of its trace: running sums, not the trace.

Only the released pairs (phi_t, g_tilde_{t+1}) after burn-in enter the noise-aware
post-processing, through the sums of :class:`TraceStatistics`, so its cost does not
grow with the number of steps T. :class:`_TraceRecorder` folds the pairs into them
while the engine runs.
"""

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["TraceStatistics"]


@dataclass
class TraceStatistics:
    """Per-coordinate sums over the released pairs (phi_t, g_tilde_{t+1}), t >= burn-in.

    The parameters are centred on ``shift`` (phi at the burn-in step) before summing,
    which keeps the sums of squares accurate in float64. With x_t = phi_t - shift:
    ``sum_x = sum x_t``, ``sum_xx = sum x_t^2``, ``sum_g = sum g``, ``sum_gg = sum g^2``,
    ``sum_gx = sum g * x_t``; ``count`` pairs in total. ``halves``, when present, holds
    the same sums over the first and the second half of the window (same ``shift``),
    for the split-window check of :func:`~skdpvi.noise_aware.split_window_test`.
    ``sum_xxt``, when present, is the (d, d) matrix ``sum x_t x_t^T`` (its diagonal is
    ``sum_xx``): the covariance of the wander, which the coupled error model of the
    means reads (:func:`~skdpvi.noise_aware.coupled_means`).

    Attributes
    ----------
    count : int
        Pairs summed.
    shift : ndarray of shape (d,)
        phi at the burn-in step, subtracted before summing.
    sum_x, sum_xx, sum_g, sum_gg, sum_gx : ndarray of shape (d,)
        The sums above, per coordinate.
    halves : tuple of two TraceStatistics or None
        The same sums over each half of the window.
    sum_xxt : ndarray of shape (d, d) or None
    """

    count: int
    shift: np.ndarray
    sum_x: np.ndarray
    sum_xx: np.ndarray
    sum_g: np.ndarray
    sum_gg: np.ndarray
    sum_gx: np.ndarray
    halves: tuple = None
    sum_xxt: np.ndarray = None

    @classmethod
    def from_trace(cls, phi, grads, burn_in):
        """Statistics of an explicit trace: ``phi`` (T+1, d) and ``grads`` (T, d)."""
        phi = np.asarray(phi, dtype=float)
        grads = np.asarray(grads, dtype=float)
        if phi.ndim != 2 or grads.ndim != 2 or phi.shape[0] != grads.shape[0] + 1:
            raise ValueError(
                "phi must have shape (T + 1, d) and grads shape (T, d); got "
                f"{phi.shape} and {grads.shape}."
            )
        if phi.shape[1] != grads.shape[1]:
            raise ValueError(f"phi and grads disagree on d: {phi.shape[1]} != {grads.shape[1]}.")
        if not (np.all(np.isfinite(phi)) and np.all(np.isfinite(grads))):
            raise ValueError("The trace contains NaN or infinite values.")
        n_steps = grads.shape[0]
        if not 0 <= burn_in < n_steps:
            raise ValueError(
                f"burn_in must be in [0, T) for a trace of T={n_steps} steps, got {burn_in}."
            )
        shift = phi[burn_in].copy()
        x = phi[burn_in:-1] - shift
        g = grads[burn_in:]

        def sums(part):
            xs, gs = x[part], g[part]
            return dict(count=len(gs), shift=shift, sum_x=xs.sum(0), sum_xx=(xs * xs).sum(0),
                        sum_g=gs.sum(0), sum_gg=(gs * gs).sum(0), sum_gx=(gs * xs).sum(0))

        mid = len(g) // 2
        halves = (cls(**sums(slice(0, mid))), cls(**sums(slice(mid, None))))
        return cls(**sums(slice(None)), halves=halves, sum_xxt=x.T @ x)

    @property
    def dim(self):
        return len(self.shift)

    def with_gradients_shifted(self, offset):
        """The statistics of the same trace with every released gradient g replaced by g - offset.

        Parameters
        ----------
        offset : array-like of shape (d,)
            A constant per coordinate.

        Returns
        -------
        TraceStatistics
        """
        o = np.broadcast_to(np.asarray(offset, dtype=float), self.shift.shape)
        n = self.count
        return TraceStatistics(
            count=n, shift=self.shift.copy(), sum_x=self.sum_x.copy(),
            sum_xx=self.sum_xx.copy(), sum_g=self.sum_g - n * o,
            sum_gg=self.sum_gg - 2 * o * self.sum_g + n * o * o,
            sum_gx=self.sum_gx - o * self.sum_x,
            halves=None if self.halves is None
            else tuple(h.with_gradients_shifted(o) for h in self.halves),
            sum_xxt=None if self.sum_xxt is None else self.sum_xxt.copy(),
        )

    def wander_covariance(self):
        """The (d, d) covariance of phi_t over the recording window (needs ``sum_xxt``)."""
        if self.sum_xxt is None:
            raise ValueError("These statistics have no cross sums (sum_xxt).")
        mean = self.sum_x / self.count
        return (self.sum_xxt - self.count * np.outer(mean, mean)) / max(self.count - 1, 1)

    def check_finite(self):
        for name in ("shift", "sum_x", "sum_xx", "sum_g", "sum_gg", "sum_gx"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(
                    f"The DP-SGD trace statistics contain non-finite values ({name}); "
                    "the optimisation diverged. Lower learning_rate_scale or check the data."
                )


class _TraceRecorder:
    """Buffers the released pairs (phi_t, g_tilde_{t+1}) and folds them into sums.

    Works for one run (``lead=()``) or for runs in lockstep (``lead=(R,)``): every
    array carries the lead axes between the time axis and the coordinates. The pairs
    are reduced once per block of steps: two copies per step instead of a dozen
    small tensor operations.
    """

    def __init__(self, n_steps, burn_in, lead, d, block, record_trace, device):
        self.burn_in = burn_in
        self.n_steps = n_steps
        self.phi = torch.empty((block, *lead, d), dtype=torch.float64, device=device)
        self.grad = torch.empty((block, *lead, d), dtype=torch.float64, device=device)
        # the sums over the first and the second half of the recording window
        self.sums = torch.zeros((2, 5, *lead, d), dtype=torch.float64, device=device)
        self.cross = torch.zeros((*lead, d, d), dtype=torch.float64, device=device)
        self.mid = burn_in + (n_steps - burn_in) // 2
        self.shift = None
        self.trace_phi = np.empty((n_steps + 1, *lead, d)) if record_trace else None
        self.trace_grad = np.empty((n_steps, *lead, d)) if record_trace else None

    def flush(self, start, stop):
        """Fold the buffered steps start..stop-1 into the statistics."""
        if self.trace_phi is not None:
            self.trace_phi[start:stop] = self.phi[: stop - start].cpu().numpy()
            self.trace_grad[start:stop] = self.grad[: stop - start].cpu().numpy()
        first = max(start, self.burn_in)
        if first >= stop:
            return
        if self.shift is None:
            self.shift = self.phi[first - start].clone()
        xs = self.phi[first - start: stop - start] - self.shift  # centred once per block
        self.cross.add_(torch.einsum("t...i,t...j->...ij", xs, xs))
        for half, (lo, hi) in enumerate(((first, min(stop, self.mid)),
                                         (max(first, self.mid), stop))):
            if lo >= hi:
                continue
            x = xs[lo - first: hi - first]
            g = self.grad[lo - start: hi - start]
            self.sums[half].add_(torch.stack([x.sum(0), (x * x).sum(0), g.sum(0),
                                              (g * g).sum(0), (g * x).sum(0)]))

    def finish(self, phi):
        """Store the last iterate; return (sums (2, 5, *lead, d), shift, cross) as arrays."""
        if self.trace_phi is not None:
            self.trace_phi[self.n_steps] = phi.cpu().numpy()
        return self.sums.cpu().numpy(), self.shift.cpu().numpy(), self.cross.cpu().numpy()


def _statistics(sums, shift, count, cross=None):
    """The :class:`TraceStatistics` of the sums (2, 5, d) and the cross sums (d, d) a
    :class:`_TraceRecorder` returns."""
    first = count // 2
    halves = tuple(
        TraceStatistics(count=n, shift=shift, sum_x=part[0], sum_xx=part[1], sum_g=part[2],
                        sum_gg=part[3], sum_gx=part[4])
        for n, part in ((first, sums[0]), (count - first, sums[1]))
    )
    total = sums[0] + sums[1]
    return TraceStatistics(count=count, shift=shift, sum_x=total[0], sum_xx=total[1],
                           sum_g=total[2], sum_gg=total[3], sum_gx=total[4], halves=halves,
                           sum_xxt=cross)
