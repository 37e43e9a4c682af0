"""What the mechanism's clipping removes from the expected released gradient.

The statistics posterior (:mod:`skdpvi.noise_aware.statistics`) corrects its design
for it where a model describes its examples
(:meth:`~skdpvi.models.statistics.DataStatistics.per_example_predictive`).
"""

import numpy as np

__all__ = ["clipping_correction"]


def clipping_correction(data_statistics, phi, eta, preconditioner, clip_norms):
    """What clipping removes from the expected released gradient, per step.

    For a model with a :meth:`~skdpvi.models.statistics.DataStatistics.per_example_predictive`, the
    preconditioned per-example gradient is ``beta * (J t + r / N)``; clipping it to
    norm C removes ``(1 - f(t)) (J t + r / N)``, ``f = min(1, C / norm)``, so that in
    expectation over the model's examples

        E[g / kappa] = J eta + r - N E_t[(1 - f(t)) (J t + r / N)].

    A model clipped by groups (:meth:`~skdpvi.models.statistics.DataStatistics.clip_groups`) has one factor
    ``f_g = min(1, C_g / norm_g)`` per group (a group with ``C_g = 0`` is dropped).

    Parameters
    ----------
    data_statistics : skdpvi.models.statistics.DataStatistics
    phi : ndarray of shape (T, d)
    eta : ndarray of shape (n_statistics,)
        Where the predictive distribution of t is taken (a first estimate).
    preconditioner : ndarray of shape (d,)
    clip_norms : float or sequence of float
        C for a model clipped as one row; the norm of each clip group otherwise.

    Returns
    -------
    ndarray of shape (T, d), or None when the model has no per-example predictive.
    """
    eta = np.asarray(eta, float)
    fast = getattr(data_statistics, "clipping_loss", None)
    if fast is not None:  # a model's own shortcut (it has a predictive by construction)
        return np.concatenate([fast(phi[start:start + 512], eta, preconditioner, clip_norms)
                               for start in range(0, len(phi), 512)])
    predictive = data_statistics.per_example_predictive(eta)
    if predictive is None:
        return None
    weights = predictive[1]
    n = data_statistics.n_examples
    index = data_statistics.clip_groups()
    if index is None:
        groups = [(np.arange(np.shape(phi)[-1]), float(clip_norms))]
    else:
        groups = list(zip(index, np.broadcast_to(clip_norms, (len(index),))))
    out = []
    for start in range(0, len(phi), 512):
        rows = data_statistics.per_example_rows(phi[start:start + 512], eta)
        scaled = rows * preconditioner
        lost = np.empty_like(rows)
        for index, c_g in groups:
            norms = np.sqrt((scaled[..., index] ** 2).sum(-1))
            kept = (np.minimum(1.0, c_g / np.maximum(norms, 1e-300)) if c_g > 0
                    else np.zeros_like(norms))
            lost[..., index] = rows[..., index] * (1.0 - kept)[..., None]
        out.append(n * np.einsum("n,tnd->td", weights, lost))
    return np.concatenate(out)
