"""Validation of privacy budgets and mechanisms, naming the offending parameter."""

import dataclasses
import math

from ..utils.validation import is_real
from .mechanism import (DPSGDMechanism, _check_mechanism_values, _check_sampling_rate,
                        _check_steps)


def _check_budget(epsilon=None, delta=None, sampling_rate=None, steps=None):
    """Validate accounting inputs, naming the offending parameter."""
    if epsilon is not None:
        if not is_real(epsilon) or not math.isfinite(epsilon) or epsilon <= 0:
            raise ValueError(f"epsilon must be a finite number > 0, got epsilon={epsilon!r}.")
    if delta is not None:
        if not is_real(delta) or not 0 < delta < 1:
            raise ValueError(f"delta must lie in the open interval (0, 1), got delta={delta!r}.")
    if sampling_rate is not None:
        _check_sampling_rate(sampling_rate)
    if steps is not None:
        _check_steps(steps)


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
    _check_mechanism_values(sigma, q, steps)
    return DPSGDMechanism(float(sigma), float(q), int(steps))
