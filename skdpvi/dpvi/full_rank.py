"""DP-SGD on a full-rank Gaussian variational family (logistic regression).

The mean-field engine (:func:`~skdpvi.dpvi.run_dpvi`) releases the curvature's
diagonal through the scales' gradients, and its correlations only through the
wander's covariance, which a window of a few dozen relaxations reads with a
Marchenko-Pastur spread of 2-5 (results pages, "A second set of hold-outs"). Here
``q(theta) = N(m, L L^T)`` with

    L = diag(softplus(rho)) (I + U),   U strictly lower triangular,

so the gradients of U release the correlations too: at the optimum
``(L L^T)^-1 = E_q[H]``, the curvature the posterior needs
(:func:`~skdpvi.noise_aware.full_rank_posterior`). phi = (m, rho, U) with U's
``n (n - 1) / 2`` entries in the row-major order of ``numpy.tril_indices(n, -1)``.

Each step is the mean-field engine's, on the larger phi: a Poisson subsample
(:func:`~skdpvi.dpvi.sampling._poisson_block`), centred Monte Carlo draws shared by
the batch (or, with ``elbo_gradients="closed_form"``, the exact expectations they
estimate), per-example gradients of the negative ELBO (the prior and entropy terms
divided by N, as in :mod:`~skdpvi.dpvi.gradients`) multiplied by the preconditioner
beta, clipped to norm C, summed, ``N(0, (sigma C)^2 I)`` noise added, divided by beta.
No (B, n^2) block is formed: the U rows' norms and clipped sum come from products of
the batch with n x n matrices.

The step's preconditioning of the rho and U blocks and its clipping of the means' and
the scales' blocks apart are explained (and their measurements given) in
:mod:`skdpvi.dpvi.full_rank_step`; the loop over the steps is in
:mod:`skdpvi.dpvi.full_rank_loop`. :func:`run_dpvi_full_rank_batched` runs several
data sets in lockstep (simulation studies), each run exactly the single run of its
seed.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..utils.validation import is_positive_real
from .full_rank_loop import _LockstepRuns, full_rank_size
from .full_rank_step import (DEFAULT_MEAN_CLIP_SHARE, DEFAULT_SCALE_NOISE, _FullRankStep,
                             full_rank_scale_preconditioner)
from .sampling import _generator
from .statistics import TraceStatistics
from .threads import _limit_threads, _resolve_threads
from .validation import _check_settings, _check_start

__all__ = ["FullRankRelease", "run_dpvi_full_rank", "run_dpvi_full_rank_batched"]

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
    half_moments : tuple of two dicts or None
        ``scale_moments``, ``diagonal_moments`` and ``entropy`` over each half of the
        window: two estimates of the curvature, whose difference measures its noise
        (:func:`~skdpvi.noise_aware.full_rank_curvature`).
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
    half_moments: tuple = None

    @property
    def wander_covariance(self):
        """The means' covariance over the window (its trend included)."""
        mean = self.mean_phi[:self.n_params]
        return self.mean_outer - np.outer(mean, mean)

    @property
    def noise_std(self):
        """Standard deviation of the DP noise in each coordinate of the released gradient."""
        return self.noise_multiplier * self.clip_norm / self.preconditioner


