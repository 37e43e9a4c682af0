"""The ``last_iterate`` baseline: phi* = phi_T, ignoring the DP noise."""

import numpy as np

__all__ = ["sample_last_iterate"]


def sample_last_iterate(result, n_samples, rng, **backend_options):
    """``n_samples`` copies of the last iterate ``result.phi``, and no diagnostics.

    Needs no gradient model (registered with ``needs_model=False``); the random
    generator and any backend options are ignored.
    """
    return np.tile(result.phi, (n_samples, 1)), {}
