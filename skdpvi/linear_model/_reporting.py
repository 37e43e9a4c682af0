"""What a fit tells its user besides its results: privacy warnings and progress lines."""

import warnings

import numpy as np

from ..exceptions import PrivacyWarning


def _warn_if_delta_meaningless(delta, n_samples):
    """PrivacyWarning when delta >= 1 / n_samples (the guarantee then protects no one)."""
    if delta >= 1.0 / n_samples:
        warnings.warn(
            f"delta={delta:g} >= 1 / n_samples = 1/{n_samples}: the (epsilon, delta) "
            "guarantee is then meaningless, whatever epsilon_ says. A mechanism that "
            "publishes each row in the clear with probability delta is (0, delta)-DP, "
            f"and with delta={delta:g} it would publish about {delta * n_samples:,.0f} "
            f"of these {n_samples:,} rows. Use a delta well below 1 / n_samples (e.g. at most "
            f"{0.1 / n_samples:.1g}).",
            PrivacyWarning,
            stacklevel=6,  # _check_params <- _engine_settings <- _fit <- fit <- caller
        )


def _progress(verbose, level, message):
    """Print a progress line of ``fit`` when ``verbose >= level``."""
    if verbose >= level:
        print(f"[skdpvi] {message}", flush=True)


def _describe_diagnostics(diagnostics):
    """One line per numeric diagnostic of a backend: a scalar, or min/median/max."""
    lines = []
    for key, value in diagnostics.items():
        arr = np.asarray(value)
        if key == "chain" or arr.dtype.kind not in "biuf" or arr.size == 0:
            continue
        if arr.size == 1:
            lines.append(f"  {key}: {float(arr):.4g}")
        else:
            lines.append(f"  {key}: min {arr.min():.4g}, median {np.median(arr):.4g}, "
                         f"max {arr.max():.4g} (over {arr.shape[0]} coordinates)")
    return lines
