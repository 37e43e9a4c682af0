"""The ``exact`` backend: a fine adaptive grid on v_i; the reference implementation.

The collapsed density of each v_i is evaluated on a grid that zooms in on its mass,
v is drawn by inverting the trapezoidal CDF, then phi* | v exactly.
"""

import numpy as np

from ._common import draw_m, grid_posterior

__all__ = ["sample_exact"]


def sample_exact(gm, n_samples, rng, n_grid=2001):
    """Draws of m = phi* - shift, shape (n_samples, d), and ``{"v": v}``.

    ``n_grid`` is the number of grid points per coordinate (``backend_options``).
    """
    grid, logp = grid_posterior(gm, n_grid)
    dens = np.exp(logp)
    cdf = np.concatenate(
        [np.zeros((gm.dim, 1)), np.cumsum(0.5 * (dens[:, 1:] + dens[:, :-1]) * np.diff(grid), 1)],
        1,
    )
    cdf /= cdf[:, -1:]
    u = rng.random((gm.dim, n_samples))
    v = np.stack([np.interp(u[i], cdf[i], grid[i]) for i in range(gm.dim)])
    return draw_m(gm, v, rng), {"v": v}
