"""The compiled code of :mod:`~skdpvi.dpvi.logistic_kernel`: a block of logistic DP-SGD steps.

Imported only when a run takes the kernel (it imports numba). :func:`block_kernel`
compiles the block for a number of Monte Carlo draws fixed at compile time, so
that the loops over the draws have a known length and stay in registers; each
number of draws compiles once per machine (numba caches it on disk).

Per step: the draws of theta; per row of the Poisson subsample the logits of every
draw (over the row's stored entries); the sigmoids of all of them in one flat loop
(:func:`sigmoid`, which LLVM vectorises); then per row the residuals, the row's
norm, its clip factor and its share of the two clipped sums; last the noise, the
release ``g_tilde`` and the step.
"""

import math

import numpy as np
from numba import njit

__all__ = ["block_kernel", "sigmoid"]

# reassociation lets LLVM reorder the short sums over the draws; no assumption about
# NaN or infinity is made, and a division by zero gives inf as in torch
# (error_model="numpy"): a diverging run must show as the torch step's does, in
# non-finite sums, not raise mid-run
_FASTMATH = {"reassoc", "contract", "arcp"}

# tanh(z) ~ z P(z^2) / Q(z^2) on |z| <= _CLAMP, the rational approximation of
# Eigen's vectorised float tanh (beyond the clamp tanh is 1 to float precision)
_P = tuple(np.float32(v) for v in (
    4.89352455891786e-03, 6.37261928875436e-04, 1.48572235717979e-05, 5.12229709037114e-08,
    -8.60467152213735e-11, 2.00018790482477e-13, -2.76076847742355e-16))
_Q = tuple(np.float32(v) for v in (
    4.89352518554385e-03, 2.26843463243900e-03, 1.18534705686654e-04, 1.19825839466702e-06))
_P1, _P3, _P5, _P7, _P9, _P11, _P13 = _P
_Q0, _Q2, _Q4, _Q6 = _Q
_CLAMP = np.float32(7.90531110763549805)
_HALF = np.float32(0.5)


@njit(inline="always", cache=True, fastmath=_FASTMATH)
def sigmoid(x):
    """``1 / (1 + exp(-x))`` of a float32, as ``(1 + tanh(x / 2)) / 2``.

    Polynomial arithmetic only (no call to ``exp``), so that a loop of them
    vectorises; absolute error below 2e-7 everywhere (float32's own rounding of the
    exact formula: 9e-8; tested).
    """
    z = min(max(_HALF * x, -_CLAMP), _CLAMP)
    z2 = z * z
    p = z2 * _P13 + _P11
    p = z2 * p + _P9
    p = z2 * p + _P7
    p = z2 * p + _P5
    p = z2 * p + _P3
    p = z2 * p + _P1
    q = z2 * _Q6 + _Q4
    q = z2 * q + _Q2
    q = z2 * q + _Q0
    return _HALF + _HALF * (z * p / q)


_BLOCKS = {}


def block_kernel(n_draws):
    """The compiled block of steps for ``n_draws`` Monte Carlo draws (see ``block``)."""
    if n_draws not in _BLOCKS:
        _BLOCKS[n_draws] = njit(cache=True, nogil=True, error_model="numpy",
                                fastmath=_FASTMATH)(_block(int(n_draws)))
    return _BLOCKS[n_draws]


