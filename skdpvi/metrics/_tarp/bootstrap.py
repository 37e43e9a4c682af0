"""Bootstrap over simulations: standard errors and bands of the coverage curve and RMSE."""

import numpy as np

from .coverage import _coverage_curve, coverage_rmse


def _bootstrap(frequencies, credibility, n_bootstrap, rng):
    """Resample simulations with replacement; summarise the coverage curves."""
    n_sim = frequencies.shape[0]
    boot_cov = np.empty((n_bootstrap,) + frequencies.shape[1:] + credibility.shape)
    for b in range(n_bootstrap):
        idx = rng.integers(0, n_sim, size=n_sim)
        boot_cov[b] = _coverage_curve(frequencies[idx], credibility)
    boot_rmse = coverage_rmse(credibility, boot_cov)
    ddof = 1 if n_bootstrap > 1 else 0
    return dict(
        bootstrap_coverage=boot_cov,
        bootstrap_rmse=boot_rmse,
        coverage_se=boot_cov.std(axis=0, ddof=ddof),
        coverage_band=np.percentile(boot_cov, [2.5, 97.5], axis=0),
        rmse_se=boot_rmse.std(axis=0, ddof=ddof),
        rmse_band=np.percentile(boot_rmse, [2.5, 97.5], axis=0),
    )
