"""The mechanisms the audit runs: the real engine, and deliberately broken variants.

The real mechanism is :func:`skdpvi.dpvi.run_dpvi_batched`, exactly as the estimators
run it (each run identical to :func:`~skdpvi.dpvi.run_dpvi` with its seed), so the
audit tests what users run. The broken variants cannot be made from the engine
without changing it, so they run on a small re-implementation of DP-SGD built from the
engine's public pieces (:func:`~skdpvi.dpvi.poisson_subsamples`,
:func:`~skdpvi.dpvi.per_example_gradients`, :func:`~skdpvi.dpvi.clip_and_sum` (its
unchecked twin, which lets the broken variant clip at an infinite norm),
:func:`~skdpvi.dpvi.release`), with one thing wrong each:

``weak_noise``    the noise standard deviation is sigma C / 4
``no_clipping``   per-example gradients are summed unclipped
``double_rate``   rows are sampled with rate 2q (the accounting assumes q)
``reused_noise``  the same noise vector is added at every step
``reference``     nothing wrong: the re-implementation as a control

Each variant is audited against the epsilon claimed for the *correct* mechanism.
"""

import math

import numpy as np
import torch
from torch.func import vmap
from torch.nn.utils.rnn import pad_sequence

from ..dpvi import per_example_gradients, poisson_subsamples, release, run_dpvi_batched
# unchecked: the broken "no_clipping" variant clips at an infinite norm on purpose,
# which the public clip_and_sum refuses
from ..dpvi.mechanism import _clip_and_sum

__all__ = ["MECHANISMS", "BROKEN_VARIANTS", "run_mechanism"]

#: What each broken variant changes, relative to the correct mechanism.
BROKEN_VARIANTS = {
    "weak_noise": dict(noise_scale=0.25),
    "no_clipping": dict(clip=False),
    "double_rate": dict(rate_factor=2.0),
    "reused_noise": dict(reuse_noise=True),
}
#: Every mechanism :func:`run_mechanism` accepts.
MECHANISMS = ("real", "reference", *BROKEN_VARIANTS)


def run_mechanism(mechanism, model, data, seeds, *, noise_multiplier, clip_norm,
                  sampling_rate, n_steps, learning_rate, n_mc_samples, preconditioner,
                  init_mean, device="cpu"):
    """Released noisy gradients of ``len(seeds)`` runs on ``data``: (R, T, d), and beta.

    ``mechanism`` is one of :data:`MECHANISMS`; the other arguments are those of
    :func:`~skdpvi.dpvi.run_dpvi` (``learning_rate`` is lambda, given explicitly so
    that every variant follows the same schedule).
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}.")
    if mechanism == "real":
        results = run_dpvi_batched(
            model, [data] * len(seeds), random_states=seeds,
            noise_multiplier=noise_multiplier, clip_norm=clip_norm,
            sampling_rate=sampling_rate, n_steps=n_steps, burn_in=0,
            learning_rate=learning_rate, n_mc_samples=n_mc_samples,
            preconditioner=preconditioner, init_mean=init_mean, record_trace=True,
            device=device,
        )
        return np.stack([r.trace_grad for r in results]), results[0].preconditioner
    return _reference(model, data, seeds, noise_multiplier=noise_multiplier,
                      clip_norm=clip_norm, sampling_rate=sampling_rate, n_steps=n_steps,
                      learning_rate=learning_rate, n_mc_samples=n_mc_samples,
                      preconditioner=preconditioner, init_mean=init_mean, device=device,
                      **BROKEN_VARIANTS.get(mechanism, {}))


def _centred_normal(shape, generator):
    """Standard normal draws centred over the Monte Carlo axis (-2), as the engine's."""
    eps = torch.randn(shape, generator=generator, dtype=torch.float64)
    n_draws = shape[-2]
    return (eps - eps.mean(-2, keepdim=True)) * math.sqrt(n_draws / (n_draws - 1))


def _reference(model, data, seeds, *, noise_multiplier, clip_norm, sampling_rate, n_steps,
               learning_rate, n_mc_samples, preconditioner, init_mean, device,
               noise_scale=1.0, clip=True, rate_factor=1.0, reuse_noise=False):
    """R runs of plain DP-SGD on the negative ELBO, in lockstep, possibly broken."""
    device = torch.device(device)
    tensors = model.prepare_data(
        *(torch.tensor(np.asarray(a), dtype=torch.float32, device=device) for a in data))
    n_examples = tensors[0].shape[0]
    n = model.n_params
    d = 2 * n
    beta = np.ones(d)
    if preconditioner is not None:
        pre = np.asarray(preconditioner, dtype=float)
        if pre.ndim == 0:
            beta[n:] = float(pre)
        else:
            beta = pre.reshape(d).copy()
    beta = torch.tensor(beta, dtype=torch.float64, device=device)
    beta_real = beta.float()
    lr = learning_rate * beta
    rho0 = math.log(math.expm1(0.01))
    phi0 = torch.tensor(np.concatenate([np.asarray(init_mean, float), np.full(n, rho0)]),
                        device=device)

    rate = min(sampling_rate * rate_factor, 1.0)
    noise_std = noise_scale * noise_multiplier * clip_norm
    norm_bound = clip_norm if clip else math.inf
    generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]
    eps = torch.stack([_centred_normal((n_steps, n_mc_samples, n), g) for g in generators])
    batches = [poisson_subsamples(n_examples, rate, n_steps, g, device) for g in generators]
    noise = torch.stack([torch.randn((1 if reuse_noise else n_steps, d), generator=g,
                                     dtype=torch.float64) for g in generators]).to(device)

    def clipped_sum(phi, eps_t, weights, *rows):
        grads = per_example_gradients(model, phi, eps_t, rows, n_examples, beta_real)
        return _clip_and_sum(grads, norm_bound, weights=weights)[0]

    step_all = vmap(clipped_sum)
    phi = phi0.repeat(len(seeds), 1)
    released = torch.empty((n_steps, len(seeds), d), dtype=torch.float64, device=device)
    for t in range(n_steps):
        index = pad_sequence([b[t] for b in batches], batch_first=True)
        if index.shape[1] == 0:
            index = torch.zeros((len(seeds), 1), dtype=torch.int64, device=device)
        sizes = torch.tensor([len(b[t]) for b in batches], device=device)
        weights = (torch.arange(index.shape[1], device=device) < sizes[:, None]).float()
        rows = tuple(a[index] for a in tensors)
        sums = step_all(phi, eps[:, t], weights, *rows)
        g = release(sums, noise_std, beta, noise=noise[:, 0 if reuse_noise else t])
        released[t] = g
        phi = phi - lr * g
    return released.transpose(0, 1).cpu().numpy(), beta.cpu().numpy()
