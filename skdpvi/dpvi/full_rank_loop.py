"""The step loop of full-rank DP-SGD runs, one or several in lockstep.

:class:`_LockstepRuns` steps R runs together (one run is R = 1): each step draws
from every run's own generator in :func:`~skdpvi.dpvi.run_dpvi_full_rank`'s order,
gathers the runs' batches (padded to the largest, padding rows of weight 0), asks
:class:`~skdpvi.dpvi.full_rank_step._FullRankStep` for the clipped sums, adds each
run's noise and steps. :class:`_WindowSums` folds the released iterates and
gradients after burn-in into the averages a
:class:`~skdpvi.dpvi.FullRankRelease` carries.
"""

import math

import numpy as np
import torch

from .sampling import _block_steps, _centred_normal, _poisson_block
from .statistics import TraceStatistics

__all__ = []

#: Steps between two updates of the means' preconditioner (``mean_preconditioning``).
_PRECONDITION_EVERY = 64


def covariance_preconditioner(L, cap):
    """The means' step matrix from the current factor L of q's covariance S = L L^T.

    ``S / lambda_min(S)`` with its eigenvalues capped at ``cap``: 1 along the
    stiffest direction (where the default step is), up to ``cap`` times the step
    along flatter ones, so that every direction relaxes at about the stiffest one's
    rate (a natural-gradient step for the means, q's covariance standing in for the
    inverse curvature). L is a released iterate: no privacy cost.
    """
    S = L @ L.mT
    lam, V = torch.linalg.eigh(0.5 * (S + S.mT))
    ratio = torch.clamp(lam / torch.clamp(lam[..., :1], min=1e-300), min=1.0, max=cap)
    return (V * ratio[..., None, :]) @ V.mT


def full_rank_size(n_params):
    """Length of phi = (m, rho, U) for ``n_params`` parameters."""
    n = int(n_params)
    return 2 * n + n * (n - 1) // 2


def _mean_statistics(half_sums, shift, sum_mm, mean, count, first_half):
    """The means' :class:`TraceStatistics` (halves and cross sums) from the run's sums."""
    def stats(sums, n, **extra):
        return TraceStatistics(count=int(n), shift=shift, sum_x=sums[0], sum_xx=sums[1],
                               sum_g=sums[2], sum_gg=sums[3], sum_gx=sums[4], **extra)

    # sum (m - shift)(m - shift)^T from sum m m^T and the window's mean of m
    total_x = count * (mean - shift)
    sum_xxt = sum_mm - count * np.outer(mean, shift) - np.outer(shift, total_x)
    halves = (stats(half_sums[0], first_half), stats(half_sums[1], count - first_half))
    return stats(half_sums.sum(0), count, halves=halves, sum_xxt=sum_xxt)


class _WindowSums:
    """The window's running sums of R lockstep runs: what a
    :class:`~skdpvi.dpvi.FullRankRelease` averages (every one of them a function of
    released iterates and gradients)."""

    def __init__(self, R, n, d, burn_in, n_steps):
        zeros = lambda *shape: torch.zeros(R, *shape, dtype=torch.float64)  # noqa: E731
        self.n, self.burn_in, self.n_steps = n, burn_in, n_steps
        self.phi, self.mm = zeros(d), zeros(n, n)
        # the means' (x, x^2, g, g^2, g x) per half of the window, x = m - m at burn-in
        self.halves = zeros(2, 5, n)
        self.mid = burn_in + (n_steps - burn_in) // 2
        self.shift = None
        # the scales' moments per half too: two estimates of the curvature
        self.sL, self.diag, self.entropy = zeros(2, n, n * n), zeros(2, n, n), zeros(2, n)
        self.last = None

    def add(self, t, m, rho, U, g_m, factors):
        """Fold step t's iterate (m, rho, U), its released gradient in m and the
        factors of (rho, U) into the sums."""
        self.phi += torch.cat([m, rho, U], -1)
        self.mm.baddbmm_(m[:, :, None], m[:, None, :])
        if self.shift is None:
            self.shift = m.clone()
        x = m - self.shift
        half = int(t >= self.mid)
        self.halves[:, half] += torch.stack([x, x * x, g_m, g_m * g_m, g_m * x], 1)
        s, A, L, dsig = factors
        self.sL[:, half].baddbmm_(s[:, :, None], L.reshape(L.shape[0], 1, -1))
        self.diag[:, half] += (L @ A.mT) * dsig[:, None, :]
        self.entropy[:, half] += dsig / s

    def averages(self, r):
        """Run r's window averages: the data fields of its
        :class:`~skdpvi.dpvi.FullRankRelease`."""
        n, count = self.n, self.n_steps - self.burn_in
        phi_mean = (self.phi[r] / count).numpy()
        halves = self.halves[r].numpy()
        first = self.mid - self.burn_in

        def moments(sL, diag, entropy, steps):
            return dict(scale_moments=(sL / steps).reshape(n, n, n).numpy(),
                        diagonal_moments=(diag / steps).numpy(),
                        entropy=(entropy / steps).numpy())

        sL, diag, entropy = self.sL[r], self.diag[r], self.entropy[r]
        return dict(
            phi=self.last[r].numpy(), mean_phi=phi_mean,
            mean_gradient=halves[:, 2].sum(0) / count, mean_outer=(self.mm[r] / count).numpy(),
            **moments(sL.sum(0), diag.sum(0), entropy.sum(0), count), count=count,
            half_moments=tuple(moments(sL[h], diag[h], entropy[h], steps)
                               for h, steps in ((0, first), (1, count - first))),
            mean_stats=_mean_statistics(halves, self.shift[r].numpy(), self.mm[r].numpy(),
                                        phi_mean[:n], count, self.mid - self.burn_in))


