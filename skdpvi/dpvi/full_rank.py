"""DP-SGD on a full-rank Gaussian variational family (logistic regression).

The mean-field engine (:func:`~skdpvi.dpvi.run_dpvi`) releases the curvature's
diagonal through the scales' gradients, and its correlations only through the
wander's covariance, which a window of a few dozen relaxations reads with a
Marchenko-Pastur spread of 2-5 (results page, "A second set of hold-outs"). Here
``q(theta) = N(m, L L^T)`` with

    L = diag(softplus(rho)) (I + U),   U strictly lower triangular,

so the gradients of U release the correlations too: at the optimum
``(L L^T)^-1 = E_q[H]``, the curvature the posterior needs
(:func:`~skdpvi.noise_aware.full_rank_posterior`). phi = (m, rho, U) with U's
``n (n - 1) / 2`` entries in the row-major order of ``numpy.tril_indices(n, -1)``.

Each step is the mean-field engine's, on the larger phi: a Poisson subsample
(:func:`~skdpvi.dpvi.sampling._poisson_block`), centred Monte Carlo draws shared by
the batch, per-example gradients of the negative ELBO (the prior and entropy terms
divided by N, as in :mod:`~skdpvi.dpvi.gradients`) multiplied by the preconditioner
beta, clipped to norm C, summed, ``N(0, (sigma C)^2 I)`` noise added, divided by beta.
No (B, n^2) block is formed: the U rows' norms and clipped sum come from products of
the batch with n x n matrices.

The step's preconditioning of the rho and U blocks and its clipping of the means' and
the scales' blocks apart are explained (and their measurements given) in
:mod:`skdpvi.dpvi.full_rank_step`.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from .full_rank_step import (DEFAULT_MEAN_CLIP_SHARE, DEFAULT_SCALE_NOISE, _FullRankStep,
                             full_rank_scale_preconditioner)
from .sampling import _block_steps, _centred_normal, _generator, _poisson_block
from .statistics import TraceStatistics
from .threads import _limit_threads, _resolve_threads
from .validation import _check_settings

__all__ = ["FullRankRelease", "run_dpvi_full_rank"]

@dataclass
class FullRankRelease:
    """What a full-rank DPVI run releases, all of it covered by the privacy guarantee.

    Window averages (the steps after burn-in) of functions of the released iterates
    and gradients; nothing else of the data.

    Attributes
    ----------
    phi : ndarray of shape (d,)
        The last iterate (m, rho, U), ``d = 2 n + n (n - 1) / 2``.
    mean_phi : ndarray of shape (d,)
        The window's mean of phi.
    mean_gradient : ndarray of shape (n,)
        The window's mean of the released gradient in m.
    mean_outer : ndarray of shape (n, n)
        The window's mean of ``m m^T`` (the means' wander covariance with
        ``mean_phi``).
    scale_moments : ndarray of shape (n, n, n)
        ``E[s_j L_lk]`` at ``[j, l, k]``
        (:func:`~skdpvi.noise_aware.full_rank_curvature` reads these three).
    diagonal_moments : ndarray of shape (n, n)
        ``E[sigmoid(rho_j) (L A^T)_lj]`` at ``[l, j]``.
    entropy : ndarray of shape (n,)
        ``E[sigmoid(rho_j) / s_j]``.
    n_params : int
        n.
    count : int
        Steps in the window.
    noise_multiplier, clip_norm, sampling_rate : float
    learning_rate : ndarray of shape (d,)
        The step of each coordinate.
    preconditioner : ndarray of shape (d,)
        beta.
    n_steps, burn_in : int
    mean_stats : TraceStatistics or None
        The means' released pairs ``(m_t, g_t)`` summed per coordinate over the
        window and its halves (with the cross sums): what
        :func:`~skdpvi.noise_aware.split_window_test` reads.
    """

    phi: np.ndarray
    mean_phi: np.ndarray
    mean_gradient: np.ndarray
    mean_outer: np.ndarray
    scale_moments: np.ndarray
    diagonal_moments: np.ndarray
    entropy: np.ndarray
    n_params: int
    count: int
    noise_multiplier: float
    clip_norm: float
    sampling_rate: float
    learning_rate: np.ndarray
    preconditioner: np.ndarray
    n_steps: int
    burn_in: int
    mean_stats: TraceStatistics = None

    @property
    def wander_covariance(self):
        """The means' covariance over the window (its trend included)."""
        mean = self.mean_phi[:self.n_params]
        return self.mean_outer - np.outer(mean, mean)

    @property
    def noise_std(self):
        """Standard deviation of the DP noise in each coordinate of the released gradient."""
        return self.noise_multiplier * self.clip_norm / self.preconditioner


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


