"""Many independent DPVI runs in lockstep, for simulation studies.

A TARP study fits hundreds of data sets of the same shape. On small problems a
single run is bound by the fixed cost of each tensor operation, not by arithmetic
(the 10-D regression: about 1.2 ms per step for a batch of 500 rows), so running R
data sets side by side in one process, with every operation vectorised over the
runs by :func:`torch.func.vmap`, does the same work several times faster.

Every run is exactly a :func:`skdpvi.dpvi.run_dpvi` run: it draws its subsamples,
Monte Carlo draws and noise from its own generator, seeded with its own
``random_state``, in the same order, so its release equals the single run's up to
floating-point rounding (tested). The privacy guarantee of each run is therefore
that of :func:`~skdpvi.dpvi.run_dpvi`, for its own data set. Runs share the
settings (and hence sigma, C, kappa, T, the step sizes), and their data sets must
have the same number of rows.
"""

import torch
from torch.func import vmap

from .data import _REAL, _Data
from .loop import _Engine, _progress_bar
from .sampling import _generator
from .threads import _limit_threads, _resolve_threads

__all__ = ["run_dpvi_batched"]


def _padded_indices(blocks, n_examples, device):
    """Stack R runs' padded (T, B_r) indices into (T, R, B_max) indices into the runs'
    rows laid end to end (run r's row i at ``r * n_examples + i``) and a 0/1 mask.

    Padding rows point at the run's example 0 and carry weight 0, so they change
    neither the clipped sum nor the diagnostics. The block is int32 when the runs'
    rows allow it (for 64 runs of 5,000 rows it is 512 x 64 x 642 entries: 84 MB as
    int32, twice that as int64, and filling it was a tenth of the draw thread's time).
    """
    width = max(max(b.index.shape[1] for b in blocks), 1)
    n_block, n_runs = blocks[0].index.shape[0], len(blocks)
    small = (torch.int32 if n_runs * n_examples < 2**31 and blocks[0].index.dtype == torch.int32
             else torch.int64)
    index = torch.empty((n_block, n_runs, width), dtype=small, device=device)
    for r, b in enumerate(blocks):
        used = b.index.shape[1]
        torch.add(b.index, r * n_examples, out=index[:, r, :used])
        index[:, r, used:] = r * n_examples
    sizes = torch.stack([b.counts for b in blocks], 1)  # (T, R)
    mask = torch.arange(width, device=device) < sizes[..., None]
    return index, mask, sizes.amax(1).tolist()


def run_dpvi_batched(
    model,
    datasets,
    *,
    random_states,
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
    step_scales=None,
    step_matrix=None,
    record_trace=False,
    return_diagnostics=False,
    device="cpu",
    verbose=0,
    n_threads=None,
):
    """Run :func:`~skdpvi.dpvi.run_dpvi` on several data sets at once.

    Parameters
    ----------
    model : skdpvi.models.Model
    datasets : sequence of tuples of array-like
        R data sets, each as the ``data`` argument of :func:`~skdpvi.dpvi.run_dpvi`,
        all with the same number of rows.
    random_states : sequence of int
        One seed per data set: run r is the run of ``run_dpvi(model, datasets[r],
        random_state=random_states[r], ...)``.
    noise_multiplier, clip_norm, sampling_rate, n_steps, burn_in, learning_rate, \
learning_rate_scale, n_mc_samples, preconditioner, init_mean, init_scale, step_scales, \
step_matrix, record_trace, return_diagnostics, device, verbose, n_threads
        As in :func:`~skdpvi.dpvi.run_dpvi`, shared by all runs (``step_matrix`` is
        called on each run's own burn-in pairs).

    Returns
    -------
    list of DPVIResult
        One per data set, in order.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpvi.datasets import make_gamma_exponential
    >>> from skdpvi.dpvi import run_dpvi_batched
    >>> from skdpvi.models import GammaExponentialModel
    >>> data = [(make_gamma_exponential(500, random_state=k)[0],) for k in range(3)]
    >>> runs = run_dpvi_batched(GammaExponentialModel(), data, random_states=[0, 1, 2],
    ...                         noise_multiplier=1.0, clip_norm=2.0, sampling_rate=0.1,
    ...                         n_steps=100, burn_in=20)
    >>> len(runs), runs[0].phi.shape
    (3, (2,))
    """
    datasets = list(datasets)
    seeds = [int(s) for s in random_states]
    if len(datasets) == 0:
        raise ValueError("datasets must contain at least one data set.")
    if len(seeds) != len(datasets):
        raise ValueError(
            f"random_states must give one seed per data set: {len(seeds)} seeds for "
            f"{len(datasets)} data sets."
        )
    device = torch.device(device)
    prepared = [_Data(model, data, device, prepare=True) for data in datasets]
    sizes = {d.n_examples for d in prepared}
    if len(sizes) != 1:
        raise ValueError(f"All data sets must have the same number of rows; got {sorted(sizes)}.")
    with _limit_threads(_resolve_threads(n_threads)):
        return _run_batched(model, prepared, seeds, device, verbose,
                            noise_multiplier=noise_multiplier, clip_norm=clip_norm,
                            sampling_rate=sampling_rate, n_steps=n_steps, burn_in=burn_in,
                            learning_rate=learning_rate,
                            learning_rate_scale=learning_rate_scale,
                            n_mc_samples=n_mc_samples, preconditioner=preconditioner,
                            init_mean=init_mean, init_scale=init_scale,
                            step_scales=step_scales, step_matrix=step_matrix,
                            record_trace=record_trace,
                            return_diagnostics=return_diagnostics)


