"""The registry of inference backends: the names ``sample_phi_star(method=...)`` knows."""

from typing import Callable, NamedTuple

__all__ = ["Backend", "register_backend", "get_backend", "backend_names"]


class Backend(NamedTuple):
    """A registered backend: its sampler and whether it works on the gradient model."""

    sampler: Callable
    needs_model: bool = True


# name -> Backend, in registration order (the order of INFERENCE_METHODS).
_BACKENDS = {}


def register_backend(name, sampler, *, needs_model=True, replace=False):
    """Register an inference backend under ``name`` for :func:`sample_phi_star`.

    Parameters
    ----------
    name : str
        The ``method`` of :func:`~skdpvi.noise_aware.sample_phi_star` that selects it.
    sampler : callable
        ``sampler(model, n_samples, rng, **backend_options) -> (m, diagnostics)``:
        ``model`` is the :class:`~skdpvi.noise_aware.GradientModel` of the run,
        ``rng`` a :class:`numpy.random.Generator`, ``m`` an array of shape
        (n_samples, d) of draws of ``phi* - model.stats.shift`` and ``diagnostics``
        a dict. With ``needs_model=False`` the sampler gets the
        :class:`~skdpvi.dpvi.DPVIResult` instead of a model and returns draws of
        phi* itself; no model is built (the ``"last_iterate"`` baseline).
    needs_model : bool, default=True
        Whether the sampler works on the gradient model (see ``sampler``).
    replace : bool, default=False
        Allow replacing a backend already registered under ``name``.

    Returns
    -------
    sampler : callable
        ``sampler``, unchanged.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpvi.noise_aware import register_backend
    >>> def prior_mean(model, n_samples, rng):
    ...     return np.tile(model.prior_m_mean, (n_samples, 1)), {}
    >>> register_backend("prior_mean", prior_mean)  # doctest: +SKIP

    after which ``sample_phi_star(result, "prior_mean")`` uses it.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"A backend name must be a non-empty string, got {name!r}.")
    if not callable(sampler):
        raise ValueError(f"The sampler of backend {name!r} must be callable, got {sampler!r}.")
    if name in _BACKENDS and not replace:
        raise ValueError(
            f"A backend named {name!r} is already registered; pass replace=True to replace it."
        )
    _BACKENDS[name] = Backend(sampler, bool(needs_model))
    return sampler


def backend_names():
    """The registered backend names, in registration order."""
    return tuple(_BACKENDS)


def get_backend(name):
    """The :class:`Backend` registered under ``name``; a ValueError naming them if none."""
    try:
        return _BACKENDS[name]
    except (KeyError, TypeError):  # TypeError: an unhashable name
        raise ValueError(
            f"Unknown inference method {name!r}; expected one of {backend_names()}."
        ) from None
