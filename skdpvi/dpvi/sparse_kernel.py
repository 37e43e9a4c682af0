"""The DP-SGD steps of a logistic regression on sparse rows, compiled (numba).

Census and health-record designs are mostly one-hot columns: Adult's prepared rows
hold 8-11 non-zeros of 57. The torch step (:class:`~skdpvi.dpvi.mechanism._GLMClip`)
multiplies every batch row in full and dispatches some sixty small operations a step,
which is most of its time at Adult's size. This module runs a whole block of steps
in one compiled call on the rows' non-zeros only: per row the logits of the Monte
Carlo draws, the residuals, the row's clipped norm and its share of the two sums,
then the noise, the release and the step, exactly the arithmetic of the torch path
(same random numbers, drawn by :mod:`~skdpvi.dpvi.sampling` as before), in float64
throughout (the torch path runs the rows in float32), so the two agree to rounding.

The data enter as a padded row-sparse copy (:func:`padded_rows`): the column index and
value of each row's non-zeros, padded with zero values. It is made once per fit from
the prepared rows, and only when it is small (:func:`sparse_layout`).
"""

import math

import numpy as np

try:  # numba is a dependency, but the torch path works without it
    from numba import njit
except ImportError:  # pragma: no cover - exercised only where numba is missing
    njit = None

__all__ = []

#: The padded copy is used when the rows' largest non-zero count is at most this
#: share of the columns (measured crossover: benchmarks/bench_sparse_kernel.py).
MAX_DENSITY = 0.35


def available():
    """Whether the compiled kernel can run (numba imports)."""
    return njit is not None


def padded_rows(X):
    """The row-sparse copy of a dense (N, p) array: (columns int32, values float32), both (N, m).

    m is the largest number of non-zeros of a row; shorter rows are padded with
    column 0 and value 0, which adds nothing to any product.
    """
    X = np.asarray(X)
    nonzero = X != 0
    counts = nonzero.sum(1)
    width = max(int(counts.max()) if len(counts) else 0, 1)
    cols = np.zeros((X.shape[0], width), dtype=np.int32)
    vals = np.zeros((X.shape[0], width), dtype=np.float32)
    rows, columns = np.nonzero(nonzero)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slots = np.arange(len(rows)) - starts[rows]
    cols[rows, slots] = columns
    vals[rows, slots] = X[rows, columns]
    return cols, vals


def sparse_layout(X):
    """``padded_rows(X)`` when its widest row is at most ``MAX_DENSITY`` of the columns, else None."""
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        return None
    widest = int((X != 0).sum(1).max())
    if widest > MAX_DENSITY * X.shape[1]:
        return None
    return padded_rows(X)


def _kernel(cols, vals, y, index, sizes, eps, noise, phi, beta, lr_before, lr_after,
            switch, n_examples, prior_var, clip_norm, phis, grads, counts):
    """Run the steps of one block; write phi_t and g_tilde_{t+1} of each; return phi.

    ``eps`` (steps, S, n), ``noise`` (steps, 2n) already times sigma C, ``index``
    (steps, width) and ``sizes`` (steps,) the padded Poisson subsamples; the step
    is ``lr_before`` before block step ``switch`` and ``lr_after`` from it on (a
    negative switch: ``lr_after`` throughout). ``counts`` accumulates (clipped,
    seen) rows.
    """
    n_block, n_draws, n = eps.shape
    width = cols.shape[1]
    theta_t = np.empty((n, n_draws), np.float32)
    weighted_t = np.empty((n, n_draws), np.float32)
    a = np.empty(n)
    c = np.empty(n)
    beta_a = np.empty(n)
    sum_w = np.empty(n)
    sum_s = np.empty(n)
    r = np.empty(n_draws, np.float32)
    row_scale = np.empty(width)
    lr = lr_before
    for j in range(n_block):
        if j == switch:
            lr = lr_after
        phis[j, :] = phi
        # the example-independent part of every row: the regulariser, preconditioned
        aa = 0.0
        cc = 0.0
        for k in range(n):
            rho = phi[n + k]
            scale = math.log1p(math.exp(-abs(rho))) + max(rho, 0.0)  # softplus
            dscale = 1.0 / (1.0 + math.exp(-rho))
            weight = beta[n + k] * dscale / n_draws
            mean_theta = 0.0
            mean_theta_eps = 0.0
            for s in range(n_draws):
                e = eps[j, s, k]
                t = phi[k] + scale * e
                theta_t[k, s] = t
                weighted_t[k, s] = e * weight
                mean_theta += t
                mean_theta_eps += t * e
            # grad log prior = -theta / prior_var
            a[k] = beta[k] * (mean_theta / n_draws / prior_var) / n_examples
            c[k] = beta[n + k] * (-dscale / scale
                                  + mean_theta_eps / n_draws / prior_var * dscale) / n_examples
            beta_a[k] = beta[k] * a[k]
            aa += a[k] * a[k]
            cc += c[k] * c[k]
            sum_w[k] = 0.0
            sum_s[k] = 0.0
        total = 0.0
        for b in range(sizes[j]):
            i = index[j, b]
            for s in range(n_draws):
                r[s] = np.float32(0.0)
            x_beta_a = 0.0
            x_sq = 0.0
            for m in range(width):
                v = vals[i, m]
                col = cols[i, m]
                x_beta_a += v * beta_a[col]
                x_sq += (beta[col] * v) ** 2
                for s in range(n_draws):
                    r[s] += v * theta_t[col, s]
            r_mean = 0.0
            for s in range(n_draws):
                r[s] = y[i] - np.float32(1.0) / (np.float32(1.0) + np.exp(-r[s]))
                r_mean += r[s]
            r_mean /= n_draws
            sq_w = aa - 2.0 * r_mean * x_beta_a + r_mean * r_mean * x_sq
            sq_s = cc
            for m in range(width):
                col = cols[i, m]
                acc = np.float32(0.0)
                for s in range(n_draws):
                    acc += r[s] * weighted_t[col, s]
                rv = acc * vals[i, m]
                row_scale[m] = rv
                sq_s += rv * (rv - 2.0 * c[col])
            norm = math.sqrt(max(sq_w + sq_s, 0.0))
            factor = min(1.0, clip_norm / (norm + 1e-12))
            if norm > clip_norm:
                counts[0] += 1.0
            total += factor
            for m in range(width):
                col = cols[i, m]
                sum_w[col] -= beta[col] * factor * r_mean * vals[i, m]
                sum_s[col] -= factor * row_scale[m]
        counts[1] += sizes[j]
        for k in range(n):
            g_mu = (total * a[k] + sum_w[k] + noise[j, k]) / beta[k]
            g_rho = (total * c[k] + sum_s[k] + noise[j, n + k]) / beta[n + k]
            grads[j, k] = g_mu
            grads[j, n + k] = g_rho
        for k in range(2 * n):
            phi[k] -= lr[k] * grads[j, k]
    return phi