def _run_batched(model, prepared, seeds, device, verbose, **settings):
    """The body of :func:`run_dpvi_batched` on prepared :class:`_Data` of equal size."""
    n_runs, n_examples = len(prepared), prepared[0].n_examples
    n_steps = settings["n_steps"]
    engine = _Engine(model, n_examples, device, n_runs=n_runs, **settings)
    generators = [_generator(seed, device) for seed in seeds]
    # every run's step at once: the GLM path carries the runs as a lead axis, the
    # dense path runs under vmap
    clipped_sums = engine.clipped_sum if engine.glm else vmap(engine.clipped_sum)
    # gathering rows of all runs through one flat index is much faster than a[rows, index]
    flat = tuple(torch.cat(parts) for parts in zip(*(engine.columns(d) for d in prepared)))
    packed = engine.glm
    if packed:  # (X, y, |beta x|^2) side by side: one gather per step
        p = flat[0].shape[1]
        flat = (torch.cat([flat[0], flat[1][:, None], flat[2][:, None]], 1),)

    def gather(source, index):
        rows = index.shape[1]
        return source.index_select(0, index.reshape(-1)).reshape(n_runs, rows, *source.shape[1:])

    def gather_all(at):
        if not packed:
            return tuple(gather(a, at) for a in flat)
        both = gather(flat[0], at)
        # y and the row norms contiguous: elementwise operations broadcasting a
        # strided (R, B) operand over the draws run 4x slower
        return both[..., :p], both[..., p].contiguous(), both[..., p + 1].contiguous()

    def draw(n_block):
        blocks = [engine.draw(generator, n_block) for generator in generators]
        eps = torch.stack([b.eps_real if engine.glm else b.eps for b in blocks], 1)
        noise = torch.stack([b.noise for b in blocks], 1)  # (T, R, d)
        index, mask, widths = _padded_indices(blocks, n_examples, device)
        return eps, noise, index, mask, widths

    drawn = engine.prefetched(draw)

    def draw_block(n_block):
        eps, noise, index, mask, widths = next(drawn)

        def step(j, phi):
            width = max(widths[j], 1)
            rows = gather_all(index[j, :, :width])
            real = mask[j, :, :width]
            return (*clipped_sums(phi, eps[j], real.to(_REAL), *rows), real)

        return noise, step

    phi, recorder, counts = engine.descend(engine.phi0.repeat(n_runs, 1), draw_block,
                                           _progress_bar(verbose, n_steps, f"DP-SGD x {n_runs}"))
    return engine.results(phi, recorder, counts, runs=[(r,) for r in range(n_runs)])
