"""Checks of a run's settings, before anything is drawn or spent.

The engine is public (:func:`~skdpvi.dpvi.run_dpvi`, :func:`~skdpvi.dpvi.run_dpvi_batched`):
a bad setting must raise a ValueError that names it, not crash deep in the loop (a
ZeroDivisionError for ``n_steps=0``, an AttributeError for an empty recording window)
or run silently (a negative clip norm flips the clipped gradients).
"""

import math

import numpy as np

from ..utils.validation import check_int, check_positive_array, check_positive_real

__all__ = []


def _check_settings(*, noise_multiplier, clip_norm, sampling_rate, n_steps, burn_in,
                    n_mc_samples):
    """Raise a ValueError naming the first setting of a run that is out of range."""
    def number(name, value):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number, got {value!r}.") from None
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value}.")
        return value

    if number("noise_multiplier", noise_multiplier) < 0:
        raise ValueError(f"noise_multiplier must be >= 0, got {noise_multiplier}.")
    if number("clip_norm", clip_norm) <= 0:
        raise ValueError(f"clip_norm must be > 0, got {clip_norm}.")
    if not 0 < number("sampling_rate", sampling_rate) <= 1:
        raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate}.")
    for name, value, low in (("n_steps", n_steps, 1), ("n_mc_samples", n_mc_samples, 1),
                             ("burn_in", burn_in, 0)):
        check_int(name, value, low)
    if burn_in >= n_steps:
        raise ValueError(f"burn_in must be smaller than n_steps={n_steps} (the recording "
                         f"window would be empty), got {burn_in}.")


def _check_start(init_scale, init_mean=None, n_params=None):
    """The starting point of a run as floats: ``init_scale`` a positive finite number,
    ``init_mean`` (when given) ``n_params`` finite numbers. A ValueError names the
    setting otherwise (``softplus^-1`` of a scale <= 0 fails deep in the run, and a
    non-finite start makes every released number NaN)."""
    scale = check_positive_real("init_scale", init_scale)
    if init_mean is None:
        return scale, None
    try:
        mean = np.asarray(init_mean, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"init_mean must be numbers, one per parameter ({n_params}), "
                         f"got {init_mean!r}.") from None
    if mean.size != n_params:
        raise ValueError(f"init_mean must have one value per parameter ({n_params}), got "
                         f"shape {mean.shape}.")
    if not np.all(np.isfinite(mean)):
        raise ValueError("init_mean must be finite.")
    return scale, mean.reshape(n_params)


def _check_positive(name, value, allow_zero=False):
    """``value`` (a number, array or tensor) finite and > 0 (>= 0 with ``allow_zero``)
    everywhere, or a ValueError naming ``name``: the public mechanism pieces release
    what they are given, so a negative clip norm or noise scale must not pass."""
    if hasattr(value, "detach"):
        try:
            value = value.detach().cpu().numpy()
        except RuntimeError:  # a tensor inside a functorch transform (vmap): not checkable
            return
    if np.size(value) == 0:
        raise ValueError(f"{name} must be a number or a non-empty array, got {value!r}.")
    check_positive_array(name, value, allow_zero=allow_zero)


def _check_count(name, value, low=1):
    """An integer >= ``low`` (not a bool), or a ValueError naming ``name``."""
    check_int(name, value, low)