_compiled_block = None if njit is None else njit(cache=True, nogil=True, fastmath={"reassoc", "contract", "arcp"})(_kernel)


def uses_sparse_kernel(model, engine, data):
    """The padded rows of ``data`` when this run's steps can be compiled, else None.

    The kernel covers skdpvi's logistic regression model with Monte Carlo draws, one
    run, the whole row clipped as one (no clip groups), a diagonal step (no
    ``step_matrix``), data prepared up front, and rows sparse enough
    (:func:`sparse_layout`).
    """
    from ..models import LogisticRegressionModel

    if (_compiled_block is None or engine.device.type != "cpu"
            or engine.step_matrix is not None
            or engine.group_norms is not None or data.columns is None
            or type(model).glm_gradients is not LogisticRegressionModel.glm_gradients
            or type(model).grad_log_prior_unconstrained
            is not LogisticRegressionModel.grad_log_prior_unconstrained
            or not isinstance(model, LogisticRegressionModel)
            or getattr(model, "exact_expectations", False)):
        return None
    return sparse_layout(data.columns[0].numpy())


def descend_sparse(engine, layout, y, blocks, progress=None):
    """:meth:`~skdpvi.dpvi.loop._Engine.descend` of one run, each block of steps compiled.

    ``layout`` is the (columns, values) pair of :func:`sparse_layout`, ``y`` the
    targets (N,), ``blocks`` the run's :class:`~skdpvi.dpvi.sampling._Block` s in
    order. Returns what ``descend`` returns.
    """
    import torch

    from .statistics import _TraceRecorder

    cols, vals = layout
    y = np.ascontiguousarray(y, dtype=np.float32)
    settings = engine.settings
    n_steps, burn_in = settings["n_steps"], settings["burn_in"]
    block_sizes = engine.block_sizes()
    recorder = _TraceRecorder(n_steps, burn_in, (), engine.phi0.shape[-1], block_sizes[0],
                              engine.record_trace, engine.device)
    phis, grads = recorder.phi.numpy(), recorder.grad.numpy()
    phi = engine.phi0.numpy().copy()
    beta = engine.beta.numpy()
    lr = engine.lr.numpy()
    burn_in_lr = None if engine.burn_in_lr is None else engine.burn_in_lr.numpy()
    counts = np.zeros(2)
    prior_var = float(engine.model.prior_scale) ** 2
    start = 0
    for size, block in zip(block_sizes, blocks):
        stop = start + size
        before, switch = lr, -1
        if burn_in_lr is not None and start < burn_in:
            before = burn_in_lr
            switch = burn_in - start if burn_in < stop else -1
        phi = _compiled_block(
            cols, vals, y, block.index.numpy(), block.counts.numpy(), block.eps.numpy(),
            block.noise.numpy(), phi, beta, before, lr, switch, engine.n_examples,
            prior_var, float(settings["clip_norm"]), phis, grads, counts)
        recorder.flush(start, stop)
        if progress is not None:
            progress.update(size)
        start = stop
    if progress is not None:
        progress.close()
    to_tensor = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    return to_tensor(phi), recorder, (to_tensor(counts[0]), to_tensor(counts[1]))
