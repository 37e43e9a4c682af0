"""Checks of the draws and true parameters given to the TARP tests."""

from .._validation import _as_float_array


def _check_tarp_inputs(samples, theta_true, n_levels):
    samples = _as_float_array(samples, "samples", ndim=3)
    theta_true = _as_float_array(theta_true, "theta_true", ndim=2)
    n_sim, n_draws, n_params = samples.shape
    if theta_true.shape != (n_sim, n_params):
        raise ValueError(
            "theta_true must have shape (n_simulations, n_params) = "
            f"{(n_sim, n_params)} to match samples of shape {samples.shape}; "
            f"got {theta_true.shape}."
        )
    if n_params < 1 or n_draws < 2:
        raise ValueError(
            "samples needs at least 2 draws and 1 parameter per simulation, "
            f"got shape {samples.shape}."
        )
    if n_sim < n_levels:
        raise ValueError(
            f"samples holds {n_sim} simulations, fewer than the {n_levels} "
            "credibility levels of alpha_grid; run more simulations or pass a "
            "coarser alpha_grid."
        )
    return samples, theta_true
