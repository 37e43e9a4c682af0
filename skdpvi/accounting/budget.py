"""Validation of privacy budgets and mechanisms, naming the offending parameter."""

import dataclasses
import math

from ..utils.validation import is_int, is_real
from .mechanism import DPSGDMechanism


def _check_budget(epsilon=None, delta=None, sampling_rate=None, steps=None):
    """Validate accounting inputs, naming the offending parameter."""
    if epsilon is not None:
        if not is_real(epsilon) or not math.isfinite(epsilon) or epsilon <= 0:
            raise ValueError(f"epsilon must be a finite number > 0, got epsilon={epsilon!r}.")
    if delta is not None:
        if not is_real(delta) or not 0 < delta < 1:
            raise ValueError(f"delta must lie in the open interval (0, 1), got delta={delta!r}.")
    if sampling_rate is not None:
        if not is_real(sampling_rate) or not 0 < sampling_rate <= 1:
            raise ValueError(
                "sampling_rate must lie in (0, 1], got " f"sampling_rate={sampling_rate!r}."
            )
    if steps is not None:
        if not is_int(steps) or steps < 1:
            raise ValueError(f"steps must be an integer >= 1, got steps={steps!r}.")


def _check_mechanism(mechanism):
    """A validated DPSGDMechanism of floats and an int, from one or from a triple.

    ``mechanism`` is a :class:`DPSGDMechanism` or a
    ``(noise_multiplier, sampling_rate, steps)`` triple.
    """
    if isinstance(mechanism, DPSGDMechanism):
        mechanism = dataclasses.astuple(mechanism)
    try:
        sigma, q, steps = mechanism
    except (TypeError, ValueError):
        raise ValueError("a mechanism is a DPSGDMechanism or a (noise_multiplier, "
                         f"sampling_rate, steps) triple, got {mechanism!r}.") from None
    _check_noise_and_budget(sigma, q, steps)
    return DPSGDMechanism(float(sigma), float(q), int(steps))


def _check_noise_and_budget(sigma, q, steps):
    """Validate one mechanism's noise multiplier, sampling rate and steps."""
    if not is_real(sigma) or not math.isfinite(sigma) or sigma <= 0:
        raise ValueError(f"noise_multiplier must be a finite number > 0, got {sigma!r}.")
    _check_budget(sampling_rate=q, steps=steps)
