"""What an accountant is told about a private run: a plain mechanism description."""

import math
from dataclasses import dataclass

from ..utils.validation import is_int, is_real

__all__ = ["DPSGDMechanism", "merge_repeats"]


@dataclass(frozen=True)
class DPSGDMechanism:
    """Poisson-subsampled Gaussian DP-SGD, as the privacy accountant sees it.

    ``steps`` steps, each on a Poisson subsample with rate ``sampling_rate``, adding
    Gaussian noise of standard deviation ``noise_multiplier`` times the clipping norm
    to the sum of the clipped per-example gradients; every iterate and every noisy
    gradient is released. The neighbouring relation is add/remove-one.

    Parameters
    ----------
    noise_multiplier : float
        sigma, > 0.
    sampling_rate : float
        kappa, in (0, 1].
    steps : int
        T, >= 1.

    Examples
    --------
    >>> from skdpvi.accounting import DPSGDMechanism, compose_epsilon
    >>> run = DPSGDMechanism(noise_multiplier=37.4, sampling_rate=0.1, steps=10_000)
    >>> compose_epsilon([run], 1e-5) == compose_epsilon([(37.4, 0.1, 10_000)], 1e-5)
    True
    """

    noise_multiplier: float
    sampling_rate: float
    steps: int

    def __post_init__(self):
        _check_mechanism_values(self.noise_multiplier, self.sampling_rate, self.steps)


def _check_sampling_rate(sampling_rate):
    if not is_real(sampling_rate) or not 0 < sampling_rate <= 1:
        raise ValueError(f"sampling_rate must lie in (0, 1], got sampling_rate={sampling_rate!r}.")


def _check_steps(steps):
    if not is_int(steps) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got steps={steps!r}.")


def _check_mechanism_values(noise_multiplier, sampling_rate, steps):
    """Validate a mechanism's three numbers, naming the offending one."""
    sigma = noise_multiplier
    if not is_real(sigma) or not math.isfinite(sigma) or sigma <= 0:
        raise ValueError("noise_multiplier must be a finite number > 0, got "
                         f"{noise_multiplier!r}.")
    _check_sampling_rate(sampling_rate)
    _check_steps(steps)


def merge_repeats(mechanisms):
    """The same composition with every repeated (noise, rate) pair run as one mechanism.

    Mechanisms that differ only in their number of steps compose into one with the
    summed steps: fewer, longer mechanisms are cheaper and tighter to account.

    Returns
    -------
    tuple of DPSGDMechanism
        Sorted by noise multiplier, then sampling rate.
    """
    steps = {}
    for m in mechanisms:
        key = (float(m.noise_multiplier), float(m.sampling_rate))
        steps[key] = steps.get(key, 0) + int(m.steps)
    return tuple(DPSGDMechanism(sigma, q, t) for (sigma, q), t in sorted(steps.items()))
