"""Noise-aware post-processing: from the DP-SGD trace to draws of phi*.

The paper's gradient model (eq. 20 / A60), per coordinate i of phi, for the released
pairs after burn-in::

    g_tilde_{t+1} | phi_t ~ N(kappa * a_i * (phi_t - phi*_i), tau_i^2),   a_i = softplus(v_i)

with data-driven priors on phi*_i and v_i (paper H.3). Given v, phi* is exactly
Gaussian, so phi* is integrated out and every backend works on the 1-D posterior of
v_i, then draws phi*_i | v_i exactly. The data flow is the layout:

:mod:`~skdpvi.noise_aware.gradient_model`
    :class:`GradientModel`: the model, its priors (and the optional curvature bias
    correction), the collapsed density of v and phi* | v. It reads the trace only
    through :class:`~skdpvi.dpvi.TraceStatistics` (duck-typed), so the cost does not
    grow with T.
:mod:`~skdpvi.noise_aware.backends`
    One module per inference backend (``exact``, ``emcee``, ``laplace``,
    ``last_iterate``) and the registry of their names (:func:`register_backend`).
:mod:`~skdpvi.noise_aware.convergence`
    :func:`split_window_test`: has the trace settled? (the two halves of the
    recording window against one gradient relation).
:mod:`~skdpvi.noise_aware.sampling`
    :func:`sample_phi_star`: builds the model of a run and draws phi* with the
    backend named by ``method``; warns when the split-window test fails.
:mod:`~skdpvi.noise_aware.coupling`
    :func:`coupled_means`: redraws the mean coordinates of phi* with a dense error
    model read off the covariance of the wander (:func:`wander_curvature`), where
    the diagonal model treats coupled coordinates as independent.
:mod:`~skdpvi.noise_aware.linear_response`
    :func:`linear_response_posterior`: the same dense curvature, corrected for the
    finite window (:func:`window_curvature`), for both the errors of the means and
    the components' linear-response covariance (mean-field's widths are
    conditional variances); optionally :func:`shrink_wander_covariance` first
    shrinks the sampling noise's spread out of the wander's covariance, towards the
    uncorrelated target that the released scales imply (:func:`mean_field_curvature`;
    measured, not the estimator's default).
:mod:`~skdpvi.noise_aware.diagonal_matching`
    :func:`matched_curvature`: the most likely curvature given the wander *and* the
    diagonal the released scales fix (``linear_response_posterior(match_diagonal=True)``;
    the logistic estimator's ``error_model="dense_matched"``, an option).
:mod:`~skdpvi.noise_aware.wander_bias`
    :func:`logistic_wander_width` and :func:`remove_wander_bias`: the outward bias
    that the wander of constant-step DP-SGD gives logistic regression's means (the
    trace averages the gradient of a wider posterior), read off the release and
    removed.
:mod:`~skdpvi.noise_aware.preconditioning`
    :func:`recording_step_matrix`: a step matrix for the recording phase of a
    linear model, from X^T X as the released burn-in estimates it, so that every
    direction of the coefficients relaxes at the rate of an uncorrelated one, and
    none faster than :func:`rate_cap` allows (the engine's ``step_matrix``).

``INFERENCE_METHODS`` is the tuple of registered backend names, in registration
order: ``("emcee", "exact", "laplace", "last_iterate")`` unless more are registered.
"""

from .backends import CoordinatewiseStretchMove, backend_names, register_backend
from .convergence import split_window_test
from .coupling import coupled_means, wander_curvature
from .flat_directions import FlatPriorComponents, find_onehot_blocks, onehot_flat_directions
from .extrapolation import uncertain_extrapolation
from .full_rank import full_rank_curvature, full_rank_posterior, full_rank_wander_width
from .diagonal_matching import matched_curvature
from .linear_response import (linear_response_posterior, shrink_wander_covariance,
                              window_curvature)
from .scale_curvature import mean_field_curvature
from .gradient_model import GradientModel
from .preconditioning import correlation_step_matrix, rate_cap, recording_step_matrix
from .sampling import sample_phi_star
from .statistics import statistics_posterior
from .wander_bias import logistic_wander_width, remove_wander_bias

__all__ = [
    "full_rank_curvature",
    "full_rank_posterior",
    "full_rank_wander_width",
    "GradientModel",
    "sample_phi_star",
    "statistics_posterior",
    "split_window_test",
    "coupled_means",
    "wander_curvature",
    "linear_response_posterior",
    "window_curvature",
    "shrink_wander_covariance",
    "matched_curvature",
    "mean_field_curvature",
    "uncertain_extrapolation",
    "logistic_wander_width",
    "remove_wander_bias",
    "onehot_flat_directions",
    "find_onehot_blocks",
    "FlatPriorComponents",
    "recording_step_matrix",
    "correlation_step_matrix",
    "rate_cap",
    "INFERENCE_METHODS",
    "CoordinatewiseStretchMove",
    "register_backend",
]


def __getattr__(name):
    # INFERENCE_METHODS follows the registry (PEP 562), so a registered backend
    # shows up in it; modules that import it by name keep the tuple of that moment.
    if name == "INFERENCE_METHODS":
        return backend_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), "INFERENCE_METHODS"])
