"""Privacy accounting for Poisson-subsampled Gaussian DP-SGD.

The noise multiplier of every fit comes from :func:`noise_multiplier`, which inverts
the PRV accountant of Gopi et al. (2021) as implemented in Opacus; full-batch runs
(``sampling_rate == 1``) use the exact curve of the Gaussian mechanism (Balle & Wang,
2018), and budgets the PRV grid cannot serve a connect-the-dots PLD accountant
(Doroshenko et al., 2022). Every iterate and
every noisy gradient of the run is released, and the accounting covers all of them
(composition over ``steps`` steps, add/remove-one neighbouring relation, Poisson
subsampling with rate ``sampling_rate``).

The reported epsilon is always the accountant's rigorous *upper* bound, never its
point estimate, so ``epsilon_spent(noise_multiplier(eps, ...)[0], ...) <= eps`` (up to
the PRV discretisation error, 0.25 %, should the two calls land on different
accountants).

Modules, after Opacus' ``accountants``:

``mechanism``  :class:`DPSGDMechanism`, the plain description of a run
``base``       the :class:`~skdpvi.accounting.base.Accountant` interface
``calibrate``  the noise-multiplier search the accountants share
``prv``        the PRV accountant (tight, cached searches)
``gaussian``   the exact accountant of full-batch runs
``pld``        the PLD accountant, the fallback where PRV cannot serve
``budget``     validation of budgets and mechanisms
``api``        the public functions below, and the choice of the accountant

The package imports nothing from the rest of skdpvi but :mod:`skdpvi.utils`:
estimators describe their own mechanism (``_dp_mechanism()``), and
:func:`total_privacy_spent` only asks them.
"""

from .api import compose_epsilon, epsilon_spent, noise_multiplier, total_privacy_spent
from .mechanism import DPSGDMechanism

__all__ = [
    "noise_multiplier",
    "epsilon_spent",
    "compose_epsilon",
    "total_privacy_spent",
    "DPSGDMechanism",
]
