"""TARP expected-coverage tests (Lemos et al. 2023, as used by NA-DPVI).

The paper's estimator (Appendix H.4, eqs. A62-A63) is, for simulations
``i = 1..K`` with true parameters ``theta_i``, posterior draws
``theta~_{j,i}`` (``j = 1..N``) and a reference point ``theta_ref(i)``::

    f_i  = (1/N) sum_j 1[ d(theta~_{j,i}, theta_ref(i)) < d(theta_i, theta_ref(i)) ]   (A63)
    C(a) = (1/K) sum_i 1[ f_i < 1 - a ]                                               (A62)

``f_i`` is the posterior mass of the ball around the reference that just
reaches the truth. For a calibrated posterior it is uniform on (0, 1), so the
expected coverage ``C(a)`` equals the credibility ``1 - a`` at every level. The
summary is the root mean squared coverage error over the grid of levels
(eq. 27).

Randomness (reference points, bootstrap) always comes from a local
:class:`numpy.random.Generator`; the global NumPy state is never read or
changed. (The reference ``tarp`` package reseeds NumPy globally, which makes
its bootstrap replicates identical.)

The modules follow the data flow: inputs are checked (:mod:`._checks`), reference
points drawn (:mod:`.references`), the frequencies ``f_i`` computed
(:mod:`.frequencies`) and summarised into a coverage curve and its RMSE
(:mod:`.coverage`, with :mod:`.bootstrap` for its uncertainty) in a result
(:mod:`.results`); :mod:`.api` chains them. :mod:`.floor` gives the RMSE of a
calibrated method, to compare a study with.
"""

from .api import marginal_tarp_coverage, tarp_coverage
from .coverage import DEFAULT_ALPHA_GRID, coverage_from_frequencies, coverage_rmse
from .floor import coverage_rmse_floor
from .results import MarginalTarpResult, TarpResult

__all__ = [
    "DEFAULT_ALPHA_GRID",
    "TarpResult",
    "MarginalTarpResult",
    "tarp_coverage",
    "marginal_tarp_coverage",
    "coverage_from_frequencies",
    "coverage_rmse",
    "coverage_rmse_floor",
]
