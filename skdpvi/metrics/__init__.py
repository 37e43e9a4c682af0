"""Does the uncertainty hold up? Coverage, calibration and model-selection metrics.

Parameters (simulation studies, where the truth is known)
    :func:`tarp_coverage`, :func:`marginal_tarp_coverage` -- TARP expected
    coverage of posterior credible regions (paper A62-A63, eq. 27), with
    several reference-point schemes and a bootstrap;
    :func:`run_tarp_study` -- simulate, fit, sample and test in parallel;
    :func:`posterior_z_scores`, :func:`interval_coverage` -- the same draws read
    parameter by parameter (TARP can pass a posterior too narrow in one of them);
    :func:`ellipsoid_coverage` -- and in every direction at once (both can pass a
    posterior too narrow along a combination of parameters).
Predictions (real data, held-out targets)
    :func:`predictive_coverage` -- coverage of posterior-predictive intervals
    for regression; :func:`calibration_curve_quantile`,
    :func:`calibration_rmse`, :func:`expected_calibration_error`,
    :func:`brier_score_loss` -- calibration of binary classifiers.
Model selection
    ``neg_*_scorer`` callables and :func:`get_scorer` for ``GridSearchCV``.
    Every fit in a search on private data spends privacy budget, and the
    choice itself leaks; see ``skdpvi.accounting.total_privacy_spent``.
"""

from ._calibration import (
    brier_score_loss,
    calibration_curve_quantile,
    calibration_rmse,
    expected_calibration_error,
)
from ._intervals import ellipsoid_coverage, interval_coverage, posterior_z_scores
from ._predictive import (
    PredictiveCoverageResult,
    predictive_coverage,
    predictive_coverage_rmse,
)
from ._scorers import (
    get_scorer,
    make_predictive_coverage_scorer,
    neg_brier_score_scorer,
    neg_calibration_rmse_scorer,
    neg_expected_calibration_error_scorer,
    neg_predictive_coverage_rmse_scorer,
)
from ._simulation import TarpStudyResult, run_tarp_study
from ._tarp import (
    DEFAULT_ALPHA_GRID,
    MarginalTarpResult,
    TarpResult,
    coverage_from_frequencies,
    coverage_rmse,
    coverage_rmse_floor,
    marginal_tarp_coverage,
    tarp_coverage,
)

__all__ = [
    "DEFAULT_ALPHA_GRID",
    "MarginalTarpResult",
    "PredictiveCoverageResult",
    "TarpResult",
    "TarpStudyResult",
    "brier_score_loss",
    "calibration_curve_quantile",
    "calibration_rmse",
    "coverage_from_frequencies",
    "coverage_rmse",
    "coverage_rmse_floor",
    "expected_calibration_error",
    "get_scorer",
    "interval_coverage",
    "ellipsoid_coverage",
    "make_predictive_coverage_scorer",
    "marginal_tarp_coverage",
    "neg_brier_score_scorer",
    "neg_calibration_rmse_scorer",
    "neg_expected_calibration_error_scorer",
    "neg_predictive_coverage_rmse_scorer",
    "posterior_z_scores",
    "predictive_coverage",
    "predictive_coverage_rmse",
    "run_tarp_study",
    "tarp_coverage",
]
