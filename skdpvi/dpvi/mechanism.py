"""The Gaussian mechanism of DP-SGD: clip every per-example gradient, sum, add noise.

Per-example gradients come in multiplied by the preconditioner beta; every row is
scaled to norm at most C, the rows are summed, N(0, (sigma C)^2 I) noise is added and
the sum is divided by beta again: the released noisy gradient ``g_tilde`` (paper A59).
:func:`glm_clip_and_sum` is the same clipped sum for a GLM, computed without forming
the per-example gradients of the weights.

Clip groups. A GLM may split every row into three groups, clipped separately to
norms C_g with sum_g C_g^2 = C^2 (per-layer clipping, McMahan et al. 2018): the means
of the weights, the scales of the weights, and the "extra" parameters (means and
scales of, e.g., the linear model's noise variance). A row's clipped vector still has
norm at most C, so the sensitivity, the noise and the accounting are unchanged; but a
large gradient in one group (the weights of an example with a large residual) no
longer shrinks the others (its noise-variance gradient), which would bias them.
:func:`group_clip_norms` turns a model's shares into the C_g.
"""

import torch
import torch.nn.functional as F

from .gradients import _expected_regulariser, _regulariser, uses_exact_expectations
from .validation import _check_positive

__all__ = ["clip_and_sum", "glm_clip_and_sum", "group_clip_norms", "privatize", "release"]

#: The clip groups of a GLM row, in the order of ``group_clip_norms``.
GLM_GROUPS = ("weights", "extra", "scales")


def group_clip_norms(clip_norm, shares):
    """Per-group clip norms ``C_g = C s_g / sqrt(sum s^2)`` for a model's ``clip_shares``.

    Parameters
    ----------
    clip_norm : float
        C, the bound on the norm of a whole row.
    shares : dict
        Relative share of each group of :data:`GLM_GROUPS`.

    Returns
    -------
    tuple of float
        (C_weights, C_extra, C_scales); their squares sum to C^2.

    Examples
    --------
    >>> [round(c, 3) for c in group_clip_norms(5.0, {"weights": 3, "extra": 0, "scales": 4})]
    [3.0, 0.0, 4.0]
    """
    values = [float(shares.get(g, 0.0)) for g in GLM_GROUPS]
    total = sum(v * v for v in values) ** 0.5
    if total <= 0 or any(v < 0 for v in values):
        raise ValueError(f"clip shares must be >= 0 and not all 0, got {shares!r}.")
    return tuple(float(clip_norm) * v / total for v in values)


def _clip_factors(norms, clip_norm, weights):
    """min(1, C / norm) of every row, times its weight (if any)."""
    factors = torch.clamp(clip_norm / (norms + 1e-12), max=1.0)
    if weights is not None:
        factors = factors * weights
    return factors


def clip_and_sum(per_example, clip_norm, weights=None, groups=None):
    """Scale every row to norm at most ``clip_norm`` and sum the rows.

    Parameters
    ----------
    per_example : torch.Tensor of shape (B, d), or a tuple of such blocks
        Blocks (e.g. the mu and rho halves) are treated as one row of their
        concatenation.
    clip_norm : float
    weights : torch.Tensor of shape (B,), optional
        Multiplies every clipped row; 0 drops the padding rows of the batched engine.
    groups : (n_weights, (C_weights, C_extra, C_scales)), optional
        Clip the row's groups separately (see the module docstring); ``per_example``
        must then be the (mu, rho) pair of :func:`per_example_gradients`.

    Returns
    -------
    clipped_sum : torch.Tensor of shape (d,), float64
    norms : torch.Tensor of shape (B,)
        Norms of the rows before clipping (private: for tests and diagnostics); with
        groups, ``C max_g |row_g| / C_g``, so that ``norms > C`` marks the rows of
        which some group was clipped.
    """
    _check_positive("clip_norm", clip_norm)
    if weights is not None:
        _check_positive("weights", weights, allow_zero=True)
    return _clip_and_sum(per_example, clip_norm, weights, groups)


def _clip_and_sum(per_example, clip_norm, weights=None, groups=None):
    """:func:`clip_and_sum` without its checks (the engine's loop, settings checked once)."""
    if groups is not None:
        return _grouped_clip_and_sum(per_example, clip_norm, weights, *groups)
    blocks = per_example if isinstance(per_example, tuple) else (per_example,)
    norms = torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(blk, dim=1) for blk in blocks], 1), dim=1
    )
    factors = _clip_factors(norms, clip_norm, weights)
    return torch.cat([factors @ blk for blk in blocks]).to(torch.float64), norms


