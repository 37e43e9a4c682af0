"""The DPVI engine: DP-SGD on the negative ELBO of a mean-field Gaussian.

One run of :func:`run_dpvi` is the private mechanism. Each step

1. draws a Poisson subsample (every example independently with rate kappa, so the
   batch size is Binomial(N, kappa) and may be zero),
2. computes per-example gradients of the negative of the paper's per-example ELBO
   (A56/A57) with respect to phi = (mu, rho), vectorised over the batch,
3. multiplies them by the preconditioner beta, clips each to norm C, sums them,
   adds N(0, (sigma C)^2 I) noise and divides by beta: the released noisy gradient
   ``g_tilde`` (paper A59),
4. updates ``phi <- phi - learning_rate * g_tilde`` with ``learning_rate = lambda * beta``.

The variational distribution is q(theta) = N(mu, diag(softplus(rho)^2)): softplus(rho)
is the *standard deviation*. The paper's text says variance, but its authors' code uses
the standard deviation, and so do common DPVI libraries; with the variance the scale
gradients are smaller still and need more preconditioning. Only the released pairs
(phi_t, g_tilde_{t+1}) after burn-in enter the post-processing, through six
per-coordinate running sums (:class:`TraceStatistics`), so its cost does not grow with T.
"""

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from .models.base import GLMModel

#: Expected size (batch rows x weights) of the gradient block above which the
#: factored GLM path (:func:`glm_clip_and_sum`) is faster than the dense one.
_GLM_PATH_MIN_BLOCK = 20_000

__all__ = ["run_dpvi", "heuristic_learning_rate", "DPVIResult", "TraceStatistics"]


def heuristic_learning_rate(noise_multiplier, clip_norm, n_steps, dim, scale=None):
    """The paper's learning-rate heuristic (A58).

    ``sqrt(2) * scale / (noise_multiplier * clip_norm * sqrt(n_steps * dim))`` with
    ``scale`` (lambda_c) defaulting to 1, the paper's default. Its alternative
    ``sqrt(dim / 2)`` reduces the rate to ``1 / (noise_multiplier * clip_norm * sqrt(n_steps))``.

    Examples
    --------
    >>> heuristic_learning_rate(10.0, 2.0, 10_000, 8, scale=2.0)
    0.0005
    """
    if scale is None:
        scale = 1.0
    return math.sqrt(2) * scale / (noise_multiplier * clip_norm * math.sqrt(n_steps * dim))


