"""The random numbers of DP-SGD: Poisson subsamples, Monte Carlo draws, noise.

Every run draws from one :class:`torch.Generator`, seeded with its ``random_state``,
in blocks of steps and in a fixed order (:func:`_draw_block`). The lockstep engine
draws in the same order from each run's own generator, so its runs reproduce the
single runs bit for bit: change the order here and both change together.
"""

import math

import torch

__all__ = ["poisson_subsamples", "poisson_subsample"]


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


def _draw_block(generator, n_block, n_mc_samples, n_params, n_examples, sampling_rate, device):
    """The random numbers of ``n_block`` steps, in the engine's fixed order.

    Monte Carlo draws (n_block, S, n), then the Poisson subsamples (a list of index
    tensors), then the standard normal DP noise (n_block, 2 n). The batched engine
    draws in the same order from each run's own generator, so its runs reproduce
    :func:`~skdpvi.dpvi.run_dpvi` with the same seed.
    """
    eps = _centred_normal((n_block, n_mc_samples, n_params), generator, device)
    batches = poisson_subsamples(n_examples, sampling_rate, n_block, generator, device)
    noise = torch.randn((n_block, 2 * n_params), generator=generator, dtype=torch.float64,
                        device=device)
    return eps, batches, noise
