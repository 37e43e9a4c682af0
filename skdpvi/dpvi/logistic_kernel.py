"""The DP-SGD steps of a logistic regression, a block at a time in compiled code.

At the sizes this package is used at, the torch step
(:class:`~skdpvi.dpvi.mechanism._GLMClip`) is bound by the fixed cost of some sixty
small tensor operations a step, not by arithmetic, and it multiplies every batch row
in full, zeros included, where census and health-record designs are mostly one-hot
(Adult's prepared rows hold 9-11 non-zeros of 57). A whole block of steps runs
instead in one call compiled by numba (the compiled code is in
:mod:`~skdpvi.dpvi.logistic_steps`; this module decides where it runs and feeds
it). It is the same mechanism as the torch path (per-row clipping to C, noise
sigma C, the Poisson subsample) on the same random numbers (drawn by
:mod:`~skdpvi.dpvi.sampling`, in the same order), in float32 per row and float64 per
step like the torch path; its sigmoid is a rational approximation within 2e-7 of
the exact one, so the two agree to rounding (tested).

:func:`kernel_layout` decides per run: the kernel serves skdpvi's
:class:`~skdpvi.models.LogisticRegressionModel` with Monte Carlo draws, one run on the
CPU, no clip groups and no ``step_matrix``, dense or sparse input (large data only
when sparse enough for a compact row-sparse copy: :func:`_layout`), and only where its
measured cost model (:data:`KERNEL_NS`, :data:`TORCH_NS`) says it is faster than
the torch step. numba is imported, and the kernel compiled for the run's number of
draws (or loaded from numba's on-disk cache), on the first run that uses it.
"""

import functools

import numpy as np

__all__ = []

#: Cost model of one step, in nanoseconds (``benchmarks/bench_logistic_kernel.py``,
#: one thread): the kernel ``KERNEL_NS * B S w`` for B rows, S draws and rows of w
#: stored entries; the torch step ``TORCH_NS[0] + TORCH_NS[1] * B S n``.
KERNEL_NS = 0.8
TORCH_NS = (150_000.0, 0.33)
#: A row-sparse copy (column and value of each non-zero) is made when the widest
#: row has at most this share of the columns; otherwise the kernel reads the rows.
SPARSE_SHARE = 0.5


@functools.lru_cache(maxsize=None)
def available():
    """Whether numba imports (the kernel's only requirement; tried once per process).

    A numba that is installed but does not import (one built for another NumPy, say)
    leaves the runs to the torch step instead of failing them.
    """
    try:
        import numba  # noqa: F401
    except Exception:  # pragma: no cover - ImportError, or numba's own checks
        return False
    return True


def compiled_block(n_draws):
    """The block of steps compiled for ``n_draws`` draws (:mod:`~skdpvi.dpvi.logistic_steps`)."""
    from .logistic_steps import block_kernel

    return block_kernel(n_draws)


def padded_rows(X, width=None):
    """The row-sparse copy of a dense (N, p) array: (columns int32, values float32), both (N, m).

    m is ``width``, by default the largest number of non-zeros of a row; shorter
    rows are padded with column 0 and value 0, which adds nothing to any sum.
    """
    X = np.asarray(X)
    nonzero = X != 0
    counts = nonzero.sum(1)
    if width is None:
        width = max(int(counts.max()) if len(counts) else 0, 1)
    cols = np.zeros((X.shape[0], width), dtype=np.int32)
    vals = np.zeros((X.shape[0], width), dtype=np.float32)
    rows, columns = np.nonzero(nonzero)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slots = np.arange(len(rows)) - starts[rows]
    cols[rows, slots] = columns
    vals[rows, slots] = X[rows, columns]
    return cols, vals


def _chunks(data):
    """The prepared (X, y) of the data's rows as float32 arrays, chunk by chunk."""
    from .data import _CHUNK_ROWS

    for start in range(0, data.n_examples, _CHUNK_ROWS):
        X, y = data.prepared(start, min(start + _CHUNK_ROWS, data.n_examples))
        yield X.numpy(), y.numpy()