def run_dpvi_full_rank(X, y, *, prior_scale, noise_multiplier, clip_norm, sampling_rate,
                       n_steps, burn_in, learning_rate, preconditioner,
                       scale_noise=DEFAULT_SCALE_NOISE, scale_cap=False,
                       mean_clip_share=DEFAULT_MEAN_CLIP_SHARE, n_mc_samples=10,
                       elbo_gradients="monte_carlo", init_scale=0.01, mean_preconditioning=None,
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
        Monte Carlo draws per step, shared by the batch ("monte_carlo" only).
    elbo_gradients : {"monte_carlo", "closed_form"}, default="monte_carlo"
        Per-example ELBO gradients averaged over ``n_mc_samples`` reparameterised
        draws, or their exact expectations over q ("closed_form": a row's logit is
        Gaussian under q; Gauss-Hermite quadrature and Stein's lemma). The mechanism
        is the same; without the draws' noise a row's (rho, U) gradient is bounded by
        ``|L^T x| / 4`` instead of growing with its residual, so far fewer scale rows
        clip.
    init_scale : float, default=0.01
        softplus(rho) at the start (U starts at 0); finite and > 0. Where the scales
        have not settled, the curvature read off the window keeps the side they came
        from: from 0.01 it reads too stiff along the likelihood's flattest direction
        (too narrow on uncentred 0/1 features), from the prior's scale too soft (far
        too wide on correlated designs); results pages, "Uncentred 0/1 features, where
        the full-rank scales start, and the error's theta-dependence from a model".
    mean_preconditioning : float >= 1 or None, default=None
        Step the means by ``P g`` instead of ``g``, with P the current ``L L^T`` over
        its smallest eigenvalue, its eigenvalues capped at this value (updated every
        64 steps from the iterate; ``full_rank_loop.covariance_preconditioner``): a
        natural-gradient step that relaxes the flat directions faster (the release's
        ``learning_rate`` stays the plain step's). Measured,
        not the default: with coefficients from a prior of scale 2 it shortened the
        trace's lag behind the optimum along the coefficients but did not calibrate
        the posterior (results pages, "Wide priors: the trace's lag is the step's, not
        the run's").
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
    seed = int(np.random.SeedSequence(random_state).generate_state(1)[0]) \
        if random_state is None else int(random_state)
    out = run_dpvi_full_rank_batched(
        [(X, y)], random_states=[seed], prior_scale=prior_scale,
        noise_multiplier=noise_multiplier, clip_norm=clip_norm, sampling_rate=sampling_rate,
        n_steps=n_steps, burn_in=burn_in, learning_rate=learning_rate,
        preconditioner=preconditioner, scale_noise=scale_noise, scale_cap=scale_cap,
        mean_clip_share=mean_clip_share, n_mc_samples=n_mc_samples,
        elbo_gradients=elbo_gradients, init_scale=init_scale,
        mean_preconditioning=mean_preconditioning, verbose=verbose, n_threads=n_threads,
        return_clipped=return_clipped)
    return (out[0][0], out[1][0]) if return_clipped else out[0]


def run_dpvi_full_rank_batched(datasets, *, random_states, prior_scale, noise_multiplier,
                               clip_norm, sampling_rate, n_steps, burn_in, learning_rate,
                               preconditioner, scale_noise=DEFAULT_SCALE_NOISE,
                               scale_cap=False, mean_clip_share=DEFAULT_MEAN_CLIP_SHARE,
                               n_mc_samples=10, elbo_gradients="monte_carlo", init_scale=0.01,
                               mean_preconditioning=None, verbose=0, n_threads=1,
                               return_clipped=False):
    """:func:`run_dpvi_full_rank` on several data sets at once, in lockstep.

    For simulation studies: on small problems a step is bound by the fixed cost of
    each tensor operation, so R runs side by side, every operation vectorised over
    the runs, cost little more than one. Run r draws its subsamples, Monte Carlo
    draws and noise from its own generator, seeded with ``random_states[r]``, in the
    order of :func:`run_dpvi_full_rank`, so its release equals that single run's up
    to floating-point rounding (tested), and so does its privacy guarantee (for its
    own data set). The batches of the runs are padded to the largest; padding rows
    carry weight 0.

    Parameters
    ----------
    datasets : sequence of (X, y)
        R data sets as :func:`run_dpvi_full_rank`'s ``X`` and ``y``, all of the same
        shape.
    random_states : sequence of int
        One seed per data set.
    clip_norm, learning_rate, preconditioner : float or sequence of float
        One value for every run, or one per run (each run's own mechanism: a private
        clipping norm differs between data sets, and the step and preconditioner
        follow it).
    prior_scale, noise_multiplier, sampling_rate, n_steps, burn_in, scale_noise, \
scale_cap, mean_clip_share, n_mc_samples, elbo_gradients, init_scale, \
mean_preconditioning, verbose, n_threads, return_clipped
        As in :func:`run_dpvi_full_rank`, shared by all runs.

    Returns
    -------
    list of FullRankRelease
        One per data set, in order (with ``return_clipped``: and the list of the
        runs' clipped fractions).
    """
    datasets = list(datasets)
    seeds = [int(s) for s in random_states]
    if not datasets:
        raise ValueError("datasets must contain at least one data set.")
    if len(seeds) != len(datasets):
        raise ValueError(f"random_states must give one seed per data set: {len(seeds)} "
                         f"seeds for {len(datasets)} data sets.")
    R = len(datasets)
    clip, lam, beta_mf = (_per_run(name, value, R) for name, value in (
        ("clip_norm", clip_norm), ("learning_rate", learning_rate),
        ("preconditioner", preconditioner)))
    for c in clip:
        _check_settings(noise_multiplier=noise_multiplier, clip_norm=c,
                        sampling_rate=sampling_rate, n_steps=n_steps, burn_in=burn_in,
                        n_mc_samples=n_mc_samples)
    if not 0 < scale_noise <= 1:
        raise ValueError(f"scale_noise must be in (0, 1], got {scale_noise!r}.")
    init_scale = _check_start(init_scale)[0]
    if elbo_gradients not in ("monte_carlo", "closed_form"):
        raise ValueError("elbo_gradients must be 'monte_carlo' or 'closed_form', got "
                         f"{elbo_gradients!r}.")
    if mean_preconditioning is not None and not (
            is_positive_real(mean_preconditioning) and mean_preconditioning >= 1):
        raise ValueError("mean_preconditioning must be None or a number >= 1, got "
                         f"{mean_preconditioning!r}.")
    if mean_clip_share is not None and not 0 < mean_clip_share < 1:
        raise ValueError(f"mean_clip_share must be in (0, 1) or None, got {mean_clip_share!r}.")
    Xs = [np.asarray(X, dtype=np.float64) for X, _ in datasets]
    ys = [np.asarray(y, dtype=np.float64) for _, y in datasets]
    shapes = {X.shape for X in Xs}
    if len(shapes) != 1 or any(y.shape != (X.shape[0],) for X, y in zip(Xs, ys)):
        raise ValueError(f"All data sets must have the same shape (X (N, n), y (N,)); got "
                         f"{sorted(shapes)}.")
    N, n = Xs[0].shape
    share = None if mean_clip_share is None else float(mean_clip_share)
    scale_bound = clip if share is None else clip * math.sqrt(1.0 - share**2)
    beta_s = np.array([full_rank_scale_preconditioner(b, c, N, n, scale_noise, scale_cap)
                       for b, c in zip(beta_mf, scale_bound)])
    step = _FullRankStep(n, N, prior_scale, torch.as_tensor(beta_s), torch.as_tensor(beta_s),
                         torch.as_tensor(clip), share,
                         closed_form=elbo_gradients == "closed_form")
    step.count_clipped = bool(return_clipped)
    run = _LockstepRuns(
        torch.as_tensor(np.concatenate(Xs)), torch.as_tensor(np.concatenate(ys)), R, N, n,
        step,
        noise_std=float(noise_multiplier) * torch.as_tensor(clip),
        lr_means=torch.as_tensor(lam), lr_scales=torch.as_tensor(lam * beta_mf),
        beta_scales=torch.as_tensor(beta_s), init_scale=init_scale,
        mean_preconditioning=mean_preconditioning)
    with _limit_threads(_resolve_threads(n_threads)):
        sums, clipped = run.descend([_generator(s, "cpu") for s in seeds], sampling_rate,
                                    n_steps, burn_in, n_mc_samples, verbose)
    d = full_rank_size(n)
    releases = []
    for r in range(R):
        lr = np.r_[np.full(n, lam[r]), np.full(d - n, lam[r] * beta_mf[r])]
        beta = np.r_[np.ones(n), np.full(d - n, beta_s[r])]
        releases.append(FullRankRelease(
            **sums.averages(r), n_params=n, learning_rate=lr, preconditioner=beta,
            n_steps=int(n_steps), burn_in=int(burn_in),
            noise_multiplier=float(noise_multiplier), clip_norm=float(clip[r]),
            sampling_rate=float(sampling_rate)))
    if return_clipped:
        return releases, clipped
    return releases


def _per_run(name, value, n_runs):
    """``value`` as one float per run (a float repeated, or a sequence of n_runs)."""
    values = np.broadcast_to(np.asarray(value, dtype=np.float64), (n_runs,)) \
        if np.ndim(value) == 0 else np.asarray(value, dtype=np.float64)
    if values.shape != (n_runs,):
        raise ValueError(f"{name} must be a number or one number per data set ({n_runs}), "
                         f"got {value!r}.")
    return values.copy()
