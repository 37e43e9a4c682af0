"""The exact accountant of full-batch DP-SGD: the analytic Gaussian mechanism.

With ``sampling_rate == 1`` every step adds N(0, (sigma C)^2 I) to a sum whose
sensitivity is C, so one step is the Gaussian mechanism with mu = 1 / sigma, and T
steps (or any composition of full-batch mechanisms) compose *exactly* into one
Gaussian mechanism with ``mu = sqrt(sum_i T_i / sigma_i^2)`` (Dong, Roth & Su, 2022).
Its privacy curve is known in closed form (Balle & Wang, 2018, Theorem 8)::

    delta(eps) = Phi(-eps / mu + mu / 2) - e^eps * Phi(-eps / mu - mu / 2),

the same for the add and the remove direction. The PRV accountant approximates this
curve on a grid, and fails for large deltas; here it is evaluated directly, in log
space so that deltas down to 1e-300 keep their relative precision.
"""

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr

from .base import Accountant
from .calibrate import MAX_SIGMA, MIN_SIGMA, TIGHTNESS, BudgetUnreachable

__all__ = ["GaussianAccountant", "gaussian_delta", "gaussian_epsilon"]

# Relative margin added to every root, on top of the root finder's tolerance, so that
# the reported epsilon is an upper bound despite rounding.
_MARGIN = 1e-9


def gaussian_delta(epsilon, mu):
    """delta(epsilon) of the Gaussian mechanism with mu = sensitivity / noise std.

    Parameters
    ----------
    epsilon : float
        >= 0.
    mu : float
        > 0.

    Returns
    -------
    delta : float

    Examples
    --------
    >>> round(gaussian_delta(1.0, 1 / 3.73), 7)
    1e-05
    """
    a = -epsilon / mu + mu / 2
    b = -epsilon / mu - mu / 2
    log_first = float(log_ndtr(a))
    log_ratio = epsilon + float(log_ndtr(b)) - log_first  # < 0
    return float(-math.exp(log_first) * math.expm1(log_ratio))


def gaussian_epsilon(mu, delta):
    """The smallest epsilon >= 0 with ``gaussian_delta(epsilon, mu) <= delta``.

    Rounded up by a relative 1e-9, so that it is an upper bound.

    Examples
    --------
    >>> round(gaussian_epsilon(1 / 3.73, 1e-5), 3)
    1.0
    """
    if gaussian_delta(0.0, mu) <= delta:
        return 0.0
    # delta(eps) <= exp(-(eps - mu^2/2)^2 / (2 mu^2)) for eps >= mu^2 / 2: a bracket
    upper = mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1.0
    while gaussian_delta(upper, mu) > delta:
        upper *= 2
    root = brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, upper,
                  xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)
    return root * (1 + _MARGIN) + 1e-14


def _mu(mechanisms):
    return math.sqrt(sum(m.steps / m.noise_multiplier**2 for m in mechanisms))


def _gaussian_mu(epsilon, delta):
    """The mu of the Gaussian mechanism with ``gaussian_epsilon(mu, delta) = epsilon``."""
    # delta(epsilon; mu) grows from 0 to 1 with mu: bracket the root in log mu
    lo, hi = -1.0, 1.0
    while gaussian_delta(epsilon, math.exp(lo)) > delta:
        lo -= 2.0
    while gaussian_delta(epsilon, math.exp(hi)) < delta:
        hi += 2.0
    return math.exp(brentq(lambda x: gaussian_delta(epsilon, math.exp(x)) - delta, lo, hi,
                           xtol=1e-13, maxiter=500))


def clt_noise_multiplier(epsilon, delta, sampling_rate, steps, fixed=()):
    """A central-limit estimate of the noise multiplier of subsampled DP-SGD, or None.

    T Poisson-subsampled steps tend to the Gaussian mechanism with ``mu = q sqrt(T
    (exp(1 / sigma^2) - 1))`` (Bu, Dong, Long & Su, 2020); composed with the
    ``fixed`` mechanisms (each by the same limit), it is solved for sigma. Only a
    starting point for the accountants' searches: it is not a privacy bound (it can
    be off by tens of percent at small sigma or small q sqrt(T)). None where the
    fixed mechanisms alone exceed the budget or it leaves [MIN_SIGMA, MAX_SIGMA].
    """
    def mu_squared(q, sigma, t):
        return q * q * t * math.expm1(min(1.0 / sigma**2, 700.0))

    total = _gaussian_mu(epsilon, delta) ** 2
    left = total - sum(mu_squared(m.sampling_rate, m.noise_multiplier, m.steps)
                       for m in fixed)
    if left <= 0:
        return None
    sigma = 1.0 / math.sqrt(math.log1p(left / (sampling_rate**2 * steps)))
    return sigma if MIN_SIGMA <= sigma <= MAX_SIGMA else None


class GaussianAccountant(Accountant):
    """Exact accounting of full-batch (``sampling_rate == 1``) DP-SGD.

    Examples
    --------
    >>> from skdpvi.accounting import DPSGDMechanism
    >>> from skdpvi.accounting.gaussian import GaussianAccountant
    >>> sigma, eps = GaussianAccountant().noise_multiplier(1.0, 1e-5, 1.0, 100)
    >>> round(sigma, 2), 0.995 <= eps <= 1.0
    (37.39, True)
    """

    def epsilon(self, mechanisms, delta):
        """Exact epsilon of a composition of full-batch mechanisms.

        Raises
        ------
        ValueError
            If a mechanism subsamples (``sampling_rate < 1``).
        """
        if any(m.sampling_rate != 1 for m in mechanisms):
            raise ValueError("The Gaussian accountant serves only sampling_rate == 1.")
        return gaussian_epsilon(_mu(mechanisms), delta)

    def noise_multiplier(self, epsilon, delta, sampling_rate, steps, fixed=()):
        """Noise multiplier of T full-batch steps, epsilon within 0.5 % below the target.

        The composition (with the ``fixed`` full-batch mechanisms) is the Gaussian
        mechanism with mu^2 = T / sigma^2 + mu_fixed^2; mu is
        solved for in closed form up to a root finder, so every budget is reachable;
        like the other accountants, it still refuses noise multipliers outside
        [MIN_SIGMA, MAX_SIGMA] (:class:`~skdpvi.accounting.calibrate.BudgetUnreachable`).
        """
        if sampling_rate != 1:
            raise ValueError("The Gaussian accountant serves only sampling_rate == 1.")
        aim = epsilon * (1 - TIGHTNESS / 2)
        mu_left = _gaussian_mu(aim, delta) ** 2 - _mu(fixed) ** 2
        if mu_left <= 0:  # the fixed mechanisms alone spend the budget
            raise BudgetUnreachable("epsilon too small")
        sigma = math.sqrt(steps / mu_left)
        if sigma > MAX_SIGMA:
            raise BudgetUnreachable("epsilon too small")
        if sigma < MIN_SIGMA:
            raise BudgetUnreachable("epsilon too large")
        achieved = gaussian_epsilon(math.sqrt(steps / sigma**2 + _mu(fixed) ** 2), delta)
        if not (1 - TIGHTNESS) * epsilon <= achieved <= epsilon:  # pragma: no cover
            raise RuntimeError(
                f"Gaussian calibration missed its window: {achieved} for {epsilon}.")
        return sigma, achieved
