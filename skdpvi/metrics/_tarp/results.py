"""What the TARP tests return: :class:`TarpResult` and :class:`MarginalTarpResult`."""

from dataclasses import dataclass
from typing import Optional

import numpy as np

__all__ = ["TarpResult", "MarginalTarpResult"]


@dataclass
class TarpResult:
    """Expected coverage of posterior credible regions (TARP).

    Attributes
    ----------
    credibility : ndarray of shape (n_levels,)
        Credibility levels ``1 - alpha`` in increasing order.
    coverage : ndarray of shape (n_levels,)
        Expected coverage ``C(alpha)`` at each level (eq. A62). Calibrated
        posteriors give ``coverage == credibility`` up to sampling error; at
        high credibility over-confident ones fall below, under-confident ones
        above (see :func:`tarp_coverage` for the low levels).
    rmse : float
        Root mean squared coverage error over the levels (eq. 27).
    frequencies : ndarray of shape (n_simulations,)
        The per-simulation statistics ``f_i`` (eq. A63), uniform on (0, 1)
        for a calibrated posterior. Pass them to
        :func:`coverage_from_frequencies` to re-summarise on another grid or
        after pooling repetitions.
    references : ndarray of shape (n_simulations, n_params)
        The reference points used.
    n_bootstrap : int
        Number of bootstrap replicates (0: no uncertainty summaries).
    coverage_se, coverage_band : ndarray or None
        Bootstrap standard error of ``coverage`` (n_levels,) and its 95%
        percentile band (2, n_levels): row 0 the 2.5% and row 1 the 97.5%
        percentile.
    rmse_se : float or None
        Bootstrap standard error of ``rmse``.
    rmse_band : ndarray of shape (2,) or None
        95% percentile band of ``rmse``.
    bootstrap_coverage : ndarray of shape (n_bootstrap, n_levels) or None
        The replicate coverage curves.
    bootstrap_rmse : ndarray of shape (n_bootstrap,) or None
        The replicate RMSEs.
    """

    credibility: np.ndarray
    coverage: np.ndarray
    rmse: float
    frequencies: np.ndarray
    references: np.ndarray
    n_bootstrap: int = 0
    coverage_se: Optional[np.ndarray] = None
    coverage_band: Optional[np.ndarray] = None
    rmse_se: Optional[float] = None
    rmse_band: Optional[np.ndarray] = None
    bootstrap_coverage: Optional[np.ndarray] = None
    bootstrap_rmse: Optional[np.ndarray] = None

    @property
    def alpha(self):
        """ndarray of shape (n_levels,): ``1 - credibility``."""
        return 1.0 - self.credibility

    def __repr__(self):
        extra = (
            f", rmse_se={self.rmse_se:.4f}, n_bootstrap={self.n_bootstrap}"
            if self.n_bootstrap
            else ""
        )
        return (
            f"{type(self).__name__}(rmse={self.rmse:.4f}{extra}, "
            f"n_simulations={self.frequencies.shape[0]}, "
            f"n_levels={self.credibility.size})"
        )


@dataclass
class MarginalTarpResult:
    """Per-parameter (1-D) TARP coverage.

    Attributes
    ----------
    credibility : ndarray of shape (n_levels,)
        Credibility levels ``1 - alpha`` in increasing order.
    coverage : ndarray of shape (n_params, n_levels)
        Expected coverage of each parameter's marginal credible intervals.
    rmse : ndarray of shape (n_params,)
        Coverage RMSE (eq. 27) per parameter.
    frequencies : ndarray of shape (n_simulations, n_params)
        Per-simulation, per-parameter ``f_i`` (eq. A63 with 1-D distance).
    references : ndarray of shape (n_simulations, n_params)
        The reference points used.
    param_names : list of str or None
        Names of the parameters, if given.
    n_bootstrap : int
        Number of bootstrap replicates (simulations are resampled jointly for
        all parameters).
    coverage_se : ndarray of shape (n_params, n_levels) or None
    coverage_band : ndarray of shape (2, n_params, n_levels) or None
    rmse_se : ndarray of shape (n_params,) or None
    rmse_band : ndarray of shape (2, n_params) or None
    bootstrap_coverage : ndarray of shape (n_bootstrap, n_params, n_levels) or None
    bootstrap_rmse : ndarray of shape (n_bootstrap, n_params) or None

    Indexing with a parameter position or name returns that parameter's
    :class:`TarpResult`.
    """

    credibility: np.ndarray
    coverage: np.ndarray
    rmse: np.ndarray
    frequencies: np.ndarray
    references: np.ndarray
    param_names: Optional[list] = None
    n_bootstrap: int = 0
    coverage_se: Optional[np.ndarray] = None
    coverage_band: Optional[np.ndarray] = None
    rmse_se: Optional[np.ndarray] = None
    rmse_band: Optional[np.ndarray] = None
    bootstrap_coverage: Optional[np.ndarray] = None
    bootstrap_rmse: Optional[np.ndarray] = None

    def __len__(self):
        return self.coverage.shape[0]

    def __getitem__(self, key):
        if isinstance(key, str):
            if self.param_names is None or key not in self.param_names:
                raise KeyError(f"No parameter named {key!r}.")
            key = list(self.param_names).index(key)
        j = range(len(self))[key]
        boot = self.n_bootstrap > 0
        return TarpResult(
            credibility=self.credibility,
            coverage=self.coverage[j],
            rmse=float(self.rmse[j]),
            frequencies=self.frequencies[:, j],
            references=self.references[:, [j]],
            n_bootstrap=self.n_bootstrap,
            coverage_se=self.coverage_se[j] if boot else None,
            coverage_band=self.coverage_band[:, j] if boot else None,
            rmse_se=float(self.rmse_se[j]) if boot else None,
            rmse_band=self.rmse_band[:, j] if boot else None,
            bootstrap_coverage=self.bootstrap_coverage[:, j] if boot else None,
            bootstrap_rmse=self.bootstrap_rmse[:, j] if boot else None,
        )

    def __repr__(self):
        names = self.param_names or [str(j) for j in range(len(self))]
        rmse = ", ".join(f"{n}: {r:.4f}" for n, r in zip(names, self.rmse))
        return f"{type(self).__name__}(rmse={{{rmse}}}, n_bootstrap={self.n_bootstrap})"
