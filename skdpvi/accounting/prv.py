"""The PRV accountant of Gopi et al. (2021), as implemented in Opacus, made tight and fast.

Every iterate and every noisy gradient of a run is released, and the accounting
covers all of them (composition over ``steps`` steps, add/remove-one neighbouring
relation, Poisson subsampling with rate ``sampling_rate``). The reported epsilon is
always the accountant's rigorous *upper* bound, never its point estimate, so
``epsilon_spent(noise_multiplier(eps, ...), ...) <= eps``.

Why not ``opacus.accountants.utils.get_noise_multiplier``: with its default
tolerances it over-noises by up to 16 % (epsilon=0.1, delta=1e-5, q=0.1, T=1e4), and
the RDP accountant with default orders cannot reach epsilon=0.1 at all. Here a cheap
coarse PRV search finds the noise level first and a single fine evaluation certifies
it, with the FFT grid padded to a fast length; the results are cached.

Where the PRV machinery cannot serve a budget -- a grid too large for memory (tiny
epsilon with a large delta, or a tiny noise multiplier), or Opacus' internals giving
up ("Cannot compute epsilon", "Discrete mean differs significantly", an RDP domain
bound failing) -- :class:`PRVFailed` is raised, and :mod:`skdpvi.accounting.api`
falls back to the PLD accountant (:mod:`~skdpvi.accounting.pld`).
"""

import functools
import math
import warnings

import numpy as np
from scipy.fft import next_fast_len

from ..utils.blas import limit_blas_threads
from .base import Accountant
from .calibrate import calibrate
from .gaussian import clt_noise_multiplier
from .mechanism import DPSGDMechanism, merge_repeats

__all__ = ["PRVAccountant", "PRVFailed"]

# Relative discretisation error allowed in the final, certifying PRV evaluation.
_FINE_ERROR = 0.0025
# Relative discretisation error of the cheap evaluations used while searching.
_COARSE_ERROR = 0.05
# Largest FFT grid we build (~8 bytes per point, a few copies); beyond it (epsilon
# <= 0.05 with 10^4 steps) the PLD accountant is faster and tighter.
_MAX_GRID = 10_000_000


class PRVFailed(RuntimeError):
    """The PRV accountant cannot serve this mechanism and budget (see the module doc).

    ``sigma_hint`` is the noise multiplier its coarse search found, if it got that far.
    """

    sigma_hint = None


def _prv_epsilon(history, delta, eps_error):
    """Return (estimate, upper bound) of epsilon for a composition of PRVs.

    ``history`` is a tuple of (noise_multiplier, sampling_rate, steps) triples.
    Mirrors ``opacus.accountants.PRVAccountant.get_epsilon`` but pads the
    discretisation grid to a length the FFT handles fast (about 5x quicker).
    """
    try:
        with limit_blas_threads(1):  # the same rounding however many threads (utils.blas)
            return _prv_epsilon_unchecked(history, delta, eps_error)
    except PRVFailed:
        raise
    except (RuntimeError, ValueError, FloatingPointError, OverflowError) as exc:
        raise PRVFailed(f"{type(exc).__name__}: {exc}") from exc


def _prv_epsilon_unchecked(history, delta, eps_error):
    from opacus.accountants.analysis.prv import (
        PoissonSubsampledGaussianPRV,
        TruncatedPrivacyRandomVariable,
        compose_heterogeneous,
        compute_safe_domain_size,
        discretize,
    )
    from opacus.accountants.analysis.prv.domain import Domain

    delta_error = delta / 1000
    prvs = [PoissonSubsampledGaussianPRV(q, sigma) for sigma, q, _ in history]
    counts = [int(t) for _, _, t in history]
    with warnings.catch_warnings():
        # Opacus' RDP-based domain bound warns about its order grid; harmless here.
        warnings.simplefilter("ignore", UserWarning)
        half_width = compute_safe_domain_size(
            prvs=prvs,
            max_self_compositions=counts,
            eps_error=eps_error,
            delta_error=delta_error,
        )
    mesh = eps_error / math.sqrt(sum(counts) * math.log(12 / delta_error) / 2)
    size = 2 * math.ceil(half_width / mesh) + 2
    if not size <= _MAX_GRID:
        raise PRVFailed(f"the PRV grid would have {size} points")
    while size % 2:  # the composition code needs an even, centred grid
        size = next_fast_len(size + 1, real=True)
    size = next_fast_len(size, real=True)
    while size % 2:
        size = next_fast_len(size + 1, real=True)
    half = size // 2
    domain = Domain(-(half - 1) * mesh, half * mesh, size)
    # log(0) at q = 1, and exp overflowing to inf far in the tails at small sigma, are
    # handled by Opacus' own masking (the result is checked for finiteness below)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        dprvs = [
            discretize(TruncatedPrivacyRandomVariable(prv, domain.t_min, domain.t_max), domain)
            for prv in prvs
        ]
        composed = compose_heterogeneous(dprvs=dprvs, num_self_compositions=counts)
        _, estimate, upper = composed.compute_epsilon(delta, delta_error, eps_error)
    estimate, upper = float(estimate), float(upper)
    if not (math.isfinite(estimate) and math.isfinite(upper)):
        raise PRVFailed(f"non-finite epsilon {upper}")
    # epsilon < 0 means the curve is below delta already at 0: the budget holds at 0
    return max(estimate, 0.0), max(upper, 0.0)