def _block(n_draws):
    def block(cols, col_stride, vals, y, index, sizes, eps, noise, phi, beta, lr_before,
              lr_after, switch, n_examples, prior_var, clip_norm, phis, grads, counts):
        """Run the steps of one block; write phi_t and g_tilde_{t+1} of each; return phi_T.

        Row i's stored entries are ``vals[i, m]`` in columns ``cols[col_stride * i, m]``
        (``col_stride`` 0 for dense rows: one row of column numbers serves all);
        ``eps`` (steps, n_draws, n) and ``noise`` (steps, 2n, already times sigma C)
        are the block's draws, ``index`` (steps, width) and ``sizes`` (steps,) its
        padded Poisson subsamples. The step is ``lr_before`` before block step
        ``switch`` and ``lr_after`` from it on (``switch < 0``: ``lr_before``
        throughout). ``counts`` accumulates the rows clipped and seen (private:
        diagnostics only).
        """
        n_block, n = eps.shape[0], eps.shape[2]
        width = vals.shape[1]
        theta_t = np.empty((n, n_draws), np.float32)  # the draws, by coordinate
        weighted_t = np.empty((n, n_draws), np.float32)  # eps * beta_rho dscale / S
        a = np.empty(n)
        c = np.empty(n)
        beta_a = np.empty(n)
        sum_w = np.empty(n)
        sum_s = np.empty(n)
        r = np.empty(n_draws, np.float32)
        row_scale = np.empty(width)
        probabilities = np.empty(index.shape[1] * n_draws, np.float32)
        rows_beta_a = np.empty(index.shape[1])
        rows_sq = np.empty(index.shape[1])
        lr = lr_before
        for j in range(n_block):
            if j == switch:
                lr = lr_after
            phis[j, :] = phi
            # the part of every row that does not depend on the example: the
            # regulariser (1/N) mean_s [log q - log prior] of gradients.py, preconditioned
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
                # the prior's gradient is -theta / prior_var
                a[k] = beta[k] * mean_theta / n_draws / prior_var / n_examples
                c[k] = beta[n + k] * (mean_theta_eps / n_draws / prior_var - 1.0 / scale) \
                    * dscale / n_examples
                beta_a[k] = beta[k] * a[k]
                aa += a[k] * a[k]
                cc += c[k] * c[k]
                sum_w[k] = 0.0
                sum_s[k] = 0.0
            size = sizes[j]
            # the logits of every row and draw, then their sigmoids in one flat loop
            for b in range(size):
                i = index[j, b]
                row = col_stride * i
                logits = probabilities[b * n_draws:(b + 1) * n_draws]
                for s in range(n_draws):
                    logits[s] = np.float32(0.0)
                x_beta_a = 0.0
                x_sq = 0.0
                for m in range(width):
                    v = vals[i, m]
                    col = cols[row, m]
                    x_beta_a += v * beta_a[col]
                    x_sq += (beta[col] * v) ** 2
                    for s in range(n_draws):
                        logits[s] += v * theta_t[col, s]
                rows_beta_a[b] = x_beta_a
                rows_sq[b] = x_sq
            for t in range(size * n_draws):
                probabilities[t] = sigmoid(probabilities[t])
            total = 0.0
            for b in range(size):
                i = index[j, b]
                row = col_stride * i
                r_mean = 0.0
                for s in range(n_draws):
                    r[s] = y[i] - probabilities[b * n_draws + s]
                    r_mean += r[s]
                r_mean /= n_draws
                # squared norm of the row: the means' part |a - r_mean beta x|^2,
                # then the scales' part |c - (r . weighted) x|^2, the latter over the
                # stored entries only (c alone elsewhere, whose square cc holds)
                sq_w = aa - 2.0 * r_mean * rows_beta_a[b] + r_mean * r_mean * rows_sq[b]
                sq_s = cc
                for m in range(width):
                    col = cols[row, m]
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
                share = factor * r_mean
                for m in range(width):
                    col = cols[row, m]
                    sum_w[col] -= share * vals[i, m]
                    sum_s[col] -= factor * row_scale[m]
            counts[1] += size
            for k in range(n):  # the release (paper A59), then the step
                grads[j, k] = (total * a[k] + beta[k] * sum_w[k] + noise[j, k]) / beta[k]
                grads[j, n + k] = (total * c[k] + sum_s[k] + noise[j, n + k]) / beta[n + k]
            for k in range(2 * n):
                phi[k] -= lr[k] * grads[j, k]
        return phi

    return block