def run_dpvi_full_rank(X, y, *, prior_scale, noise_multiplier, clip_norm, sampling_rate,
                       n_steps, burn_in, learning_rate, preconditioner,
                       scale_noise=DEFAULT_SCALE_NOISE, scale_cap=False,
                       mean_clip_share=DEFAULT_MEAN_CLIP_SHARE, n_mc_samples=10, init_scale=0.01,
                       random_state=None, verbose=0, n_threads=1, return_clipped=False):
    """DP-SGD on the negative ELBO of a full-rank Gaussian, for logistic regression.

    Parameters
    ----------
    X : array-like of shape (N, n)
        The design, the intercept's column of ones included if the model has one.
    y : array-like of shape (N,)
        0/1 targets.
    prior_scale : float
        The prior N(0, prior_scale^2) of every parameter.
    noise_multiplier, clip_norm, sampling_rate : float
        sigma, C and kappa of the mechanism (from the accountant).
    n_steps, burn_in : int
    learning_rate : float
        lambda: the means step by lambda, rho and U by ``lambda * preconditioner``.
    preconditioner : float
        The mean-field engine's beta of the scales; rho and U are preconditioned by
        ``preconditioner / scale_noise``.
    scale_noise : float, default=0.25
        The rho and U blocks' DP noise relative to the mean-field engine's.
    scale_cap : bool, default=False
        Cap their preconditioner so that their per-example gradients stay a fixed
        share of their clipping bound whatever N (measured, not the default;
        :func:`~skdpvi.dpvi.full_rank_step.full_rank_scale_preconditioner`).
    mean_clip_share : float in (0, 1) or None, default=0.8
        Clip each row's means' block to ``mean_clip_share * C`` and its (rho, U)
        block to ``sqrt(1 - mean_clip_share^2) C`` separately (so that a large scale
        gradient does not shrink the row's gradient in the means); None clips the
        row as a whole to C. Either way a row's norm is at most C.
    n_mc_samples : int, default=10
    init_scale : float, default=0.01
        softplus(rho) at the start (U starts at 0).
    random_state : int or None
    verbose : int, default=0
        A progress bar when > 0.
    n_threads : int or None, default=1
        torch's threads during the run (as :func:`~skdpvi.dpvi.run_dpvi`).
    return_clipped : bool, default=False
        Also return the fractions of rows clipped in the means' and in the scales'
        block, as a dict (computed without noise: for tests and benchmarks only,
        never to be released).

    Returns
    -------
    FullRankRelease
    """
    _check_settings(noise_multiplier=noise_multiplier, clip_norm=clip_norm,
                    sampling_rate=sampling_rate, n_steps=n_steps, burn_in=burn_in,
                    n_mc_samples=n_mc_samples)
    X = torch.as_tensor(np.asarray(X, dtype=np.float64))
    y = torch.as_tensor(np.asarray(y, dtype=np.float64))
    N, n = X.shape
    d = full_rank_size(n)
    if not 0 < scale_noise <= 1:
        raise ValueError(f"scale_noise must be in (0, 1], got {scale_noise!r}.")
    seed = int(np.random.SeedSequence(random_state).generate_state(1)[0]) \
        if random_state is None else int(random_state)
    generator = _generator(seed, "cpu")
    step_scales = float(learning_rate) * float(preconditioner)
    if mean_clip_share is not None and not 0 < mean_clip_share < 1:
        raise ValueError(f"mean_clip_share must be in (0, 1) or None, got {mean_clip_share!r}.")
    scale_bound = float(clip_norm) if mean_clip_share is None \
        else float(clip_norm) * math.sqrt(1.0 - float(mean_clip_share) ** 2)
    beta_scales = full_rank_scale_preconditioner(preconditioner, scale_bound, N, n,
                                                 scale_noise, scale_cap)
    lr = np.r_[np.full(n, float(learning_rate)), np.full(d - n, step_scales)]
    beta = np.r_[np.ones(n), np.full(d - n, beta_scales)]
    noise_std = float(noise_multiplier) * float(clip_norm)
    step = _FullRankStep(n, N, prior_scale, beta_scales, beta_scales, float(clip_norm),
                         mean_clip_share)
    m = torch.zeros(n, dtype=torch.float64)
    rho = torch.full((n,), math.log(math.expm1(init_scale)), dtype=torch.float64)
    U = torch.zeros(d - 2 * n, dtype=torch.float64)
    sum_phi = torch.zeros(d, dtype=torch.float64)
    sum_mm = torch.zeros(n, n, dtype=torch.float64)
    # the means' (x, x^2, g, g^2, g x) per half of the window, x = m - m at burn-in
    half_sums = torch.zeros(2, 5, n, dtype=torch.float64)
    mid = burn_in + (n_steps - burn_in) // 2
    shift = None
    sum_sL = torch.zeros(n, n * n, dtype=torch.float64)
    sum_diag = torch.zeros(n, n, dtype=torch.float64)
    sum_entropy = torch.zeros(n, dtype=torch.float64)
    clipped = np.zeros(2)
    seen = 0.0
    bar = None
    if verbose:
        from tqdm.auto import tqdm
        bar = tqdm(total=n_steps, desc="DP-SGD (full rank)", unit="step", mininterval=0.5)
    block = _block_steps(N, sampling_rate, n_steps)
    with _limit_threads(_resolve_threads(n_threads)):
        for start in range(0, n_steps, block):
            size = min(block, n_steps - start)
            eps_block = _centred_normal((size, n_mc_samples, n), generator, "cpu")
            index, counts = _poisson_block(N, sampling_rate, size, generator, "cpu")
            noise_block = torch.randn((size, d), generator=generator, dtype=torch.float64)
            counts = counts.tolist()
            for k in range(size):
                rows = index[k, :counts[k]].long()
                factors = step.factors(rho, U)
                sum_m, sum_rho, sum_u, n_clipped = step(m, rho, factors, eps_block[k],
                                                        X[rows], y[rows])
                clipped += n_clipped
                seen += counts[k]
                noise = noise_std * noise_block[k]
                g_m = sum_m + noise[:n]
                g_rho = sum_rho + noise[n:2 * n] / beta_scales
                g_u = sum_u + noise[2 * n:] / beta_scales
                if start + k >= burn_in:
                    sum_phi[:n] += m
                    sum_phi[n:2 * n] += rho
                    sum_phi[2 * n:] += U
                    sum_mm.addr_(m, m)
                    if shift is None:
                        shift = m.clone()
                    x = m - shift
                    half_sums[int(start + k >= mid)] += torch.stack(
                        [x, x * x, g_m, g_m * g_m, g_m * x])
                    s, A, L, dsig = factors
                    sum_sL.addr_(s, L.reshape(-1))
                    sum_diag.add_((L @ A.T) * dsig)
                    sum_entropy.add_(dsig / s)
                m = m - learning_rate * g_m
                rho = rho - step_scales * g_rho
                U = U - step_scales * g_u
            if bar is not None:
                bar.update(size)
    if bar is not None:
        bar.close()
    count = n_steps - burn_in
    release = FullRankRelease(
        phi=torch.cat([m, rho, U]).numpy(), mean_phi=(sum_phi / count).numpy(),
        mean_gradient=(half_sums[:, 2].sum(0) / count).numpy(), mean_outer=(sum_mm / count).numpy(),
        scale_moments=(sum_sL / count).reshape(n, n, n).numpy(),
        diagonal_moments=(sum_diag / count).numpy(), entropy=(sum_entropy / count).numpy(),
        n_params=n, count=count,
        noise_multiplier=float(noise_multiplier), clip_norm=float(clip_norm),
        sampling_rate=float(sampling_rate), learning_rate=lr, preconditioner=beta,
        n_steps=int(n_steps), burn_in=int(burn_in),
        mean_stats=_mean_statistics(half_sums.numpy(), shift.numpy(), sum_mm.numpy(),
                                    (sum_phi[:n] / count).numpy(), count, mid - burn_in))
    if return_clipped:
        fractions = clipped / max(seen, 1.0)
        return release, {"means": float(fractions[0]), "scales": float(fractions[1])}
    return release
