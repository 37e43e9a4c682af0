"""The random numbers of DP-SGD: Poisson subsamples, Monte Carlo draws, noise.

Every run draws from one :class:`torch.Generator`, seeded with its ``random_state``,
in blocks of steps and in a fixed order (:func:`_draw_block`). The lockstep engine
draws in the same order from each run's own generator, so its runs reproduce the
single runs bit for bit: change the order here and both change together.
"""

import math

import torch

from .data import _REAL
from .validation import _check_count

__all__ = ["poisson_subsamples", "poisson_subsample"]


def _generator(seed, device):
    """The torch generator a run draws all its random numbers from."""
    generator = torch.Generator(device=device)
    generator.manual_seed(int(seed))
    return generator


def poisson_subsamples(n_examples, sampling_rate, n_steps, generator, device="cpu",
                       chunk=None):
    """Index tensors of ``n_steps`` independent Poisson subsamples.

    In each subsample every example is included independently with the given rate,
    so the batch size is Binomial(n_examples, sampling_rate) and may be zero, as the
    privacy accounting of Poisson-subsampled DP-SGD requires. The indices are the
    successes of a Bernoulli(rate) sequence, whose gaps are i.i.d. Geometric(rate):
    about ``rate * n_examples`` draws per step instead of ``n_examples``, drawn for
    all steps at once. The indices of each step come out sorted.

    Parameters
    ----------
    n_examples : int
    sampling_rate : float
        In (0, 1]; 1 takes every example.
    n_steps : int
    generator : torch.Generator
    device : str or torch.device, default="cpu"
    chunk : int, optional
        Gaps drawn per step before checking whether the end of the data was reached
        (default: mean + 6 sd + 16); more are drawn if not.

    Returns
    -------
    list of torch.Tensor
        ``n_steps`` sorted int64 index tensors.
    """
    _check_count("n_examples", n_examples, low=0)
    _check_count("n_steps", n_steps)
    if chunk is not None:
        _check_count("chunk", chunk)
    try:
        rate = float(sampling_rate)
    except (TypeError, ValueError):
        raise ValueError(f"sampling_rate must be a number, got {sampling_rate!r}.") from None
    if not 0 < rate <= 1:
        raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate!r}.")
    index, counts = _poisson_block(n_examples, sampling_rate, n_steps, generator, device,
                                   chunk)
    return [row[:count].long() for row, count in zip(index, counts.tolist())]


#: Steps drawn at once, at most: one geometric draw, cumulative sum and search per
#: block of steps instead of per step, and the released pairs folded once per block.
_BLOCK_STEPS = 512
#: Largest padded index block (steps x width) drawn 512 steps at a time; a run whose
#: block of 512 steps would be larger draws ``_LARGE_BLOCK_ELEMENTS`` at a time, so that
#: the block stays small next to the data.
_BLOCK_ELEMENTS = 1 << 21
_LARGE_BLOCK_ELEMENTS = 1 << 19
#: Rows of geometric gaps (float64) drawn at a time within a block.
_GAP_ELEMENTS = 1 << 18


def _chunk(n_examples, sampling_rate):
    """Gaps drawn per step before checking for the end of the data: mean + 6 sd + 16."""
    expected = n_examples * sampling_rate
    return int(expected + 6 * math.sqrt(expected) + 16)