@dataclass
class TraceStatistics:
    """Per-coordinate sums over the released pairs (phi_t, g_tilde_{t+1}), t >= burn-in.

    The parameters are centred on ``shift`` (phi at the burn-in step) before summing,
    which keeps the sums of squares accurate in float64. With x_t = phi_t - shift:
    ``sum_x = sum x_t``, ``sum_xx = sum x_t^2``, ``sum_g = sum g``, ``sum_gg = sum g^2``,
    ``sum_gx = sum g * x_t``; ``count`` pairs in total.
    """

    count: int
    shift: np.ndarray
    sum_x: np.ndarray
    sum_xx: np.ndarray
    sum_g: np.ndarray
    sum_gg: np.ndarray
    sum_gx: np.ndarray

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
        return cls(
            count=len(g), shift=shift, sum_x=x.sum(0), sum_xx=(x * x).sum(0),
            sum_g=g.sum(0), sum_gg=(g * g).sum(0), sum_gx=(g * x).sum(0),
        )

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
        )

    def check_finite(self):
        for name in ("shift", "sum_x", "sum_xx", "sum_g", "sum_gg", "sum_gx"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(
                    f"The DP-SGD trace statistics contain non-finite values ({name}); "
                    "the optimisation diverged. Lower learning_rate_scale or check the data."
                )


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

    @property
    def noise_std(self):
        """Standard deviation of the DP noise in each coordinate of g_tilde."""
        return self.noise_multiplier * self.clip_norm / self.preconditioner


def _regulariser_gradient(model, theta, eps, rho, n_examples):
    """Gradient w.r.t. (mu, rho) of (1/N) mean_s [log q(theta_s) - log prior~(theta_s)].

    This part of every per-example loss does not depend on the example; prior~
    includes the log-Jacobian of the constraining transform. At its own
    reparameterised draws, log q = -sum(log scale) - |eps|^2 / 2 + const, whose
    gradient is -dscale/scale in rho and 0 in mu.
    """
    grad_prior = model.grad_log_prior_unconstrained(theta)  # (S, n)
    dscale = torch.sigmoid(rho)
    g_mu = -grad_prior.mean(0)
    g_rho = -dscale / F.softplus(rho) - (grad_prior * eps).mean(0) * dscale
    return torch.cat([g_mu, g_rho]) / n_examples


def _centred_normal(shape, generator, device):
    """Standard normal draws centred over the Monte Carlo axis (-2), unit variance.

    Each draw eps_s - mean(eps), rescaled by sqrt(S / (S - 1)), is still exactly N(0, 1)
    (so every theta_s is exactly distributed as q and the gradient stays unbiased),
    but the draws sum to zero. That removes the leading Monte Carlo noise of the scale
    gradients, grad log p(x_i | mu) * mean(eps) * scale, exactly: the per-example
    gradients in rho shrink to the order of scale^2 times the curvature, and a large
    preconditioner no longer lets them dominate the clipping.
    """
    eps = torch.randn(shape, generator=generator, dtype=torch.float64, device=device)
    n_draws = shape[-2]
    if n_draws < 2:
        return eps
    return (eps - eps.mean(-2, keepdim=True)) * math.sqrt(n_draws / (n_draws - 1))


def poisson_subsamples(n_examples, sampling_rate, n_steps, generator, device="cpu",
                       chunk=None):
    """Index tensors of ``n_steps`` independent Poisson subsamples.

    In each subsample every example is included independently with the given rate,
    so the batch size is Binomial(n_examples, sampling_rate) and may be zero, as the
    privacy accounting of Poisson-subsampled DP-SGD requires. The indices are the
    successes of a Bernoulli(rate) sequence, whose gaps are i.i.d. Geometric(rate):
    about ``rate * n_examples`` draws per step instead of ``n_examples``, drawn for
    all steps at once. The indices of each step come out sorted.

    ``chunk`` is the number of gaps drawn per step before checking whether the end
    of the data was reached (default: mean + 6 sd + 16); more are drawn if not.
    """
    if sampling_rate >= 1:
        return [torch.arange(n_examples, device=device) for _ in range(n_steps)]
    if chunk is None:
        expected = n_examples * sampling_rate
        chunk = int(expected + 6 * math.sqrt(expected) + 16)
    gaps = torch.empty((n_steps, chunk), dtype=torch.float64, device=device)
    gaps.geometric_(sampling_rate, generator=generator)
    positions = torch.cumsum(gaps, 1).to(torch.int64) - 1
    counts = torch.searchsorted(
        positions, torch.full((n_steps, 1), n_examples, device=device)
    ).squeeze(1).tolist()
    batches = []
    for row, count in zip(positions, counts):
        pieces = [row[:count]]
        last = int(row[-1])
        while count == chunk:  # rare (6 sd): the row ended before n_examples; go on
            more = last + torch.cumsum(
                torch.empty(chunk, dtype=torch.float64, device=device).geometric_(
                    sampling_rate, generator=generator), 0).to(torch.int64)
            count = int(torch.searchsorted(more, n_examples))
            pieces.append(more[:count])
            last = int(more[-1])
        batches.append(torch.cat(pieces) if len(pieces) > 1 else pieces[0])
    return batches


def poisson_subsample(n_examples, sampling_rate, generator, device="cpu"):
    """Indices of one Poisson subsample (see :func:`poisson_subsamples`)."""
    return poisson_subsamples(n_examples, sampling_rate, 1, generator, device)[0]


def per_example_gradients(model, phi, eps, batch, n_examples, preconditioner=None):
    """Gradients of the per-example negative ELBO with respect to phi = (mu, rho).

    The loss of example i is the negative of the paper's A56/A57 (with the
    log-Jacobian in log form)::

        l_i = -mean_s log p(x_i | theta_s) + (1/N) mean_s [log q(theta_s) - log p~(theta_s)]

    with theta_s = mu + softplus(rho) * eps_s shared by the batch.

    Parameters
    ----------
    model : Model
    phi : torch.Tensor of shape (2 n,), float64
    eps : torch.Tensor of shape (S, n), float64
    batch : tuple of prepared data tensors (first axis B)
    n_examples : int
        N, the size of the data set.
    preconditioner : torch.Tensor of shape (2 n,), optional
        beta; when given, the gradients come out multiplied by it (fused, cheaper
        than a separate pass over the batch).

    Returns
    -------
    grad_mu, grad_rho : torch.Tensor of shape (B, n)
        The two halves of the (preconditioned) per-example gradient.
    """
    n = model.n_params
    real = batch[0].dtype
    mu, rho = phi[:n], phi[n:]
    theta = (mu + F.softplus(rho) * eps).to(real)
    eps_r, rho_r = eps.to(real), rho.to(real)
    grad_mean, grad_eps = model.likelihood_gradients(theta, eps_r, *batch)
    reg = _regulariser_gradient(model, theta, eps_r, rho_r, n_examples)
    beta = torch.ones(2 * n, dtype=real, device=reg.device) if preconditioner is None \
        else preconditioner.to(real)
    beta_mu, beta_rho = beta[:n], beta[n:]
    dscale = torch.sigmoid(rho_r)
    grad_mu = torch.addcmul(reg[:n] * beta_mu, grad_mean, -beta_mu)
    grad_rho = torch.addcmul(reg[n:] * beta_rho, grad_eps, -dscale * beta_rho)
    return grad_mu, grad_rho


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
    factors = torch.clamp(clip_norm / (norms + 1e-12), max=1.0)
    if weights is not None:
        factors = factors * weights
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
    sq = torch.addcmul(torch.dot(a_w, a_w) - 2 * r_mean * (X @ (beta_mu[:p] * a_w)),
                       r_mean * r_mean, row_sq_norms)
    sq = sq + torch.linalg.vector_norm(scale_rows, dim=1) ** 2
    if p < n:
        extra_rows = torch.cat([torch.addcmul(a[p:], beta_mu[p:], extra_mean, value=-1.0),
                                c[p:] - extra_eps], 1)
        sq = sq + (extra_rows * extra_rows).sum(1)
    norms = torch.sqrt(torch.clamp(sq, min=0.0))
    factors = torch.clamp(clip_norm / (norms + 1e-12), max=1.0)
    if weights is not None:
        factors = factors * weights
    total = factors.sum()
    sum_w = total * a_w - beta_mu[:p] * (factors * r_mean @ X)
    sum_scale = factors @ scale_rows
    if p == n:
        return torch.cat([sum_w, sum_scale]).to(torch.float64), norms
    sum_extra = factors @ extra_rows
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


@dataclass
class _Schedule:
    """The step sizes and starting point of a run, fixed before it starts."""

    beta: np.ndarray  # preconditioner (d,)
    lam: float  # learning rate lambda
    phi0: np.ndarray  # initial (mu, rho)

    @property
    def lr(self):
        return self.lam * self.beta


def _schedule(model, *, noise_multiplier, clip_norm, n_steps, learning_rate,
              learning_rate_scale, preconditioner, init_mean, init_scale):
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
    if init_mean is None:
        init_mean = model.init_mean() if hasattr(model, "init_mean") else np.zeros(n)
    rho0 = float(np.log(np.expm1(init_scale)))
    phi0 = np.concatenate([np.asarray(init_mean, float).reshape(n), np.full(n, rho0)])
    return _Schedule(beta=beta, lam=lam, phi0=phi0)


def _prepare_data(model, data, dtype, device):
    return model.prepare_data(
        *(torch.tensor(np.asarray(a), dtype=dtype, device=device) for a in data)
    )


def _use_glm_path(model, n_examples, sampling_rate):
    # The factored GLM path saves two passes over the (B, n) gradient block; for
    # small blocks its extra small operations cost more than that (bench_engine).
    return (isinstance(model, GLMModel)
            and n_examples * sampling_rate * model.n_weights >= _GLM_PATH_MIN_BLOCK)


def _draw_block(generator, n_block, n_mc_samples, n_params, n_examples, sampling_rate, device):
    """The random numbers of ``n_block`` steps, in the engine's fixed order.

    Monte Carlo draws (n_block, S, n), then the Poisson subsamples (a list of index
    tensors), then the standard normal DP noise (n_block, 2 n). The batched engine
    draws in the same order from each run's own generator, so its runs reproduce
    :func:`run_dpvi` with the same seed.
    """
    eps = _centred_normal((n_block, n_mc_samples, n_params), generator, device)
    batches = poisson_subsamples(n_examples, sampling_rate, n_block, generator, device)
    noise = torch.randn((n_block, 2 * n_params), generator=generator, dtype=torch.float64,
                        device=device)
    return eps, batches, noise


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
        self.sums = torch.zeros((5, *lead, d), dtype=torch.float64, device=device)
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
        x = self.phi[first - start: stop - start] - self.shift
        g = self.grad[first - start: stop - start]
        self.sums.add_(torch.stack([x.sum(0), (x * x).sum(0), g.sum(0), (g * g).sum(0),
                                    (g * x).sum(0)]))

    def finish(self, phi):
        """Store the last iterate; return (sums (5, *lead, d), shift) as arrays."""
        if self.trace_phi is not None:
            self.trace_phi[self.n_steps] = phi.cpu().numpy()
        return self.sums.cpu().numpy(), self.shift.cpu().numpy()


def _statistics(sums, shift, count):
    return TraceStatistics(count=count, shift=shift, sum_x=sums[0], sum_xx=sums[1],
                           sum_g=sums[2], sum_gg=sums[3], sum_gx=sums[4])


def _result(phi, sums, shift, plan, trace_phi, trace_grad, clip_counts, *, noise_multiplier,
            clip_norm, sampling_rate, n_steps, burn_in):
    """Assemble the DPVIResult of one run; ``clip_counts`` = (clipped, seen) or None."""
    diagnostics = {}
    if clip_counts is not None:
        n_clipped, n_seen = clip_counts
        diagnostics["clipped_fraction"] = n_clipped / max(n_seen, 1)
        diagnostics["mean_batch_size"] = n_seen / n_steps
    return DPVIResult(
        phi=phi,
        stats=_statistics(sums, shift, n_steps - burn_in),
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


def _progress_bar(verbose, n_steps, desc="DP-SGD"):
    if not verbose:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=n_steps, desc=desc, unit="step", mininterval=0.5)


def run_dpvi(
    model,
    data,
    *,
    noise_multiplier,
    clip_norm,
    sampling_rate,
    n_steps,
    burn_in,
    learning_rate=None,
    learning_rate_scale=None,
    n_mc_samples=10,
    preconditioner=None,
    init_mean=None,
    init_scale=0.01,
    random_state=0,
    record_trace=False,
    return_diagnostics=False,
    device="cpu",
    verbose=0,
):
    """Run DP-SGD variational inference and record what NA-DPVI post-processes.

    Parameters
    ----------
    model : skdpvi.models.Model
    data : tuple of array-like
        Per-example tensors (first axis N), e.g. ``(X, y)``.
    noise_multiplier : float
        sigma; the noise added to the clipped sum has std ``sigma * clip_norm``.
    clip_norm : float
        C, bound on the norm of every preconditioned per-example gradient.
    sampling_rate : float
        Poisson sampling rate kappa.
    n_steps : int
        T.
    burn_in : int
        Pairs (phi_t, g_tilde_{t+1}) with t >= burn_in enter the statistics.
    learning_rate : float, optional
        lambda; defaults to the heuristic of :func:`heuristic_learning_rate`.
        The step of coordinate i is ``lambda * beta_i``.
    learning_rate_scale : float, optional
        lambda_c of the heuristic; defaults to 1.
    n_mc_samples : int, default=10
        Monte Carlo draws of theta per step, shared by all examples of the step.
    preconditioner : float or array-like of shape (d,), optional
        beta. A float is used for the scale (rho) coordinates, with 1 for the means;
        defaults to 1 everywhere.
    init_mean : array-like of shape (n,), optional
        Initial variational mean (default: ``model.init_mean()`` if defined, else 0).
        Must not be computed from the private data.
    init_scale : float, default=0.01
        Initial standard deviation of q.
    random_state : int
        Seed of the torch generator that draws batches, MC samples and noise.
    record_trace : bool, default=False
        Keep the full trace and noisy gradients (memory O(T d)).
    return_diagnostics : bool, default=False
        Also compute the fraction of clipped per-example gradients. This is a
        statistic of the private data without noise: never release it.
    device : str or torch.device, default="cpu"
    verbose : int, default=0
        Show a progress bar when > 0.

    Returns
    -------
    DPVIResult
    """
    device = torch.device(device)
    real = torch.float32
    tensors = _prepare_data(model, data, real, device)
    n_examples = tensors[0].shape[0]
    n = model.n_params
    d = 2 * n
    plan = _schedule(model, noise_multiplier=noise_multiplier, clip_norm=clip_norm,
                     n_steps=n_steps, learning_rate=learning_rate,
                     learning_rate_scale=learning_rate_scale, preconditioner=preconditioner,
                     init_mean=init_mean, init_scale=init_scale)
    phi = torch.tensor(plan.phi0, dtype=torch.float64, device=device)
    beta_t = torch.tensor(plan.beta, dtype=torch.float64, device=device)
    beta_r = beta_t.to(real)
    lr_t = torch.tensor(plan.lr, dtype=torch.float64, device=device)
    noise_std = float(noise_multiplier) * float(clip_norm)

    gen = torch.Generator(device=device)
    gen.manual_seed(int(random_state))

    glm = _use_glm_path(model, n_examples, sampling_rate)
    if glm:
        beta_w = beta_t[: model.n_weights]
        all_sq_norms = ((tensors[0].double() * beta_w) ** 2).sum(1).to(real)

    block = min(n_steps, 512)
    recorder = _TraceRecorder(n_steps, burn_in, (), d, block, record_trace, device)
    n_clipped = torch.zeros((), dtype=torch.float64, device=device)
    n_seen = 0
    progress = _progress_bar(verbose, n_steps)

    for start in range(0, n_steps, block):
        stop = min(start + block, n_steps)
        eps_block, batches, noise_block = _draw_block(
            gen, stop - start, n_mc_samples, n, n_examples, sampling_rate, device)
        eps_real = eps_block.to(real)
        for j in range(stop - start):
            recorder.phi[j] = phi
            index = batches[j]
            batch = tuple(a.index_select(0, index) for a in tensors)
            if glm:
                clipped_sum, norms = glm_clip_and_sum(
                    model, phi.to(real), eps_real[j], batch, n_examples, beta_r, clip_norm,
                    all_sq_norms.index_select(0, index),
                )
            else:
                clipped_sum, norms = clip_and_sum(
                    per_example_gradients(model, phi, eps_block[j], batch, n_examples, beta_r),
                    clip_norm,
                )
            g_tilde = release(clipped_sum, noise_std, beta_t, noise=noise_block[j])
            if return_diagnostics:
                n_clipped += (norms > clip_norm).sum()
                n_seen += norms.shape[0]
            recorder.grad[j] = g_tilde
            phi = phi - lr_t * g_tilde
        recorder.flush(start, stop)
        if progress is not None:
            progress.update(stop - start)
    if progress is not None:
        progress.close()

    sums, shift = recorder.finish(phi)
    return _result(
        phi.cpu().numpy(), sums, shift, plan, recorder.trace_phi, recorder.trace_grad,
        (float(n_clipped), n_seen) if return_diagnostics else None,
        noise_multiplier=noise_multiplier, clip_norm=clip_norm, sampling_rate=sampling_rate,
        n_steps=n_steps, burn_in=burn_in,
    )