def _layout(data, worth_it):
    """``(cols, col_stride, vals, y)`` of the data's prepared rows, or None.

    ``worth_it(width, n)`` says whether the kernel, on rows of ``width`` stored
    entries of ``n`` columns, is worth running. Data prepared up front (dense or
    sparse input small enough to have been prepared were it dense: the same rows
    either way) are read where they lie when dense and copied row-sparse when the
    widest row has at most ``SPARSE_SHARE`` of the columns. Larger data are only
    copied row-sparse, chunk by chunk, and only when the copy is at most half the
    size of a float32 copy of the data (widest row at most n / 4): the engine's
    memory stays O(kappa N) otherwise.
    """
    small = data.columns is not None or data.small()
    if data.columns is not None and len(data.columns) != 2:
        return None
    if small:
        columns = data.columns if data.columns is not None else data.prepared(0, data.n_examples)
        X, y = (np.ascontiguousarray(c.numpy(), dtype=np.float32) for c in columns)
        n = X.shape[1]
        widest = int((X != 0).sum(1).max())
        width = widest if widest <= SPARSE_SHARE * n else n
        if not worth_it(width, n):
            return None
        if width == n:
            return np.arange(n, dtype=np.int32)[None, :], 0, X, y
        cols, vals = padded_rows(X, width)
        return cols, 1, vals, y
    widest, n = 0, None
    for X, _ in _chunks(data):
        n = X.shape[1]
        widest = max(widest, int((X != 0).sum(1).max()))
        if widest > n / 4:
            return None
    if not worth_it(widest, n):
        return None
    cols = np.empty((data.n_examples, widest), dtype=np.int32)
    vals = np.empty((data.n_examples, widest), dtype=np.float32)
    y = np.empty(data.n_examples, dtype=np.float32)
    start = 0
    for X, targets in _chunks(data):
        stop = start + len(X)
        cols[start:stop], vals[start:stop] = padded_rows(X, widest)
        y[start:stop] = targets
        start = stop
    return cols, 1, vals, y


def kernel_layout(model, engine, data):
    """How the kernel reads the rows of this run: ``(cols, col_stride, vals, y)``, or None.

    None where the kernel does not serve the run (see the module docstring) or its
    cost model says the torch step is faster. ``vals`` is the prepared float32 data
    itself for dense rows (``col_stride`` 0), else a row-sparse copy
    (:func:`padded_rows`, see :func:`_layout`); ``y`` the targets as float32.
    """
    from ..models import LogisticRegressionModel

    cls = type(model)
    if (not isinstance(model, LogisticRegressionModel)
            or cls.glm_gradients is not LogisticRegressionModel.glm_gradients
            or cls.grad_log_prior_unconstrained
            is not LogisticRegressionModel.grad_log_prior_unconstrained
            or getattr(model, "exact_expectations", False)
            or engine.device.type != "cpu" or engine.step_matrix is not None
            or engine.group_norms is not None or data.n_examples == 0):
        return None
    draws = engine.n_mc_samples * engine.n_examples * engine.settings["sampling_rate"]

    def worth_it(width, n):  # numba is imported only where the kernel would be faster
        return (KERNEL_NS * draws * width < TORCH_NS[0] + TORCH_NS[1] * draws * n
                and available())

    return _layout(data, worth_it)


def descend_compiled(engine, layout, blocks, progress=None):
    """:meth:`~skdpvi.dpvi.loop._Engine.descend` of one run, a block of steps per call.

    ``layout`` is what :func:`kernel_layout` returned, ``blocks`` the run's
    :class:`~skdpvi.dpvi.sampling._Block` s in order.
    Returns what ``descend`` returns.
    """
    import torch

    from .statistics import _TraceRecorder

    kernel = compiled_block(engine.n_mc_samples)
    cols, col_stride, vals, y = layout
    settings = engine.settings
    n_steps, burn_in = settings["n_steps"], settings["burn_in"]
    sizes = engine.block_sizes()
    recorder = _TraceRecorder(n_steps, burn_in, (), engine.phi0.shape[-1], sizes[0],
                              engine.record_trace, engine.device)
    phis, grads = recorder.phi.numpy(), recorder.grad.numpy()
    phi = engine.phi0.numpy().copy()
    beta, lr = engine.beta.numpy(), engine.lr.numpy()
    burn_in_lr = None if engine.burn_in_lr is None else engine.burn_in_lr.numpy()
    counts = np.zeros(2)
    prior_var = float(engine.model.prior_scale) ** 2
    small = np.int32 if engine.n_examples < 2**31 else np.int64
    start = 0
    for size, block in zip(sizes, blocks):
        stop = start + size
        before, switch = lr, -1
        if burn_in_lr is not None and start < burn_in:  # the step changes at burn-in
            before, switch = burn_in_lr, (burn_in - start if burn_in < stop else -1)
        phi = kernel(cols, col_stride, vals, y, np.ascontiguousarray(block.index.numpy(), small),
                     block.counts.numpy(), block.eps.numpy(), block.noise.numpy(), phi,
                     beta, before, lr, switch, engine.n_examples, prior_var,
                     float(settings["clip_norm"]), phis, grads, counts)
        recorder.flush(start, stop)
        if progress is not None:
            progress.update(size)
        start = stop
    if progress is not None:
        progress.close()
    return (torch.from_numpy(phi), recorder,
            (torch.tensor(counts[0], dtype=torch.float64),
             torch.tensor(counts[1], dtype=torch.float64)))
