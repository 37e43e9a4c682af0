"""The Gaussian mechanism of DP-SGD: clip every per-example gradient, sum, add noise.

Per-example gradients come in multiplied by the preconditioner beta; every row is
scaled to norm at most C, the rows are summed, N(0, (sigma C)^2 I) noise is added and
the sum is divided by beta again: the released noisy gradient ``g_tilde`` (paper A59).
:func:`glm_clip_and_sum` is the same clipped sum for a GLM, computed without forming
the per-example gradients of the weights.
"""

import torch
import torch.nn.functional as F

from .gradients import _regulariser

__all__ = ["clip_and_sum", "glm_clip_and_sum", "privatize", "release"]


def _clip_factors(norms, clip_norm, weights):
    """min(1, C / norm) of every row, times its weight (if any)."""
    factors = torch.clamp(clip_norm / (norms + 1e-12), max=1.0)
    if weights is not None:
        factors = factors * weights
    return factors


def clip_and_sum(per_example, clip_norm, weights=None):
    """Scale every row to norm at most ``clip_norm`` and sum the rows.

    Parameters
    ----------
    per_example : torch.Tensor of shape (B, d), or a tuple of such blocks
        Blocks (e.g. the mu and rho halves) are treated as one row of their
        concatenation.
    clip_norm : float
    weights : torch.Tensor of shape (B,), optional
        Multiplies every clipped row; 0 drops the padding rows of the batched engine.

    Returns
    -------
    clipped_sum : torch.Tensor of shape (d,), float64
    norms : torch.Tensor of shape (B,)
        Norms of the rows before clipping (private: for tests and diagnostics).
    """
    blocks = per_example if isinstance(per_example, tuple) else (per_example,)
    norms = torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(blk, dim=1) for blk in blocks], 1), dim=1
    )
    factors = _clip_factors(norms, clip_norm, weights)
    return torch.cat([factors @ blk for blk in blocks]).to(torch.float64), norms


def glm_clip_and_sum(model, phi, eps, batch, n_examples, preconditioner, clip_norm,
                     row_sq_norms, weights=None):
    """:func:`clip_and_sum` of the preconditioned per-example gradients of a GLM.

    Gives the same result as ``clip_and_sum(per_example_gradients(...), clip_norm)``
    for a :class:`~skdpvi.models.GLMModel`, without materialising the mean block:
    with ``a = beta_mu * reg_mu`` (the example-independent part), the weights part of
    row i is ``a - r_i * beta_w * x_i``, whose squared norm is
    ``|a|^2 - 2 r_i x_i . (beta_w a) + r_i^2 |beta_w x_i|^2``, and whose clipped sum
    is ``sum(f) a - beta_w * X^T (f r)``. Only the scale block, ``r_eps * x_i``, is
    formed. Everything runs in the data's precision (float32 in the engine).

    Parameters
    ----------
    phi, eps, preconditioner : torch.Tensor
        As in :func:`per_example_gradients`, in the dtype of the data.
    row_sq_norms : torch.Tensor of shape (B,)
        ``|beta_w * x_i|^2`` of the batch rows (computed once per fit).
    weights : torch.Tensor of shape (B,), optional
        As in :func:`clip_and_sum`.

    Returns
    -------
    clipped_sum : torch.Tensor of shape (d,), float64
    norms : torch.Tensor of shape (B,)
    """
    clip = _GLMClip(model, n_examples, preconditioner, clip_norm)
    return clip(phi, eps, batch[0], batch[1], row_sq_norms, weights)


def _row_sq_norms(rows):
    """Squared norms of the rows (..., B, p) over the last axis.

    ``vector_norm`` for rows in memory order; for rows stored by column (the lockstep
    engine's products with eps come out transposed) it is 20x slower than a plain sum
    of squares, which is used there instead.
    """
    if rows.is_contiguous():
        return torch.linalg.vector_norm(rows, dim=-1).square()
    return (rows * rows).sum(-1)


def _dot(a, b):
    """Inner products over the last axis; ``torch.dot`` for vectors."""
    return torch.dot(a, b) if a.dim() == 1 else (a * b).sum(-1, keepdim=True)


def _matvec(m, v):
    """``m @ v`` for a matrix (..., B, p) and a vector (..., p)."""
    return m @ v if v.dim() == 1 else (m @ v.unsqueeze(-1)).squeeze(-1)


def _vecmat(v, m):
    """``v @ m`` for a vector (..., B) and a matrix (..., B, p)."""
    return v @ m if v.dim() == 1 else (v.unsqueeze(-2) @ m).squeeze(-2)


