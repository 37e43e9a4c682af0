"""What the backends share: the collapsed posterior of v on a grid, and phi* | v.

Given v, m = phi* - shift is exactly Gaussian (:meth:`GradientModel.conditional_m
<skdpvi.noise_aware.GradientModel.conditional_m>`), so a backend only has to
handle the 1-D posterior of each v_i and then draws m | v exactly.
"""

import numpy as np

__all__ = ["grid_posterior", "draw_m"]


def grid_posterior(gm, n_grid=2001):
    """Adaptive grid on v per coordinate: (grid (d, G), normalised log density)."""
    lo = gm.prior_v_mean - 12 * gm.prior_v_sd
    hi = gm.prior_v_mean + 12 * gm.prior_v_sd
    for _ in range(2):  # the second pass zooms in on where the mass is
        grid = lo[:, None] + (hi - lo)[:, None] * np.linspace(0, 1, n_grid)[None, :]
        logp = gm.log_marginal_v(grid)
        logp = logp - logp.max(1, keepdims=True)
        keep = logp > -45
        first = np.argmax(keep, 1)
        last = n_grid - 1 - np.argmax(keep[:, ::-1], 1)
        rows = np.arange(gm.dim)
        new_lo = grid[rows, np.maximum(first - 1, 0)]
        new_hi = grid[rows, np.minimum(last + 1, n_grid - 1)]
        lo, hi = new_lo, new_hi
    return grid, logp


def draw_m(gm, v, rng):
    mean, sd = gm.conditional_m(v)
    return (mean + sd * rng.standard_normal(v.shape)).T  # (n_samples, d)
