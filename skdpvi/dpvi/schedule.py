"""Step sizes and starting point of a run, fixed before its first step.

Coordinate i of phi = (mu, rho) steps by ``lambda * beta_i`` times the released
gradient: lambda is the learning rate (by default the paper's heuristic A58) and beta
the preconditioner, which also scales the per-example gradients before clipping.
"""

import math
from dataclasses import dataclass

import numpy as np

from .mechanism import group_clip_norms
from .validation import _check_count, _check_positive, _check_start

__all__ = ["heuristic_learning_rate"]


def heuristic_learning_rate(noise_multiplier, clip_norm, n_steps, dim, scale=None):
    """The paper's learning-rate heuristic (A58).

    ``sqrt(2) * scale / (noise_multiplier * clip_norm * sqrt(n_steps * dim))`` with
    ``scale`` (lambda_c) defaulting to 1, the paper's default. Its alternative
    ``sqrt(dim / 2)`` reduces the rate to ``1 / (noise_multiplier * clip_norm * sqrt(n_steps))``.

    Parameters
    ----------
    noise_multiplier, clip_norm : float
        sigma and C of the run.
    n_steps : int
        T.
    dim : int
        d = 2 * n_params, the length of phi.
    scale : float, optional
        lambda_c (default 1).

    Returns
    -------
    float

    Examples
    --------
    >>> heuristic_learning_rate(10.0, 2.0, 10_000, 8, scale=2.0)
    0.0005
    """
    if scale is None:
        scale = 1.0
    for name, value in (("noise_multiplier", noise_multiplier), ("clip_norm", clip_norm),
                        ("scale", scale)):
        _check_positive(name, value)
    _check_count("n_steps", n_steps)
    _check_count("dim", dim)
    return math.sqrt(2) * scale / (noise_multiplier * clip_norm * math.sqrt(n_steps * dim))


@dataclass
class _Schedule:
    """The step sizes and starting point of a run, fixed before it starts."""

    beta: np.ndarray  # preconditioner (d,)
    lam: float  # learning rate lambda
    phi0: np.ndarray  # initial (mu, rho)
    burn_in_scale: np.ndarray = None  # step multiplier before burn-in (d,)
    recording_scale: np.ndarray = None  # step multiplier from burn-in on (d,)

    @property
    def lr(self):
        """The step of each coordinate from burn-in on (what the release was recorded at)."""
        return self.lam * self.beta * (1.0 if self.recording_scale is None
                                       else self.recording_scale)

    @property
    def burn_in_lr(self):
        """The step of each coordinate before burn-in."""
        return self.lam * self.beta * (1.0 if self.burn_in_scale is None else self.burn_in_scale)


def _step_scales(step_scales, d):
    """``step_scales`` of :func:`run_dpvi` as two arrays of shape (d,), or (None, None)."""
    if step_scales is None:
        return None, None
    if len(step_scales) != 2:
        raise ValueError("step_scales must be a pair (before burn-in, from burn-in on).")
    out = []
    for scale in step_scales:
        scale = np.asarray(scale, dtype=float)
        if scale.ndim > 1 or scale.size not in (1, d):
            raise ValueError(f"step_scales must hold floats or arrays of shape ({d},), "
                             f"got shape {scale.shape}.")
        scale = np.broadcast_to(scale.reshape(-1), (d,)).copy()
        if not np.all(np.isfinite(scale) & (scale > 0)):
            raise ValueError(f"step_scales must be finite and > 0, got {scale}.")
        out.append(scale)
    return tuple(out)


def _schedule(model, *, noise_multiplier, clip_norm, n_steps, learning_rate,
              learning_rate_scale, preconditioner, init_mean, init_scale, step_scales=None):
    """The :class:`_Schedule` of a run with these settings (see :func:`run_dpvi`)."""
    n = model.n_params
    d = 2 * n
    beta = np.ones(d)
    if preconditioner is not None:
        pre = np.asarray(preconditioner, dtype=float)
        if pre.ndim == 0:
            beta[n:] = float(pre)
        else:
            beta = pre.reshape(d).copy()
    if learning_rate is None:
        lam = heuristic_learning_rate(noise_multiplier, clip_norm, n_steps, d, learning_rate_scale)
    else:
        lam = float(learning_rate)
    init_scale, init_mean = _check_start(init_scale, init_mean, n)
    if init_mean is None:
        init_mean = model.init_mean() if hasattr(model, "init_mean") else np.zeros(n)
    rho0 = float(np.log(np.expm1(init_scale)))
    phi0 = np.concatenate([np.asarray(init_mean, float).reshape(n), np.full(n, rho0)])
    before, after = _step_scales(step_scales, d)
    return _Schedule(beta=beta, lam=lam, phi0=phi0, burn_in_scale=before, recording_scale=after)


def _default_preconditioning(learning_rate, n_steps, model=None, clip_norm=None,
                             n_examples=None):
    """beta = min(1 / (lambda sqrt(T)), C_scales N / (5 sqrt(n_params))).

    The first term makes the scale parameters step by 1 / sqrt(T): coordinate i
    relaxes at about lambda beta_i kappa a_i per step and the scale coordinates have
    curvature a ~ 2, so they relax in ~T / 20 steps at any budget (a fixed beta left
    them random-walking at small epsilon).

    The cap keeps their preconditioned per-example gradients inside their clipping
    budget C_scales (all of C, or the scales' group of ``model.clip_shares``): with
    the engine's centred Monte Carlo draws, the scale gradient of one example is
    about ``1.3 beta / N`` per coordinate near the optimum (sigmoid(rho) d l_i / ds is
    O(1 / N) for every model), so the cap puts their typical norm near C_scales / 4.
    Without it, beta grows like sigma and at epsilon = 0.1 the scale gradients alone
    clipped 68 % of the rows of the 10-D regression at the optimum (benchmarks:
    0.8 % with the cap). N is public by the engine's assumptions.
    """
    beta = 1.0 / (learning_rate * math.sqrt(n_steps))
    if model is None or clip_norm is None or n_examples is None:
        return beta
    shares = getattr(model, "clip_shares", None)
    budget = clip_norm if shares is None else group_clip_norms(clip_norm, shares)[2]
    return min(beta, budget * n_examples / (5.0 * math.sqrt(model.n_params)))
