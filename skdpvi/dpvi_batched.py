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

import numpy as np
import torch
from torch.func import vmap
from torch.nn.utils.rnn import pad_sequence

from .dpvi import (
    _draw_block,
    _prepare_data,
    _progress_bar,
    _result,
    _schedule,
    _TraceRecorder,
    _use_glm_path,
    clip_and_sum,
    glm_clip_and_sum,
    per_example_gradients,
    release,
)

__all__ = ["run_dpvi_batched"]


def _padded_indices(batches_per_run, device):
    """Stack R lists of T index tensors into (T, R, B_max) indices and a 0/1 mask.

    Padding rows point at example 0 and carry weight 0, so they change neither the
    clipped sum nor the diagnostics.
    """
    padded = [pad_sequence(batches, batch_first=True) for batches in batches_per_run]
    width = max(max(p.shape[1] for p in padded), 1)
    n_block = len(batches_per_run[0])
    index = torch.zeros((n_block, len(padded), width), dtype=torch.int64, device=device)
    for r, p in enumerate(padded):
        index[:, r, : p.shape[1]] = p
    sizes = torch.tensor([[len(b) for b in batches] for batches in batches_per_run],
                         device=device).T  # (T, R)
    mask = torch.arange(width, device=device) < sizes[..., None]
    return index, mask


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
    record_trace=False,
    return_diagnostics=False,
    device="cpu",
    verbose=0,
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
learning_rate_scale, n_mc_samples, preconditioner, init_mean, init_scale, record_trace, \
return_diagnostics, device, verbose
        As in :func:`~skdpvi.dpvi.run_dpvi`, shared by all runs.

    Returns
    -------
    list of DPVIResult
        One per data set, in order.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpvi.datasets import make_gamma_exponential
    >>> from skdpvi.dpvi_batched import run_dpvi_batched
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
    real = torch.float32
    prepared = [_prepare_data(model, data, real, device) for data in datasets]
    sizes = {t[0].shape[0] for t in prepared}
    if len(sizes) != 1:
        raise ValueError(f"All data sets must have the same number of rows; got {sorted(sizes)}.")
    tensors = tuple(torch.stack(parts) for parts in zip(*prepared))  # each (R, N, ...)
    n_runs, n_examples = tensors[0].shape[:2]
    n = model.n_params
    d = 2 * n
    plan = _schedule(model, noise_multiplier=noise_multiplier, clip_norm=clip_norm,
                     n_steps=n_steps, learning_rate=learning_rate,
                     learning_rate_scale=learning_rate_scale, preconditioner=preconditioner,
                     init_mean=init_mean, init_scale=init_scale)
    phi = torch.tensor(plan.phi0, dtype=torch.float64, device=device).repeat(n_runs, 1)
    beta_t = torch.tensor(plan.beta, dtype=torch.float64, device=device)
    beta_r = beta_t.to(real)
    lr_t = torch.tensor(plan.lr, dtype=torch.float64, device=device)
    noise_std = float(noise_multiplier) * float(clip_norm)
    generators = []
    for seed in seeds:
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        generators.append(gen)

    if _use_glm_path(model, n_examples, sampling_rate):
        beta_w = beta_t[: model.n_weights]
        all_sq_norms = ((tensors[0].double() * beta_w) ** 2).sum(-1).to(real)  # (R, N)

        def one_run(phi_r, eps_r, mask_r, sq_r, *batch_r):
            return glm_clip_and_sum(model, phi_r.to(real), eps_r.to(real), batch_r, n_examples,
                                    beta_r, clip_norm, sq_r, weights=mask_r)
    else:
        all_sq_norms = None

        def one_run(phi_r, eps_r, mask_r, *batch_r):
            per_example = per_example_gradients(model, phi_r, eps_r, batch_r, n_examples, beta_r)
            return clip_and_sum(per_example, clip_norm, weights=mask_r)

    step = vmap(one_run)
    # gathering rows of all runs through one flat index is much faster than a[rows, index]
    offsets = torch.arange(n_runs, device=device)[:, None] * n_examples
    flat = tuple(a.reshape(n_runs * n_examples, *a.shape[2:]) for a in tensors)
    if all_sq_norms is not None:
        flat_sq = all_sq_norms.reshape(-1)

    def gather(source, index):
        rows = index.shape[1]
        return source.index_select(0, index.reshape(-1)).reshape(n_runs, rows, *source.shape[1:])

    block = min(n_steps, 512)
    recorder = _TraceRecorder(n_steps, burn_in, (n_runs,), d, block, record_trace, device)
    n_clipped = torch.zeros(n_runs, dtype=torch.float64, device=device)
    n_seen = torch.zeros(n_runs, dtype=torch.float64, device=device)
    progress = _progress_bar(verbose, n_steps, desc=f"DP-SGD x {n_runs}")

    for start in range(0, n_steps, block):
        stop = min(start + block, n_steps)
        draws = [_draw_block(gen, stop - start, n_mc_samples, n, n_examples, sampling_rate,
                             device) for gen in generators]
        eps_block = torch.stack([e for e, _, _ in draws], 1)  # (T, R, S, n)
        noise_block = torch.stack([z for _, _, z in draws], 1)  # (T, R, d)
        index_block, mask_block = _padded_indices([b for _, b, _ in draws], device)
        weight_block = mask_block.to(real)
        for j in range(stop - start):
            recorder.phi[j] = phi
            index = index_block[j] + offsets
            batch = tuple(gather(a, index) for a in flat)
            if all_sq_norms is None:
                clipped_sum, norms = step(phi, eps_block[j], weight_block[j], *batch)
            else:
                clipped_sum, norms = step(phi, eps_block[j], weight_block[j],
                                          gather(flat_sq, index), *batch)
            g_tilde = release(clipped_sum, noise_std, beta_t, noise=noise_block[j])
            if return_diagnostics:
                n_clipped += ((norms > clip_norm) & mask_block[j]).sum(1)
                n_seen += mask_block[j].sum(1)
            recorder.grad[j] = g_tilde
            phi = phi - lr_t * g_tilde
        recorder.flush(start, stop)
        if progress is not None:
            progress.update(stop - start)
    if progress is not None:
        progress.close()

    sums, shift = recorder.finish(phi)
    phi = phi.cpu().numpy()
    return [
        _result(phi[r], sums[:, r], shift[r], plan,
                None if recorder.trace_phi is None else recorder.trace_phi[:, r],
                None if recorder.trace_grad is None else recorder.trace_grad[:, r],
                (float(n_clipped[r]), float(n_seen[r])) if return_diagnostics else None,
                noise_multiplier=noise_multiplier, clip_norm=clip_norm,
                sampling_rate=sampling_rate, n_steps=n_steps, burn_in=burn_in)
        for r in range(n_runs)
    ]
