"""The ``laplace`` backend: the paper's Laplace approximation (Appendix C).

A Gaussian approximation of the joint (phi*, v) posterior at its mode, of which the
phi* marginal is drawn. It cuts the heavy tail towards small curvature that slowly
relaxing coordinates have; ``exact`` keeps it.
"""

import numpy as np

from ._common import grid_posterior

__all__ = ["sample_laplace"]


def sample_laplace(gm, n_samples, rng):
    """Gaussian approximation at the joint MAP of (m, v), then its m-marginal."""
    grid, _ = grid_posterior(gm)
    # Joint MAP: for fixed v the best m is the conditional mean.
    m_grid, _ = gm.conditional_m(grid)
    joint = gm.log_joint(m_grid, grid)
    best = np.argmax(joint, 1)
    rows = np.arange(gm.dim)
    v_hat, m_hat = grid[rows, best], m_grid[rows, best]
    for _ in range(20):  # Newton polish of the profile in v
        h = 1e-4 * gm.prior_v_sd
        f = [gm.log_joint(gm.conditional_m(v_hat + k * h)[0], v_hat + k * h) for k in (-1, 0, 1)]
        d1, d2 = (f[2] - f[0]) / (2 * h), (f[2] - 2 * f[1] + f[0]) / h**2
        step = np.where(d2 < 0, -d1 / np.where(d2 < 0, d2, -1.0), 0.0)
        v_hat = v_hat + np.clip(step, -gm.prior_v_sd, gm.prior_v_sd)
    m_hat = gm.conditional_m(v_hat)[0]
    # Hessian of the joint log density by central differences.
    hv = 1e-3 * gm.prior_v_sd
    hm = 1e-3 * gm.conditional_m(v_hat)[1]
    f = gm.log_joint
    h_mm = (f(m_hat + hm, v_hat) - 2 * f(m_hat, v_hat) + f(m_hat - hm, v_hat)) / hm**2
    h_vv = (f(m_hat, v_hat + hv) - 2 * f(m_hat, v_hat) + f(m_hat, v_hat - hv)) / hv**2
    h_mv = (f(m_hat + hm, v_hat + hv) - f(m_hat + hm, v_hat - hv)
            - f(m_hat - hm, v_hat + hv) + f(m_hat - hm, v_hat - hv)) / (4 * hm * hv)
    det = h_mm * h_vv - h_mv**2
    var_m = np.where((det > 0) & (h_mm < 0), -h_vv / np.where(det > 0, det, 1.0), -1.0 / h_mm)
    sd_m = np.sqrt(np.abs(var_m))
    draws = m_hat + sd_m * rng.standard_normal((n_samples, gm.dim))
    return draws, {"v_map": v_hat, "phi_star_sd": sd_m}