def _grouped_clip_and_sum(per_example, clip_norm, weights, n_weights, group_norms):
    grad_mu, grad_rho = per_example
    p = n_weights
    parts = (grad_mu[:, :p], torch.cat([grad_mu[:, p:], grad_rho[:, p:]], 1), grad_rho[:, :p])
    sq = [(part * part).sum(1) for part in parts]
    sums, norms = _sum_groups(parts, sq, group_norms, clip_norm, weights)
    k = grad_mu.shape[1] - p
    extra = sums[1]
    return torch.cat([sums[0], extra[:k], sums[2], extra[k:]]).to(torch.float64), norms


def _group_factors(sq, group_norms, clip_norm, weights):
    """Clip factor of every group of every row, and the rows' equivalent norms."""
    factors, ratios = [], []
    for sq_g, c_g in zip(sq, group_norms):
        norm = torch.sqrt(torch.clamp(sq_g, min=0.0))
        if c_g > 0:
            factors.append(_clip_factors(norm, c_g, weights))
            ratios.append(norm / c_g)
        else:  # a group without budget is dropped
            factors.append(torch.zeros_like(norm))
            ratios.append(torch.where(norm > 0, torch.full_like(norm, float("inf")), norm))
    largest = ratios[0]
    for ratio in ratios[1:]:  # 20x faster than stack + amax on the lockstep blocks
        largest = torch.maximum(largest, ratio)
    return factors, clip_norm * largest


def _sum_groups(parts, sq, group_norms, clip_norm, weights):
    factors, norms = _group_factors(sq, group_norms, clip_norm, weights)
    return [f @ part for f, part in zip(factors, parts)], norms


