"""One DPVI run (:func:`run_dpvi`), and the DP-SGD loop the lockstep engine shares.

Each step

1. draws a Poisson subsample (:mod:`~skdpvi.dpvi.sampling`),
2. computes the preconditioned per-example gradients of the negative ELBO
   (:mod:`~skdpvi.dpvi.gradients`),
3. clips them, sums them, adds noise and divides by beta (:mod:`~skdpvi.dpvi.mechanism`):
   the released noisy gradient ``g_tilde``,
4. updates ``phi <- phi - learning_rate * g_tilde`` (:mod:`~skdpvi.dpvi.schedule`),

and the released pairs (phi_t, g_tilde_{t+1}) after burn-in are folded into running
sums (:mod:`~skdpvi.dpvi.statistics`). :class:`_Engine` holds all of that for a run,
or for runs in lockstep (:mod:`~skdpvi.dpvi.batched`: only the draws and the
gathering of batches differ). A logistic run's steps may instead run a block at a time
in compiled code (:mod:`~skdpvi.dpvi.logistic_kernel`: the same release to rounding).
"""

from concurrent.futures import ThreadPoolExecutor

import torch

from ..models.base import GLMModel
from .data import _REAL, _Data
from .gradients import per_example_gradients
from .logistic_kernel import descend_compiled, kernel_layout
from .mechanism import _clip_and_sum, _GLMClip, group_clip_norms
from .result import _result
from .sampling import _Block, _block_steps, _draw_block, _generator
from .schedule import _schedule
from .statistics import _TraceRecorder
from .step_matrix import _StepMatrix
from .threads import _limit_threads, _resolve_threads
from .validation import _check_settings

__all__ = ["run_dpvi"]

#: Expected size (batch rows x weights) of the gradient block above which the
#: factored GLM path (:func:`glm_clip_and_sum`) is faster than the dense one.
_GLM_PATH_MIN_BLOCK = 20_000
#: Rows per chunk of a large step: its clipped sum is accumulated chunk by chunk, so
#: its temporaries stay O(chunk p) whatever kappa N is (bench_scaling.py).
_STEP_CHUNK_ROWS = 1 << 15


def _use_glm_path(model, n_examples, sampling_rate, n_runs=1):
    # saves two passes over the (B, n) gradient block, costs small operations
    # (bench_engine); runs in lockstep share every operation: their blocks add up
    return (isinstance(model, GLMModel)
            and n_runs * n_examples * sampling_rate * model.n_weights >= _GLM_PATH_MIN_BLOCK)


def _progress_bar(verbose, n_steps, desc="DP-SGD"):
    """A tqdm bar (with rate and ETA) when ``verbose``, else None."""
    if not verbose:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=n_steps, desc=desc, unit="step", mininterval=0.5)


