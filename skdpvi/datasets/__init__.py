"""Data sets and simulators used in the NA-DPVI experiments.

- :func:`load_adult` loads the UCI Adult data set, bundled with the package
  (gzip copies of ``adult.data`` and ``adult.test``; CC BY 4.0, Becker &
  Kohavi 1996, https://doi.org/10.24432/C5XW20), preprocessed as in the
  paper's Appendix H.6, or raw (``raw=True``); :data:`ADULT_CONTINUOUS_BOUNDS`
  and :data:`ADULT_CATEGORIES` are the public bounds and category lists of that
  preprocessing, for pipelines of your own.
- :func:`make_nig_linear_regression`, :func:`make_gamma_exponential`,
  :func:`make_beta_bernoulli` and :func:`make_dirichlet_categorical` draw a
  true parameter from a prior and then data from the paper's models (numpy
  only), for calibration studies.
"""

from ._adult import ADULT_CATEGORIES, ADULT_CONTINUOUS_BOUNDS, load_adult
from ._simulators import (
    make_beta_bernoulli,
    make_dirichlet_categorical,
    make_gamma_exponential,
    make_nig_linear_regression,
)

__all__ = [
    "load_adult",
    "ADULT_CONTINUOUS_BOUNDS",
    "ADULT_CATEGORIES",
    "make_nig_linear_regression",
    "make_gamma_exponential",
    "make_beta_bernoulli",
    "make_dirichlet_categorical",
]
