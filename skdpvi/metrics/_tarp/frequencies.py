"""The TARP statistic f_i (eq. A63): posterior mass of the ball that just reaches the truth."""

import numpy as np

# Vector norms (``ord`` of numpy.linalg.norm) for the supported distances.
_DISTANCES = {"euclidean": 2, "manhattan": 1, "cityblock": 1, "chebyshev": np.inf}
# Upper bound on the number of floats handled at once when computing distances.
_CHUNK_ELEMENTS = 2**22


def _frequencies(samples, theta_true, refs, distance, normalize, marginal):
    """f_i of eq. A63: shape (K,), or (K, P) per parameter when ``marginal``."""
    n_sim, n_draws, n_params = samples.shape
    ord_ = _DISTANCES[distance]
    freq = np.empty((n_sim, n_params) if marginal else n_sim)
    chunk = max(1, _CHUNK_ELEMENTS // (n_draws * n_params))
    for start in range(0, n_sim, chunk):
        sl = slice(start, start + chunk)
        s, r, t = samples[sl], refs[sl, None, :], theta_true[sl, None, :]
        if normalize:
            scale = s.std(axis=1, keepdims=True)
            scale[scale == 0] = 1.0
            s, r, t = s / scale, r / scale, t / scale
        if marginal:
            freq[sl] = (np.abs(s - r) < np.abs(t - r)).mean(axis=1)
        else:
            d_draws = np.linalg.norm(s - r, ord=ord_, axis=-1)
            d_true = np.linalg.norm(t - r, ord=ord_, axis=-1)
            freq[sl] = (d_draws < d_true).mean(axis=1)
    return freq
