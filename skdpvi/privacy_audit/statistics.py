"""Test statistics on the released gradients, per canary coordinate.

The adversary sees every released noisy gradient ``g_t`` of a run. Multiplied back by
the preconditioner, ``beta * g_t`` is the clipped sum plus N(0, (sigma C)^2) noise;
its projection on the canary's clipped gradient, divided by sigma C, is

    x_t = b_t / sigma + z_t,    z_t ~ N(0, 1),  b_t ~ Bernoulli(q),

for the real mechanism: ``b_t`` says whether the canary was sampled at step t. The
candidate statistics of a trial (one canary coordinate of one run) summarise
``x_1..x_T``; which one works best depends on how the mechanism is broken, so the
audit picks one on held-out trials:

``sum``               the sum over steps (the optimal test when q = 1)
``likelihood_ratio``  sum_t log(1 - q + q exp(x_t / sigma - 1 / (2 sigma^2))), the
                      Neyman-Pearson statistic of the accounted mechanism
``max``               the largest step (a rare, large contribution: no clipping)
``spread``            max - min over the steps (a canary that comes and goes over
                      the same noise: reused noise)
"""

import numpy as np

__all__ = ["projections", "statistics"]


def projections(trace_grad, preconditioner, coordinates, noise_multiplier, clip_norm):
    """Standardised projections of the released gradients on the canaries' gradients.

    Parameters
    ----------
    trace_grad : ndarray of shape (..., T, d)
        Released noisy gradients (``DPVIResult.trace_grad``), any lead axes (runs).
    preconditioner : ndarray of shape (d,)
    coordinates : ndarray of int, shape (K,)
        Each canary's coordinate; its clipped gradient is ``-C`` times that unit vector.
    noise_multiplier, clip_norm : float
        The *claimed* sigma and C.

    Returns
    -------
    ndarray of shape (..., K, T)
        ``x_t`` of every canary coordinate, N(0, 1) when the canary is out.
    """
    noisy_sum = np.asarray(trace_grad)[..., coordinates] * preconditioner[coordinates]
    return np.swapaxes(-noisy_sum / (noise_multiplier * clip_norm), -1, -2)


def statistics(x, noise_multiplier, sampling_rate):
    """The candidate statistics of trials ``x`` (n_trials, T): {name: (n_trials,)}."""
    sigma, q = float(noise_multiplier), float(sampling_rate)
    n_steps = x.shape[-1]
    out = {"sum": x.sum(-1) / np.sqrt(n_steps)}
    if q < 1:
        log_terms = np.logaddexp(np.log1p(-q), np.log(q) + x / sigma - 0.5 / sigma**2)
        out["likelihood_ratio"] = log_terms.sum(-1)
    if n_steps > 1:
        out["max"] = x.max(-1)
        out["spread"] = x.max(-1) - x.min(-1)
    return out