def _block_steps(n_examples, sampling_rate, n_steps):
    """Steps whose random numbers a run draws at once.

    512, unless the padded index block (512 x the gaps of a step) would exceed
    ``_BLOCK_ELEMENTS`` (from about 3,700 expected rows per step on): then as many
    steps as fit in ``_LARGE_BLOCK_ELEMENTS``. The draws of a run depend on its block
    size, so it is a function of the problem alone, the same for
    :func:`~skdpvi.dpvi.run_dpvi` and :func:`~skdpvi.dpvi.run_dpvi_batched`.
    """
    width = max(n_examples if sampling_rate >= 1 else _chunk(n_examples, sampling_rate), 1)
    if _BLOCK_STEPS * width <= _BLOCK_ELEMENTS:
        return max(1, min(n_steps, _BLOCK_STEPS))
    return max(1, min(n_steps, _LARGE_BLOCK_ELEMENTS // width))


def _poisson_block(n_examples, sampling_rate, n_steps, generator, device="cpu", chunk=None):
    """The subsamples of :func:`poisson_subsamples` as one padded index matrix.

    Returns ``(index, counts)``: row t of the integer matrix ``index`` (n_steps,
    width) holds the ``counts[t]`` sorted indices of step t, then padding that points
    at example 0 (int32 when the data have fewer than 2^30 rows, else int64). The
    random draws, and so the subsamples, are those of :func:`poisson_subsamples` with
    the same generator state: the gaps are drawn in pieces of rows, in order, which
    draws the same numbers as one draw of the whole block.
    """
    if sampling_rate >= 1:
        index = torch.arange(n_examples, device=device).expand(n_steps, n_examples)
        return index, torch.full((n_steps,), n_examples, dtype=torch.int64, device=device)
    if chunk is None:
        chunk = _chunk(n_examples, sampling_rate)
    small = torch.int32 if n_examples < 2**30 else torch.int64
    positions = torch.empty((n_steps, chunk), dtype=small, device=device)
    rows = max(1, _GAP_ELEMENTS // chunk)
    # one buffer of gaps, summed in place and copied into the positions: no temporaries
    # per piece (the draws run in a second thread, whose freed blocks malloc keeps)
    gaps = torch.empty((min(rows, n_steps), chunk), dtype=torch.float64, device=device)
    for start in range(0, n_steps, rows):
        stop = min(start + rows, n_steps)
        piece = gaps[: stop - start].geometric_(sampling_rate, generator=generator)
        torch.cumsum(piece, 1, out=piece)
        positions[start:stop].copy_(piece).sub_(1)
    end = torch.full((n_steps, 1), n_examples, dtype=small, device=device)
    counts = torch.searchsorted(positions, end).squeeze(1)
    full = torch.nonzero(counts == chunk).squeeze(1).tolist()
    if full:  # rare (6 sd): a row ended before n_examples; go on, row by row, in order
        more_rows = {}
        for t in full:
            pieces, count, last = [positions[t].long()], chunk, int(positions[t, -1])
            while count == chunk:
                more = last + torch.cumsum(
                    torch.empty(chunk, dtype=torch.float64, device=device).geometric_(
                        sampling_rate, generator=generator), 0).to(torch.int64)
                count = int(torch.searchsorted(more, n_examples))
                pieces.append(more[:count])
                last = int(more[-1])
            more_rows[t] = torch.cat(pieces)
        width = max(len(row) for row in more_rows.values())
        wide = torch.zeros((n_steps, width), dtype=small, device=device)
        wide[:, :chunk] = positions
        for t, row in more_rows.items():
            wide[t, : len(row)] = row
            counts[t] = len(row)
        positions = wide
    padding = torch.arange(positions.shape[1], device=device) >= counts[:, None]
    return positions.masked_fill_(padding, 0), counts


def poisson_subsample(n_examples, sampling_rate, generator, device="cpu"):
    """Indices of one Poisson subsample (see :func:`poisson_subsamples`).

    Parameters
    ----------
    n_examples : int
    sampling_rate : float
    generator : torch.Generator
    device : str or torch.device, default="cpu"

    Returns
    -------
    torch.Tensor
        Sorted int64 indices; possibly empty.
    """
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

    Monte Carlo draws (n_block, S, n), then the Poisson subsamples (the padded index
    matrix and the batch sizes of :func:`_poisson_block`), then the standard normal
    DP noise (n_block, 2 n). The batched engine draws in the same order from each
    run's own generator, so its runs reproduce :func:`~skdpvi.dpvi.run_dpvi` with the
    same seed.
    """
    eps = _centred_normal((n_block, n_mc_samples, n_params), generator, device)
    index, counts = _poisson_block(n_examples, sampling_rate, n_block, generator, device)
    noise = torch.randn((n_block, 2 * n_params), generator=generator, dtype=torch.float64,
                        device=device)
    return eps, index, counts, noise


class _Block:
    """The random numbers of one run's next steps (:func:`_draw_block`), ready for the
    step loop.

    ``eps`` (n_block, S, n) float64 Monte Carlo draws (``eps_real``: float32, for
    the GLM path, ``glm=True``), ``index`` (n_block, width) and ``counts`` (n_block,)
    the padded Poisson subsamples (``sizes``: the counts as Python ints), ``noise``
    (n_block, d) the DP noise already multiplied by ``noise_std`` = sigma C.
    """

    def __init__(self, eps, index, counts, noise, *, glm, noise_std):
        self.eps = eps
        self.eps_real = eps.to(_REAL) if glm else None
        self.index = index
        self.counts = counts
        self.sizes = counts.tolist()
        self.noise = noise_std * noise