class _GLMClip:
    """:func:`glm_clip_and_sum` with its constants fixed once per run.

    Every argument of a call may carry lead axes (the runs of the lockstep engine):
    ``phi`` (..., d), ``eps`` (..., S, n), ``X`` (..., B, p), ``y``,
    ``row_sq_norms`` and ``weights`` (..., B). With lead axes the model's functions
    run under :func:`torch.func.vmap` (``batched=True``) unless the model says
    they broadcast over lead axes (``broadcasts_lead_axes = True``, as skdpvi's
    regression models do: 10 % faster).
    """

    def __init__(self, model, n_examples, preconditioner, clip_norm, batched=False):
        self.n, self.p = model.n_params, model.n_weights
        self.n_examples = n_examples
        self.clip_norm = clip_norm
        self.beta_mu, self.beta_rho = preconditioner[: self.n], preconditioner[self.n:]
        self.beta_w = self.beta_mu[: self.p]
        if batched and not getattr(model, "broadcasts_lead_axes", False):
            from torch.func import vmap

            self.glm_gradients = vmap(model.glm_gradients)
            self.grad_prior = vmap(model.grad_log_prior_unconstrained)
        else:
            self.glm_gradients = model.glm_gradients
            self.grad_prior = model.grad_log_prior_unconstrained

    def __call__(self, phi, eps, X, y, row_sq_norms, weights=None):
        n, p = self.n, self.p
        mu, rho = phi[..., :n], phi[..., n:]
        scale = F.softplus(rho)
        theta = torch.addcmul(mu.unsqueeze(-2), scale.unsqueeze(-2), eps)
        reg = _regulariser(self.grad_prior(theta), eps, rho, scale, self.n_examples)
        # grad_eps is linear in eps: weighting eps gives beta_rho * dscale * grad_eps directly
        weight = self.beta_rho * torch.sigmoid(rho)
        r_mean, r_eps, extra_mean, extra_eps = self.glm_gradients(
            theta, eps * weight.unsqueeze(-2), X, y)
        a, c = reg[..., :n] * self.beta_mu, reg[..., n:] * self.beta_rho
        a_w = a[..., :p]
        # in place of r_eps, which is not needed again: one block of B x p less
        scale_rows = torch.addcmul(c[..., :p].unsqueeze(-2), r_eps, X, value=-1.0, out=r_eps)
        # squared norm of the weights part, then of the scale part
        sq = torch.addcmul(_dot(a_w, a_w) - 2 * r_mean * _matvec(X, self.beta_w * a_w),
                           r_mean * r_mean, row_sq_norms)
        sq = sq + _row_sq_norms(scale_rows)
        if p < n:
            extra_rows = torch.cat([
                torch.addcmul(a[..., p:].unsqueeze(-2), self.beta_mu[p:], extra_mean,
                              value=-1.0),
                c[..., p:].unsqueeze(-2) - extra_eps], -1)
            sq = sq + (extra_rows * extra_rows).sum(-1)
        norms = torch.sqrt(torch.clamp(sq, min=0.0))
        factors = _clip_factors(norms, self.clip_norm, weights)
        total = factors.sum() if factors.dim() == 1 else factors.sum(-1, keepdim=True)
        sum_w = total * a_w - self.beta_w * _vecmat(factors * r_mean, X)
        sum_scale = _vecmat(factors, scale_rows)
        if p == n:
            return torch.cat([sum_w, sum_scale], -1).to(torch.float64), norms
        sum_extra = _vecmat(factors, extra_rows)
        k = n - p
        return torch.cat([sum_w, sum_extra[..., :k], sum_scale, sum_extra[..., k:]],
                         -1).to(torch.float64), norms


def privatize(per_example, clip_norm, noise_std, preconditioner, generator=None, noise=None):
    """Clip, sum, add Gaussian noise and undo the preconditioning (paper A59).

    Parameters
    ----------
    per_example : torch.Tensor of shape (B, d), or a tuple of such blocks
        Preconditioned per-example gradients beta * grad; blocks (e.g. the mu and
        rho halves) are treated as one row of their concatenation.
    clip_norm : float
        Every row is scaled to norm at most ``clip_norm``.
    noise_std : float
        sigma * C, the standard deviation of the noise added to the sum.
    preconditioner : torch.Tensor of shape (d,), float64
    generator : torch.Generator, optional
        Draws the standard normal noise when ``noise`` is not given.
    noise : torch.Tensor of shape (d,), float64, optional
        Pre-drawn standard normal noise (the engine draws it in blocks).

    Returns
    -------
    g_tilde : torch.Tensor of shape (d,), float64
        (sum of clipped rows + noise) / beta: the released noisy gradient.
    norms : torch.Tensor of shape (B,)
        Norms of the rows before clipping (private: for tests and diagnostics).
    """
    clipped_sum, norms = clip_and_sum(per_example, clip_norm)
    return release(clipped_sum, noise_std, preconditioner, generator, noise), norms


def release(clipped_sum, noise_std, preconditioner, generator=None, noise=None):
    """Add N(0, noise_std^2 I) to a clipped sum and divide by beta."""
    if noise is None:
        noise = torch.randn(
            preconditioner.shape[0], generator=generator, dtype=torch.float64,
            device=preconditioner.device,
        )
    return (clipped_sum + noise_std * noise) / preconditioner
