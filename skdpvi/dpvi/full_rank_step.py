"""The clipped sum of one full-rank DP-SGD step (:func:`~skdpvi.dpvi.run_dpvi_full_rank`).

Per-example gradients of the negative ELBO of ``q = N(m, L L^T)``,
``L = diag(softplus(rho)) (I + U)``, for logistic regression (the prior and entropy
terms divided by N, as in :mod:`~skdpvi.dpvi.gradients`), preconditioned, clipped and
summed over the batch. No (B, n^2) block is formed: the U rows' norms and clipped sum
come from products of the batch with n x n matrices.

**Preconditioning.** The U entries are dimensionless (their curvature in the negative
ELBO is ``s_j^2 H_jj``, about 1, like rho's 2), so they take the scales' step
``lambda beta``. Their per-example gradients are small next to the means' (at the
defaults the rho and U rows use about 5 % of C, the means' 13 %), so both blocks are
multiplied by ``1 / scale_noise`` times that beta before clipping, with their steps
unchanged: the DP noise in rho and U is ``scale_noise`` times the mean-field
engine's, which is what reads the correlations. Measured on issue 14's design
(epsilon 1): with 1 the curvature's generalised eigenvalues against the data's
spread over 0.43-2.34, with 0.25 over 0.60-1.08 (without DP noise: 0.66-1.07) at
1 % of the rows clipped; 0.0625 clipped a third of the rows.

**Clipping the blocks apart.** The per-example scale gradients grow like 1 / N, so at
a fixed factor fewer rows clip more: 6-10 % of the rows on 5,000 rows, 14-18 % on
4,000, and a row clipped as a whole loses its gradient in the means with its scales',
which biased the centre (ten features equicorrelated at 0.7: coverage 0.78-0.89).
So each row's means' block is clipped to ``0.8 C`` and its (rho, U) block to
``0.6 C`` apart (``mean_clip_share``; the row's norm stays at most C, the noise is
unchanged): the means' rows are then almost never clipped (their 99th percentile is
0.4-0.65 C on the measured designs) and the scales' clipping only softens the
curvature a little (generalised eigenvalues 0.45-0.7 at the bottom where 20-50 %
of the scale rows are clipped, instead of 0.6-0.8). Capping the scale block's
preconditioner with N instead (``scale_cap``, the mean-field cap extended to the
``n (n + 1) / 2`` coordinates) keeps the clipping near 1-5 % but raises the noise
where N is small, and on 1,000-2,000 rows the curvature it read was off by factors
of 10-5,000: measured, not the default (results pages, "Clipping the full-rank
blocks apart").
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..models.base import gauss_hermite

#: Gauss-Hermite nodes of the closed-form gradients (as the mean-field logistic model's).
N_QUADRATURE_NODES = 16
#: The rho and U blocks' noise relative to the mean-field engine's (see module text).
DEFAULT_SCALE_NOISE = 0.25
#: The means' share of C when the blocks are clipped apart (None: a row as a whole).
DEFAULT_MEAN_CLIP_SHARE = 0.8
#: The cap's divisor: the scale block's preconditioner is at most
#: ``C N / (SCALE_CAP_DIVISOR sqrt(n (n + 1) / 2))``.
SCALE_CAP_DIVISOR = 5.0


def full_rank_scale_preconditioner(preconditioner, scale_bound, n_examples, n_params,
                                   scale_noise=DEFAULT_SCALE_NOISE, cap=False):
    """The rho and U blocks' preconditioner: ``preconditioner / scale_noise``, optionally capped.

    The cap ``C_s N / (5 sqrt(n (n + 1) / 2))`` (``C_s`` the scale block's clipping
    bound) extends the mean-field engine's
    (:func:`~skdpvi.dpvi.schedule._default_preconditioning`) to the scale block's
    ``n (n + 1) / 2`` coordinates: their per-example gradients are O(1 / N), so a
    preconditioner that grows with N keeps their norms at a fixed share of ``C_s``.
    N is public by the engine's assumptions. Not the default (module text).
    """
    beta = float(preconditioner) / float(scale_noise)
    if not cap:
        return beta
    n_scale = n_params * (n_params + 1) / 2
    return min(beta, float(scale_bound) * n_examples / (SCALE_CAP_DIVISOR * math.sqrt(n_scale)))


class _FullRankStep:
    """The clipped sums of one step's preconditioned per-example gradients.

    With ``mean_clip_share`` None a row is clipped as a whole to norm C; with a share
    ``a`` its means' block is clipped to ``a C`` and its (rho, U) block to
    ``sqrt(1 - a^2) C`` separately (each row's norm is still at most C).

    Every tensor may carry lead axes (the runs of the lockstep engine,
    :func:`~skdpvi.dpvi.run_dpvi_full_rank_batched`): ``m``, ``rho`` (..., n), ``U``
    (..., n (n - 1) / 2), ``eps`` (..., S, n), ``X`` (..., B, n), ``y`` (..., B);
    ``beta_rho``, ``beta_u`` and ``clip_norm`` are then floats or tensors of the
    lead shape (one value per run).
    """

    def __init__(self, n, n_examples, prior_scale, beta_rho, beta_u, clip_norm,
                 mean_clip_share=None, closed_form=False):
        self.n, self.N = n, n_examples
        #: exact expectations over q instead of Monte Carlo draws (``eps`` is then None)
        self.closed_form = bool(closed_form)
        self.nodes, self.weights = gauss_hermite(N_QUADRATURE_NODES, torch.float64, "cpu")
        self.prior_var = float(prior_scale) ** 2
        self.beta_rho, self.beta_u, self.C = (_per_row(v) for v in (beta_rho, beta_u, clip_norm))
        self._beta_sq = (self.beta_rho**2, self.beta_u**2)
        #: count the clipped rows (tests, benchmarks); the engine skips it otherwise
        self.count_clipped = True
        self.mean_clip_share = mean_clip_share
        self.rows, self.cols = (torch.as_tensor(i) for i in np.tril_indices(n, -1))
        self.strict = torch.tril(torch.ones(n, n, dtype=torch.float64), -1)
        self.eye = torch.eye(n, dtype=torch.float64)

    def factors(self, rho, U):
        """``s = softplus(rho)``, ``A = I + U``, ``L = diag(s) A`` and ``sigmoid(rho)``
        (ds / drho), once per step for the clipped sum and the window's moments."""
        s = F.softplus(rho)
        A = self.eye.expand(*rho.shape[:-1], self.n, self.n).clone()
        A[..., self.rows, self.cols] = U
        return s, A, s[..., :, None] * A, torch.sigmoid(rho)

    def pieces(self, m, rho, factors, eps, X, y):
        """The per-example pieces of one step, before preconditioning and clipping.

        Returns ``(w_bar, r_m, V, R, rho_rows, sq_m, sq_rho, sq_u)``: the squared
        norms are those of each row's gradient in m, rho and U (the last two without
        their preconditioner), the rest what :meth:`__call__` sums them from.
        """
        N, n = self.N, self.n
        s, A, L, dsig = factors
        if self.closed_form:
            w_bar, r_m, V, R = self._expectations(m, L, X, y)
        else:
            theta = m[..., None, :] + eps @ L.mT               # (..., S, n)
            S = eps.shape[-2]
            w = torch.sigmoid(X @ theta.mT) - y[..., None]     # (..., B, S): d(-log lik)/dz
            w_bar = w.mean(-1)
            prior_grad = theta / self.prior_var                # d(-log prior)/dtheta
            r_m = prior_grad.mean(-2) / N
            V = w @ (eps / S)                                  # (..., B, n)
            R = prior_grad.mT @ eps / (S * N)                  # (..., n, n)
        R_low = R * self.strict
        VA, VR = (V @ torch.cat([A, R_low], -2).mT).split(n, -1)  # V A^T, V R_low^T
        rho_rows = dsig[..., None, :] * (
            X * VA + ((R * A).sum(-1) - 1.0 / (N * s))[..., None, :])
        s2 = s * s
        XX = X * X
        # sum_{j>k} x_j^2 s_j^2 of every row and k: suffix sums, no (n, n) product
        tail = XX * s2[..., None, :]
        tail = tail.sum(-1, keepdim=True) - tail.cumsum(-1)
        # |U row|^2 = sum_{j>k} s_j^2 (x_j v_k + R_jk)^2, without the (B, n^2) block
        sq_u = ((V * V) * tail).sum(-1) + 2.0 * ((X * VR) @ s2[..., :, None]).squeeze(-1) \
            + (s2[..., :, None] * R_low * R_low).sum((-2, -1))[..., None]
        sq_m = XX.sum(-1) * w_bar**2 + 2.0 * w_bar * (X @ r_m[..., None]).squeeze(-1) \
            + (r_m * r_m).sum(-1)[..., None]
        return w_bar, r_m, V, R, rho_rows, sq_m, (rho_rows * rho_rows).sum(-1), sq_u

    def _expectations(self, m, L, X, y):
        """``(w_bar, r_m, V, R)`` of :meth:`pieces` as exact expectations over q.

        Under q a row's logit is ``N(x . m, |L^T x|^2)``: ``E[sigmoid(z)]`` and
        ``E[sigmoid'(z)]`` by Gauss-Hermite quadrature, and by Stein's lemma
        ``E[(sigmoid(z) - y) eps] = E[sigmoid'(z)] L^T x``; the prior's terms are
        ``m`` and ``L`` over ``prior_scale^2 N``.
        """
        XL = X @ L                                             # (..., B, n): rows L^T x
        sd = torch.sqrt((XL * XL).sum(-1, keepdim=True))
        prob = torch.sigmoid((X @ m[..., :, None]) + sd * self.nodes)  # (..., B, Q)
        w_bar = prob @ self.weights - y
        slope = (prob * (1.0 - prob)) @ self.weights
        scale = self.prior_var * self.N
        return w_bar, m / scale, slope[..., None] * XL, L / scale

    def __call__(self, m, rho, factors, eps, X, y, weights=None):
        """(sum of the clipped rows of m, of rho, of U) and the numbers of rows clipped
        in the means' and in the scales' block (None unless ``count_clipped``);
        ``factors`` are :meth:`factors` of (rho, U). ``weights`` (..., B) multiply the clipped rows (0: a padding row of
        the lockstep engine, neither summed nor counted)."""
        C = self.C
        s = factors[0]
        w_bar, r_m, V, R, rho_rows, sq_m, sq_rho, sq_u = self.pieces(m, rho, factors, eps, X, y)
        sq_s = self._beta_sq[0] * sq_rho + self._beta_sq[1] * sq_u
        if self.mean_clip_share is None:
            f_m = f_s = _clip_factors(sq_m + sq_s, C)
        else:
            a = float(self.mean_clip_share)
            f_m = _clip_factors(sq_m, a * C)
            f_s = _clip_factors(sq_s, math.sqrt(1.0 - a * a) * C)
        counts = None
        if self.count_clipped:
            clipped = (f_m < 1, f_s < 1)
            if weights is not None:
                clipped = tuple(c & (weights > 0) for c in clipped)
            counts = tuple(c.sum(-1).to(torch.float64) for c in clipped)
            if m.dim() == 1:
                counts = tuple(float(c) for c in counts)
        if weights is not None:
            f_m, f_s = f_m * weights, f_s * weights
        sum_m = (X.mT @ (f_m * w_bar)[..., None]).squeeze(-1) + f_m.sum(-1)[..., None] * r_m
        sum_rho = (f_s[..., None, :] @ rho_rows).squeeze(-2)
        G = X.mT @ (f_s[..., None] * V) + f_s.sum(-1)[..., None, None] * R
        sum_u = (s[..., :, None] * G)[..., self.rows, self.cols]
        return sum_m, sum_rho, sum_u, counts


def _per_row(value):
    """A float, or a tensor of one value per run with an axis for the batch's rows."""
    if isinstance(value, torch.Tensor) and value.dim() > 0:
        return value.to(torch.float64)[..., None]
    return float(value)


def _clip_factors(squared_norms, bound):
    """``min(1, bound / norm)`` of each row."""
    return torch.clamp(bound / torch.sqrt(torch.clamp(squared_norms, min=1e-300)), max=1.0)
