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

from .gradients import _regulariser_gradient

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
    return factors, clip_norm * torch.stack(ratios, 1).amax(1)


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
    phi, eps, preconditioner : torch.Tensor
        As in :func:`per_example_gradients`, in the dtype of the data.
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
    n, p = model.n_params, model.n_weights
    X = batch[0]
    mu, rho = phi[:n], phi[n:]
    theta = torch.addcmul(mu, F.softplus(rho), eps)
    reg = _regulariser_gradient(model, theta, eps, rho, n_examples)
    beta_mu, beta_rho = preconditioner[:n], preconditioner[n:]
    # grad_eps is linear in eps: weighting eps gives beta_rho * dscale * grad_eps directly
    weight = beta_rho * torch.sigmoid(rho)
    r_mean, r_eps, extra_mean, extra_eps = model.glm_gradients(theta, eps * weight, *batch)
    a, c = reg[:n] * beta_mu, reg[n:] * beta_rho
    a_w = a[:p]
    scale_rows = torch.addcmul(c[:p], r_eps, X, value=-1.0)
    # squared norm of the weights part, then of the scale part
    sq_w = torch.addcmul(torch.dot(a_w, a_w) - 2 * r_mean * (X @ (beta_mu[:p] * a_w)),
                         r_mean * r_mean, row_sq_norms)
    sq_scale = torch.linalg.vector_norm(scale_rows, dim=1) ** 2
    extra_rows = None
    if p < n:
        extra_rows = torch.cat([torch.addcmul(a[p:], beta_mu[p:], extra_mean, value=-1.0),
                                c[p:] - extra_eps], 1)
    if group_norms is None:
        sq = sq_w + sq_scale
        if extra_rows is not None:
            sq = sq + (extra_rows * extra_rows).sum(1)
        norms = torch.sqrt(torch.clamp(sq, min=0.0))
        factors = _clip_factors(norms, clip_norm, weights)
        f_w = f_extra = f_scale = factors
    else:
        sq_extra = (extra_rows * extra_rows).sum(1) if extra_rows is not None \
            else torch.zeros_like(sq_w)
        (f_w, f_extra, f_scale), norms = _group_factors(
            (sq_w, sq_extra, sq_scale), group_norms, clip_norm, weights)
    sum_w = f_w.sum() * a_w - beta_mu[:p] * (f_w * r_mean @ X)
    sum_scale = f_scale @ scale_rows
    if p == n:
        return torch.cat([sum_w, sum_scale]).to(torch.float64), norms
    sum_extra = f_extra @ extra_rows
    k = n - p
    return torch.cat([sum_w, sum_extra[:k], sum_scale, sum_extra[k:]]).to(torch.float64), norms


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
