"""sample_phi_star: build the gradient model of a DPVI run and draw phi* with a backend."""

import inspect
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..utils.validation import check_int, check_positive_real
from .backends import get_backend
from .convergence import SPLIT_TEST_LEVEL, split_window_test
from .gradient_model import GradientModel

__all__ = ["sample_phi_star"]


def sample_phi_star(result, method="emcee", n_samples=1000, random_state=None,
                    subsampling_variance=None, hessian_prior_scale=1.0, backend_options=None,
                    curvature_bias_correction=False, gradient_offset=None, check=True):
    """Draw phi* from the noise-aware posterior of a DPVI run.

    Parameters
    ----------
    result : skdpvi.dpvi.DPVIResult
    method : {"emcee", "exact", "laplace", "last_iterate"} or str, default="emcee"
        The inference backend: one of :data:`INFERENCE_METHODS` or another name
        given to :func:`register_backend`.
    n_samples : int, default=1000
        Number M of draws of phi*.
    random_state : int, numpy Generator or None
    subsampling_variance : float or ndarray, optional
        Known diagonal subsampling-noise variance of g_tilde (default 0).
    hessian_prior_scale : float, default=1.0
        Multiplies the prior standard deviation of v (the curvature).
    backend_options : dict, optional
        Extra arguments of the backend; for "emcee": ``n_walkers`` (32),
        ``min_ess`` (1000, the effective draws wanted per coordinate) and
        ``max_steps`` (20,000); for "exact": ``n_grid`` (2001); "last_iterate"
        ignores them.
    curvature_bias_correction : bool, default=False
        Correct the prior mean of the curvature for the small-sample (Kendall) bias
        of the least-squares slope; see :mod:`skdpvi.noise_aware.gradient_model` for
        when it helps.
    gradient_offset : array-like of shape (d,), optional
        A known part ``b`` of the mean released gradient that the linear model does
        not capture: the model becomes ``E[g_tilde | phi_t] = kappa a (phi_t - phi*) + b``.
    check : bool, default=True
        Run the split-window test (:func:`~skdpvi.noise_aware.split_window_test`) and
        warn with a :class:`~sklearn.exceptions.ConvergenceWarning` when the two
        halves of the recording window disagree (p < ``SPLIT_TEST_LEVEL``): the trace
        has not settled and the draws are not to be trusted.

    Returns
    -------
    phi_star : ndarray of shape (n_samples, d)
    diagnostics : dict
        Backend diagnostics (emcee: acceptance fraction, autocorrelation time and
        effective sample size per coordinate) and, with ``check``, ``split_p_value``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpvi.dpvi import TraceStatistics, DPVIResult
    >>> rng = np.random.default_rng(0)
    >>> phi = np.zeros((1001, 2)); g = np.zeros((1000, 2))
    >>> for t in range(1000):  # a linear-Gaussian DP-SGD with a = 1, phi* = 0.5
    ...     g[t] = 0.1 * (phi[t] - 0.5) + rng.normal(0, 1.0, 2)
    ...     phi[t + 1] = phi[t] - 0.05 * g[t]
    >>> res = DPVIResult(phi=phi[-1], stats=TraceStatistics.from_trace(phi, g, 200),
    ...                  noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.1,
    ...                  preconditioner=np.ones(2), learning_rate=np.full(2, 0.05),
    ...                  n_steps=1000, burn_in=200)
    >>> draws, _ = sample_phi_star(res, "exact", 2000, random_state=0)
    >>> draws.shape
    (2000, 2)
    """
    backend = get_backend(method)
    check_int("n_samples", n_samples)
    check_positive_real("hessian_prior_scale", hessian_prior_scale)
    if subsampling_variance is not None:
        variance = np.asarray(subsampling_variance, dtype=float)
        if not np.all(np.isfinite(variance) & (variance >= 0)):
            raise ValueError("subsampling_variance must be finite and >= 0, got "
                             f"{subsampling_variance!r}.")
    rng = np.random.default_rng(random_state)
    options = _checked_options(method, backend.sampler, backend_options)
    split = _check_settled(result.stats) if check else {}
    if not backend.needs_model:
        draws, diagnostics = backend.sampler(result, n_samples, rng, **options)
        return draws, {**diagnostics, **split}
    stats = result.stats
    if gradient_offset is not None:
        offset = np.asarray(gradient_offset, dtype=float)
        if offset.shape != stats.shift.shape or not np.all(np.isfinite(offset)):
            raise ValueError(
                f"gradient_offset must be a finite array of shape {stats.shift.shape}, "
                f"got shape {offset.shape}."
            )
        stats = stats.with_gradients_shifted(offset)
    gm = GradientModel.from_stats(
        stats, result.sampling_rate, result.noise_std,
        result.learning_rate if curvature_bias_correction else None,
        subsampling_variance, hessian_prior_scale,
    )
    m, diagnostics = backend.sampler(gm, n_samples, rng, **options)
    return result.stats.shift + m, {**diagnostics, **split}


def _checked_options(method, sampler, backend_options):
    """``backend_options`` as a dict, each key a keyword the backend's sampler takes
    (a sampler with ``**kwargs`` takes any)."""
    if backend_options is None:
        return {}
    if not isinstance(backend_options, dict):
        raise ValueError(f"backend_options must be a dict, got {backend_options!r}.")
    params = inspect.signature(sampler).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return backend_options
    known = [p.name for p in params][3:]  # after (model or result, n_samples, rng)
    unknown = sorted(set(backend_options) - set(known))
    if unknown:
        raise ValueError(f"backend_options: the {method!r} backend takes "
                         f"{known or 'no options'}, got unknown {unknown}.")
    return backend_options


def _check_settled(stats):
    p_value, _ = split_window_test(stats)
    if p_value < SPLIT_TEST_LEVEL:
        warnings.warn(
            "The released DP-SGD gradients of the two halves of the recording window "
            f"disagree (split-window test, p = {p_value:.1e}): the trace has not settled, "
            "so the noise-aware posterior may be miscalibrated. Increase max_iter or "
            "burn_in.", ConvergenceWarning, stacklevel=3,
        )
    return {"split_p_value": p_value}