class _LockstepRuns:
    """R full-rank runs stepping together: rows of run r at ``r N .. (r + 1) N - 1`` of
    the stacked data; per-run mechanism values as tensors of shape (R,)."""

    def __init__(self, X, y, R, N, n, step, *, noise_std, lr_means, lr_scales, beta_scales,
                 init_scale, mean_preconditioning=None):
        self.X, self.y, self.R, self.N, self.n, self.step = X, y, R, N, n, step
        self.mean_preconditioning = mean_preconditioning
        self.noise_std = noise_std[:, None]
        self.lr_means, self.lr_scales = lr_means[:, None], lr_scales[:, None]
        self.beta_scales = beta_scales[:, None]
        self.init_scale = init_scale

    def draws(self, generators, size, n_mc_samples, sampling_rate):
        """Every run's next ``size`` steps of random numbers, each from its own generator
        in :func:`run_dpvi_full_rank`'s order: (eps, noise, rows, counts) with ``eps``
        None when the step takes exact expectations (the draws are still made, so
        that both kinds of gradient see the same subsamples and noise), ``rows``
        (size, R, width) the runs' subsamples as indices into the stacked data (each
        run's padding points at its own first row) and ``counts`` (size, R) their sizes.

        The index block is written run by run into one int32 array (int64 beyond 2^31
        stacked rows): 64 runs of 20,000 rows take 300 MB a block, where stacking the
        runs' own blocks took 2.8 GB in one worker."""
        d = full_rank_size(self.n)
        small = torch.int32 if self.R * self.N < 2**31 else torch.int64
        rows = None
        eps, noise, counts = [], [], []
        draw_eps = not self.step.closed_form
        for r, gen in enumerate(generators):
            eps.append(_centred_normal((size, n_mc_samples, self.n), gen, "cpu"))
            index, count = _poisson_block(self.N, sampling_rate, size, gen, "cpu")
            noise.append(torch.randn((size, d), generator=gen, dtype=torch.float64))
            width = max(index.shape[1], 1)
            if rows is None or width > rows.shape[2]:  # a rare longer row widens it
                wider = torch.zeros((size, self.R, width), dtype=small)
                if rows is not None:
                    wider[:, :, :rows.shape[2]] = rows
                    for earlier in range(r):  # their padding: their own first row
                        wider[:, earlier, rows.shape[2]:] = earlier * self.N
                rows = wider
            torch.add(index, r * self.N, out=rows[:, r, :index.shape[1]])
            rows[:, r, index.shape[1]:] = r * self.N
            counts.append(count)
        eps = torch.stack(eps, 1) if draw_eps else None
        return eps, torch.stack(noise, 1), rows, torch.stack(counts, 1)

    def descend(self, generators, sampling_rate, n_steps, burn_in, n_mc_samples, verbose):
        """All the steps; returns the window's sums and each run's clipped fractions."""
        R, n, step = self.R, self.n, self.step
        d = full_rank_size(n)
        m = torch.zeros(R, n, dtype=torch.float64)
        rho = torch.full((R, n), math.log(math.expm1(self.init_scale)), dtype=torch.float64)
        U = torch.zeros(R, d - 2 * n, dtype=torch.float64)
        sums = _WindowSums(R, n, d, burn_in, n_steps)
        clipped = torch.zeros(2, R, dtype=torch.float64)
        seen = torch.zeros(R, dtype=torch.float64)
        bar = P = None
        if verbose:
            from tqdm.auto import tqdm
            bar = tqdm(total=n_steps, desc="DP-SGD (full rank)" + (f" x {R}" if R > 1 else ""),
                       unit="step", mininterval=0.5)
        block = _block_steps(self.N, sampling_rate, n_steps)
        for start in range(0, n_steps, block):
            size = min(block, n_steps - start)
            eps, noise, rows, counts = self.draws(generators, size, n_mc_samples,
                                                  sampling_rate)
            widest, narrowest = counts.amax(1).tolist(), counts.amin(1).tolist()
            for k in range(size):
                width = max(widest[k], 1)
                at = rows[k, :, :width].reshape(-1)
                Xb = self.X.index_select(0, at).reshape(R, width, n)
                yb = self.y.index_select(0, at).reshape(R, width)
                # all of a step's rows real (one run): no weights
                w = None if narrowest[k] == width else \
                    (torch.arange(width) < counts[k, :, None]).to(torch.float64)
                factors = step.factors(rho, U)
                if self.mean_preconditioning is not None \
                        and (start + k) % _PRECONDITION_EVERY == 0:
                    P = covariance_preconditioner(factors[2], self.mean_preconditioning)
                sum_m, sum_rho, sum_u, n_clipped = step(m, rho, factors,
                                                      None if eps is None else eps[k], Xb, yb, w)
                if n_clipped is not None:
                    clipped += torch.stack(n_clipped)
                    seen += counts[k]
                z = self.noise_std * noise[k]
                g_m = sum_m + z[:, :n]
                g_rho = sum_rho + z[:, n:2 * n] / self.beta_scales
                g_u = sum_u + z[:, 2 * n:] / self.beta_scales
                if start + k >= burn_in:
                    sums.add(start + k, m, rho, U, g_m, factors)
                if P is None:
                    m = m - self.lr_means * g_m
                else:
                    m = m - self.lr_means * (P @ g_m[..., None]).squeeze(-1)
                rho = rho - self.lr_scales * g_rho
                U = U - self.lr_scales * g_u
            if bar is not None:
                bar.update(size)
        if bar is not None:
            bar.close()
        sums.last = torch.cat([m, rho, U], -1)
        fractions = (clipped / torch.clamp(seen, min=1.0)).T.tolist()
        return sums, [{"means": f[0], "scales": f[1]} for f in fractions]