def glm_clip_and_sum(model, phi, eps, batch, n_examples, preconditioner, clip_norm,
                     row_sq_norms, weights=None, group_norms=None):
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
    model : skdpvi.models.GLMModel
    phi, eps, preconditioner : torch.Tensor
        As in :func:`per_example_gradients`, in the dtype of the data.
    batch : (X, y) of torch.Tensor
        The batch's rows (B, n_weights) and targets (B,).
    n_examples : int
        N, which scales the prior's share of each example's gradient.
    clip_norm : float
        C: every (preconditioned) row is clipped to norm at most C.
    row_sq_norms : torch.Tensor of shape (B,)
        ``|beta_w * x_i|^2`` of the batch rows (computed once per fit).
    weights : torch.Tensor of shape (B,), optional
        As in :func:`clip_and_sum`.
    group_norms : (C_weights, C_extra, C_scales), optional
        Clip the groups separately (see the module docstring).

    Returns
    -------
    clipped_sum : torch.Tensor of shape (d,), float64
    norms : torch.Tensor of shape (B,)
    """
    clip = _GLMClip(model, n_examples, preconditioner, clip_norm, group_norms=group_norms)
    return clip(phi, eps, batch[0], batch[1], row_sq_norms, weights)


def _row_sq_norms(rows):
    """Squared norms of the rows (..., B, p) over the last axis.

    ``vector_norm`` for rows in memory order; for rows stored by column (the lockstep
    engine's products with eps come out transposed) it is 20x slower than a plain sum
    of squares, which is used there instead; rows of one entry are just squared
    (a reduction over an axis of length 1 costs 10x more).
    """
    if rows.shape[-1] == 1:
        return (rows * rows).squeeze(-1)
    if rows.is_contiguous():
        return torch.linalg.vector_norm(rows, dim=-1).square()
    return (rows * rows).sum(-1)


def _dot(a, b):
    """Inner products over the last axis; ``torch.dot`` for vectors."""
    return torch.dot(a, b) if a.dim() == 1 else (a * b).sum(-1, keepdim=True)


def _matvec(m, v):
    """``m @ v`` for a matrix (..., B, p) and a vector (..., p).

    With lead axes it is computed as ``v^T m^T``: torch's batched product with one
    column is 4-5x slower than with one row (220 against 47 us for 32 runs of
    560 x 11, one thread).
    """
    return m @ v if v.dim() == 1 else (v.unsqueeze(-2) @ m.mT).squeeze(-2)


def _vecmat(v, m):
    """``v @ m`` for a vector (..., B) and a matrix (..., B, p)."""
    if v.dim() == 1:
        return v @ m
    if m.shape[-1] == 1:  # a batched product with one column is slow (see _matvec)
        return (v * m.squeeze(-1)).sum(-1, keepdim=True)
    return (v.unsqueeze(-2) @ m).squeeze(-2)


class _GLMClip:
    """:func:`glm_clip_and_sum` with its constants fixed once per run.

    Every argument of a call may carry lead axes (the runs of the lockstep engine):
    ``phi`` (..., d), ``eps`` (..., S, n), ``X`` (..., B, p), ``y``,
    ``row_sq_norms`` and ``weights`` (..., B). With lead axes the model's functions
    run under :func:`torch.func.vmap` (``batched=True``) unless the model says
    they broadcast over lead axes (``broadcasts_lead_axes = True``, as skdpvi's
    regression models do: 10 % faster).
    """

    def __init__(self, model, n_examples, preconditioner, clip_norm, batched=False,
                 group_norms=None):
        self.n, self.p = model.n_params, model.n_weights
        self.n_examples = n_examples
        self.clip_norm = clip_norm
        self.group_norms = group_norms
        self.beta_mu, self.beta_rho = preconditioner[: self.n], preconditioner[self.n:]
        self.beta_w = self.beta_mu[: self.p]
        self.model = model
        self.exact = uses_exact_expectations(model)
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
        weight = self.beta_rho * torch.sigmoid(rho)
        if self.exact:
            reg = _expected_regulariser(self.model, mu, rho, scale, self.n_examples)
            r_mean, r_eps, extra_mean, extra_eps = self.model.expected_glm_gradients(
                mu, scale, X, y)
            r_eps = r_eps * weight[..., :p].unsqueeze(-2)
            extra_eps = extra_eps * weight[..., p:].unsqueeze(-2)
        else:
            theta = torch.addcmul(mu.unsqueeze(-2), scale.unsqueeze(-2), eps)
            reg = _regulariser(self.grad_prior(theta), eps, rho, scale, self.n_examples)
            # grad_eps is linear in eps: weighting eps gives beta_rho * dscale * grad_eps
            r_mean, r_eps, extra_mean, extra_eps = self.glm_gradients(
                theta, eps * weight.unsqueeze(-2), X, y)
        a, c = reg[..., :n] * self.beta_mu, reg[..., n:] * self.beta_rho
        a_w = a[..., :p]
        # in place of r_eps, which is not needed again: one block of B x p less
        scale_rows = torch.addcmul(c[..., :p].unsqueeze(-2), r_eps, X, value=-1.0, out=r_eps)
        # squared norm of the weights part, then of the scale part
        sq_w = torch.addcmul(_dot(a_w, a_w) - 2 * r_mean * _matvec(X, self.beta_w * a_w),
                             r_mean * r_mean, row_sq_norms)
        sq_scale = _row_sq_norms(scale_rows)
        # the extra parameters' mean and scale rows stay two blocks: concatenating or
        # reducing blocks this narrow (one column for the linear model) costs more
        # than their arithmetic
        extra_rows = ()
        sq_extra = torch.zeros_like(sq_w)
        if p < n:
            extra_rows = (torch.addcmul(a[..., p:].unsqueeze(-2), self.beta_mu[p:],
                                        extra_mean, value=-1.0),
                          c[..., p:].unsqueeze(-2) - extra_eps)
            sq_extra = sum(_row_sq_norms(rows) for rows in extra_rows)
        if self.group_norms is None:
            norms = torch.sqrt(torch.clamp(sq_w + sq_scale + sq_extra, min=0.0))
            f_w = f_extra = f_scale = _clip_factors(norms, self.clip_norm, weights)
        else:
            (f_w, f_extra, f_scale), norms = _group_factors(
                (sq_w, sq_extra, sq_scale), self.group_norms, self.clip_norm, weights)
        total = f_w.sum() if f_w.dim() == 1 else f_w.sum(-1, keepdim=True)
        sum_w = total * a_w - self.beta_w * _vecmat(f_w * r_mean, X)
        sum_scale = _vecmat(f_scale, scale_rows)
        if p == n:
            return torch.cat([sum_w, sum_scale], -1).to(torch.float64), norms
        sum_mean, sum_eps = (_vecmat(f_extra, rows) for rows in extra_rows)
        return torch.cat([sum_w, sum_mean, sum_scale, sum_eps], -1).to(torch.float64), norms


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
    """Add N(0, noise_std^2 I) to a clipped sum and divide by beta.

    Parameters
    ----------
    clipped_sum : torch.Tensor of shape (d,), float64
    noise_std : float
        sigma * C.
    preconditioner : torch.Tensor of shape (d,), float64
        beta.
    generator : torch.Generator, optional
        Draws the standard normal noise when ``noise`` is not given.
    noise : torch.Tensor of shape (d,), float64, optional
        Pre-drawn standard normal noise.

    Returns
    -------
    g_tilde : torch.Tensor of shape (d,), float64
    """
    _check_positive("noise_std", noise_std, allow_zero=True)
    _check_positive("preconditioner", preconditioner)
    if noise is None:
        noise = torch.randn(
            preconditioner.shape[0], generator=generator, dtype=torch.float64,
            device=preconditioner.device,
        )
    return (clipped_sum + noise_std * noise) / preconditioner