class _Engine:
    """What a DP-SGD run fixes before its first step, and the loop over its steps.

    One engine serves one run (phi of shape (d,), ``n_runs=None``) or ``n_runs`` runs
    in lockstep (phi of shape (R, d)) on data sets of ``n_examples`` rows; the keyword
    arguments are those of :func:`run_dpvi`.
    """

    def __init__(self, model, n_examples, device, *, noise_multiplier, clip_norm,
                 sampling_rate, n_steps, burn_in, learning_rate, learning_rate_scale,
                 n_mc_samples, preconditioner, init_mean, init_scale, record_trace,
                 return_diagnostics, step_scales=None, step_matrix=None, n_runs=None):
        _check_settings(noise_multiplier=noise_multiplier, clip_norm=clip_norm,
                        sampling_rate=sampling_rate, n_steps=n_steps, burn_in=burn_in,
                        n_mc_samples=n_mc_samples)
        self.model = model
        self.step_matrix = (None if step_matrix is None else _StepMatrix(
            step_matrix, burn_in=burn_in, n_steps=n_steps, record_trace=record_trace,
            device=device))
        self.n_examples = n_examples
        self.device = device
        self.n_mc_samples = n_mc_samples
        self.record_trace = record_trace
        self.return_diagnostics = return_diagnostics
        #: what every DPVIResult reports
        self.settings = dict(noise_multiplier=noise_multiplier, clip_norm=clip_norm,
                             sampling_rate=sampling_rate, n_steps=n_steps, burn_in=burn_in)
        self.plan = _schedule(model, noise_multiplier=noise_multiplier, clip_norm=clip_norm,
                              n_steps=n_steps, learning_rate=learning_rate,
                              learning_rate_scale=learning_rate_scale,
                              preconditioner=preconditioner, init_mean=init_mean,
                              init_scale=init_scale, step_scales=step_scales)
        self.phi0 = torch.tensor(self.plan.phi0, dtype=torch.float64, device=device)
        self.beta = torch.tensor(self.plan.beta, dtype=torch.float64, device=device)
        self.beta_real = self.beta.to(_REAL)
        self.lr = torch.tensor(self.plan.lr, dtype=torch.float64, device=device)
        self.burn_in_lr = (None if self.plan.burn_in_scale is None
                           else torch.tensor(self.plan.burn_in_lr, dtype=torch.float64,
                                             device=device))
        self.noise_std = float(noise_multiplier) * float(clip_norm)
        self.glm = _use_glm_path(model, n_examples, sampling_rate, n_runs or 1)
        shares = getattr(model, "clip_shares", None)
        self.group_norms = (None if shares is None
                            else group_clip_norms(float(clip_norm), shares))
        self.glm_clip = (_GLMClip(model, n_examples, self.beta_real, float(clip_norm),
                                  batched=n_runs is not None, group_norms=self.group_norms)
                         if self.glm else None)

    def columns(self, data):
        """The per-example tensors whose rows a step gathers, of a prepared :class:`_Data`
        (on the GLM path with ``|beta_w x_i|^2`` of every row last, once per fit)."""
        if not self.glm:
            return data.columns
        return (*data.columns, self.row_sq_norms(data))

    def row_sq_norms(self, data):
        """``|beta_w x_i|^2`` of every row of a :class:`_Data` (the GLM path)."""
        return data.row_sq_norms(self.beta[: self.model.n_weights])

    def draw(self, generator, n_block):
        """The random numbers of one run's next ``n_block`` steps (see ``_draw_block``)."""
        return _Block(*_draw_block(generator, n_block, self.n_mc_samples,
                                   self.model.n_params, self.n_examples,
                                   self.settings["sampling_rate"], self.device),
                      glm=self.glm, noise_std=self.noise_std)

    def block_sizes(self):
        """The number of steps of every block of a run, in order."""
        n_steps = self.settings["n_steps"]
        block = _block_steps(self.n_examples, self.settings["sampling_rate"], n_steps)
        return [min(block, n_steps - start) for start in range(0, n_steps, block)]

    def prefetched(self, draw, prefetch=True):
        """``draw(n_block)`` of every block in order, each drawn while the previous runs.

        The draws of a run need only its generator, never phi, so a second thread
        draws block k + 1 (Poisson gaps, Monte Carlo draws, noise: about 15 % of a
        step on Adult) while the loop runs block k; the numbers are the same, drawn
        in the same order, on the run's torch thread count (OpenMP's is per thread: a
        fresh one had one per core, the second spinning beside the loop).
        ``prefetch=False`` draws in the calling thread.
        """
        sizes = self.block_sizes()
        if not prefetch or len(sizes) == 1:
            for size in sizes:
                yield draw(size)
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="skdpvi-draws",
                                initializer=torch.set_num_threads,
                                initargs=(torch.get_num_threads(),)) as pool:
            future = pool.submit(draw, sizes[0])
            for k in range(len(sizes)):
                block = future.result()
                if k + 1 < len(sizes):
                    future = pool.submit(draw, sizes[k + 1])
                yield block

    def clipped_sum(self, phi, eps, weights, *rows):
        """Clipped sum of one run's preconditioned per-example gradients, and their norms.

        ``rows`` are the prepared batch rows (and on the GLM path ``|beta_w x_i|^2``
        last); ``eps`` is float32 on the GLM path, float64 otherwise; ``weights``
        multiply the clipped rows (None: all count).
        """
        if self.glm:
            X, y, sq_norms = rows
            return self.glm_clip(phi.to(_REAL), eps, X, y, sq_norms, weights)
        per_example = per_example_gradients(self.model, phi, eps, rows, self.n_examples,
                                            self.beta_real)
        groups = None if self.group_norms is None else (self.model.n_weights, self.group_norms)
        return _clip_and_sum(per_example, self.settings["clip_norm"], weights=weights,
                             groups=groups)

    def descend(self, phi, draw_block, progress=None):
        """Run all the steps from ``phi``; return (phi_T, recorder, (n_clipped, n_seen)).

        ``phi`` has shape (*lead, d): lead is () for one run, (R,) for R runs.
        ``draw_block(n_block)`` draws the random numbers of the next ``n_block`` steps
        and returns ``(noise, step)``: the DP noise (n_block, *lead, d), already
        multiplied by sigma C, and ``step(j, phi) -> (clipped_sum, norms, mask)`` for
        step j of the block, where ``mask`` marks the real rows of ``norms`` (None:
        all are).
        """
        n_steps, clip_norm = self.settings["n_steps"], self.settings["clip_norm"]
        lead, d = tuple(phi.shape[:-1]), phi.shape[-1]
        block = _block_steps(self.n_examples, self.settings["sampling_rate"], n_steps)
        recorder = _TraceRecorder(n_steps, self.settings["burn_in"], lead, d, block,
                                  self.record_trace, self.device)
        n_clipped = torch.zeros(lead, dtype=torch.float64, device=self.device)
        n_seen = torch.zeros(lead, dtype=torch.float64, device=self.device)
        beta, lr, diagnostics = self.beta, self.lr, self.return_diagnostics
        phis, grads = recorder.phi, recorder.grad
        # with step_scales the step changes at burn-in (-1: never)
        switch = -1 if self.burn_in_lr is None else self.settings["burn_in"]
        if switch > 0:
            lr = self.burn_in_lr
        # with step_matrix the update is matrix @ (lr * g_tilde) from burn-in on
        matrix = None
        matrix_at = () if self.step_matrix is None else self.step_matrix.steps
        for start in range(0, n_steps, block):
            stop = min(start + block, n_steps)
            noise, step = draw_block(stop - start)
            for j in range(stop - start):
                if start + j == switch:
                    lr = self.lr
                if start + j in matrix_at:
                    matrix = self.step_matrix(recorder, start, j, lead, d)
                phis[j] = phi
                clipped_sum, norms, mask = step(j, phi)
                g_tilde = (clipped_sum + noise[j]) / beta  # the release (paper A59)
                if diagnostics:
                    clipped = norms > clip_norm
                    if mask is None:
                        n_clipped += clipped.sum(-1)
                        n_seen += norms.shape[-1]
                    else:
                        n_clipped += (clipped & mask).sum(-1)
                        n_seen += mask.sum(-1)
                grads[j] = g_tilde
                if matrix is None:
                    phi = phi - lr * g_tilde
                else:
                    phi = phi - torch.einsum("...ij,...j->...i", matrix, lr * g_tilde)
            recorder.flush(start, stop)
            if progress is not None:
                progress.update(stop - start)
        if progress is not None:
            progress.close()
        return phi, recorder, (n_clipped, n_seen)

    def results(self, phi, recorder, counts, runs):
        """The :class:`DPVIResult` of each run of :meth:`descend`'s output.

        ``runs`` index the lead axes of phi: ``[()]`` for one run,
        ``[(0,), ..., (R - 1,)]`` for R runs.
        """
        sums, shift, cross = recorder.finish(phi)
        phi = phi.cpu().numpy()
        n_clipped, n_seen = counts
        results = []
        for run in runs:
            behind = (slice(None), *run)  # the run of an array with a leading step axis
            results.append(_result(
                phi[run], sums[(slice(None), slice(None), *run)], shift[run], cross[run],
                self.plan,
                None if recorder.trace_phi is None else recorder.trace_phi[behind],
                None if recorder.trace_grad is None else recorder.trace_grad[behind],
                (float(n_clipped[run]), float(n_seen[run])) if self.return_diagnostics
                else None,
                **self.settings,
            ))
        return results


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
    step_scales=None,
    step_matrix=None,
    random_state=0,
    record_trace=False,
    return_diagnostics=False,
    device="cpu",
    verbose=0,
    n_threads=None,
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
        Initial standard deviation of q (finite, > 0).
    step_scales : pair of float or array-like of shape (d,), optional
        ``(before, after)``: multipliers of the step ``lambda * beta_i`` of every
        coordinate before ``burn_in`` and from ``burn_in`` on (default 1 and 1). A
        larger step before burn-in shortens the descent to the optimum; the step
        after burn-in sets how far the released trace wanders around it (its
        ``learning_rate`` is reported in the result). The mechanism, and so the
        privacy guarantee, does not depend on the steps.
    step_matrix : callable, optional
        ``(trace_phi, trace_grad) -> M`` (d, d), computed from the released pairs at
        burn-in and at each tenth of the window; from then on a step is
        ``phi <- phi - M @ (lambda * beta * g_tilde)`` (:mod:`skdpvi.dpvi.step_matrix`;
        needs ``record_trace=True``; e.g. :func:`skdpvi.noise_aware.recording_step_matrix`).
    random_state : int
        Seed of the torch generator that draws batches, MC samples and noise.
    record_trace : bool, default=False
        Keep the full trace and noisy gradients (memory O(T d)).
    return_diagnostics : bool, default=False
        Also compute the fraction of clipped per-example gradients. This is a
        statistic of the private data without noise: never release it.
    device : str or torch.device, default="cpu"
    verbose : int, default=0
        Show a progress bar (steps per second and time left) when > 0.
    n_threads : int, optional
        Threads torch may use during the run (the caller's setting is restored
        afterwards). Default: ``$SKDPVI_NUM_THREADS`` if set, else 1; see
        :mod:`skdpvi.dpvi.threads`.

    Returns
    -------
    DPVIResult
    """
    device = torch.device(device)
    data = _Data(model, data, device)
    with _limit_threads(_resolve_threads(n_threads)):
        return _run(model, data, device, random_state, verbose, noise_multiplier=noise_multiplier,
                    clip_norm=clip_norm, sampling_rate=sampling_rate, n_steps=n_steps,
                    burn_in=burn_in, learning_rate=learning_rate,
                    learning_rate_scale=learning_rate_scale, n_mc_samples=n_mc_samples,
                    preconditioner=preconditioner, init_mean=init_mean, init_scale=init_scale,
                    step_scales=step_scales, step_matrix=step_matrix,
                    record_trace=record_trace, return_diagnostics=return_diagnostics)


def _run(model, data, device, random_state, verbose, **settings):
    """The body of :func:`run_dpvi` on a :class:`_Data`."""
    engine = _Engine(model, data.n_examples, device, **settings)
    generator = _generator(random_state, device)
    blocks = engine.prefetched(lambda n_block: engine.draw(generator, n_block))
    progress = _progress_bar(verbose, settings["n_steps"])
    layout = kernel_layout(model, engine, data)
    if layout is not None:  # the same steps, a block at a time in compiled code
        return engine.results(*descend_compiled(engine, layout, blocks, progress), runs=[()])[0]
    sq_norms = engine.row_sq_norms(data) if engine.glm else None

    # data prepared up front: every step gathers its rows into the same buffers
    columns = None if data.columns is None else (
        data.columns if sq_norms is None else (*data.columns, sq_norms))
    buffers = {"rows": 0}

    def draw_block(n_block):
        block = next(blocks)
        assert block.eps.shape[0] == n_block
        eps = block.eps_real if engine.glm else block.eps
        index, sizes = block.index, block.sizes
        if columns is not None and buffers["rows"] < index.shape[1]:
            buffers.update(rows=index.shape[1], out=tuple(
                torch.empty((index.shape[1], *a.shape[1:]), dtype=a.dtype, device=a.device)
                for a in columns))

        def gathered_sum(phi, j, rows):
            if columns is not None:
                batch = tuple(torch.index_select(a, 0, rows, out=out[: len(rows)])
                              for a, out in zip(columns, buffers["out"]))
            else:
                batch = data.gather(rows)
                if sq_norms is not None:
                    batch = (*batch, sq_norms.index_select(0, rows))
            return engine.clipped_sum(phi, eps[j], None, *batch)

        def step(j, phi):
            rows = index[j, : sizes[j]]
            if columns is not None or sizes[j] <= _STEP_CHUNK_ROWS:
                return (*gathered_sum(phi, j, rows), None)
            # a large batch, chunk by chunk: the same sum, O(chunk) temporaries
            parts = [gathered_sum(phi, j, rows[start: start + _STEP_CHUNK_ROWS])
                     for start in range(0, sizes[j], _STEP_CHUNK_ROWS)]
            total = sum((part[0] for part in parts[1:]), parts[0][0])  # in order
            return total, torch.cat([norms for _, norms in parts]), None

        return block.noise, step

    return engine.results(*engine.descend(engine.phi0, draw_block, progress), runs=[()])[0]