@functools.lru_cache(maxsize=256)
def _noise_multiplier_cached(epsilon, delta, sampling_rate, steps, fixed=()):
    def estimate(sigma):
        history = ((sigma, sampling_rate, steps),) + fixed
        return _prv_epsilon(history, delta, _COARSE_ERROR * epsilon)[0]

    def certified(sigma):
        try:
            return _prv_epsilon(((sigma, sampling_rate, steps),) + fixed, delta,
                                _FINE_ERROR * epsilon)[1]
        except PRVFailed as exc:
            exc.sigma_hint = sigma  # where the estimate put the root: a head start
            raise

    guess = clt_noise_multiplier(epsilon, delta, sampling_rate, steps,
                                 [DPSGDMechanism(*triple) for triple in fixed])
    return calibrate(certified, epsilon, sampling_rate, steps, estimate=estimate,
                     offset=_FINE_ERROR * epsilon, guess=guess)


@functools.lru_cache(maxsize=256)
def _epsilon_spent_cached(history, delta):
    # A coarse pass gives the scale of epsilon, a fine pass the tight upper bound.
    scale, _ = _prv_epsilon(history, delta, 0.05)
    if scale == 0.0:
        # the estimate sits at 0: certify with an absolute error instead
        return _prv_epsilon(history, delta, 1e-3)[1]
    return _prv_epsilon(history, delta, _FINE_ERROR * max(scale, 1e-3))[1]


class PRVAccountant(Accountant):
    """The privacy random variable (PRV) accountant, with cached searches.

    Examples
    --------
    >>> from skdpvi.accounting import DPSGDMechanism
    >>> from skdpvi.accounting.prv import PRVAccountant
    >>> prv = PRVAccountant()
    >>> sigma, eps = prv.noise_multiplier(1.0, 1e-5, 0.1, 10_000)
    >>> 0.99 < prv.epsilon([DPSGDMechanism(sigma, 0.1, 10_000)], 1e-5) <= 1.0
    True
    """

    def epsilon(self, mechanisms, delta):
        """Certified epsilon of the composition (see :meth:`Accountant.epsilon`).

        Repeated (noise, rate) pairs are merged first; the result is cached.
        """
        history = tuple((m.noise_multiplier, m.sampling_rate, m.steps)
                        for m in merge_repeats(mechanisms))
        return _epsilon_spent_cached(history, float(delta))

    def noise_multiplier(self, epsilon, delta, sampling_rate, steps, fixed=()):
        """Tight noise multiplier (see :meth:`Accountant.noise_multiplier`).

        The certified epsilon lands within 0.5 % below ``epsilon``; the result is cached.

        Raises
        ------
        PRVFailed
            If the PRV machinery cannot serve the budget (the caller falls back).
        BudgetUnreachable
            If no noise multiplier in the searched range meets the budget.
        """
        return _noise_multiplier_cached(
            float(epsilon), float(delta), float(sampling_rate), int(steps), _triples(fixed)
        )


def _triples(mechanisms):
    """Hashable (sigma, q, steps) triples of mechanisms, for the caches."""
    return tuple((float(m.noise_multiplier), float(m.sampling_rate), int(m.steps))
                 for m in mechanisms)
