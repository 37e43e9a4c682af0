"""Reference points of the TARP balls: the "posterior" and "prior" schemes, callables, arrays."""

import numpy as np

from .._validation import _as_float_array

_REFERENCE_SCHEMES = ("posterior", "prior")


def _draw_references(references, samples, rng, prior_sampler=None):
    """Reference points of shape (n_simulations, n_params) for a scheme.

    See :func:`tarp_coverage` for the schemes.
    """
    n_sim, _, n_params = samples.shape
    if isinstance(references, str):
        if references == "posterior":
            mean = samples.mean(axis=1)
            sd = samples.std(axis=1)
            return mean + sd * rng.uniform(-4.0, 4.0, size=mean.shape)
        if references == "prior":
            if prior_sampler is None or not callable(prior_sampler):
                raise ValueError(
                    'references="prior" requires prior_sampler, a callable '
                    "(n, rng) -> array of shape (n, n_params)."
                )
            refs = prior_sampler(n_sim, rng)
            name = "prior_sampler(n, rng)"
        else:
            raise ValueError(
                f"references must be one of {_REFERENCE_SCHEMES}, an array of "
                "shape (n_simulations, n_params) or a callable "
                f"(rng, samples_i) -> reference; got {references!r}."
            )
    elif callable(references):
        refs = [np.ravel(references(rng, samples[i])) for i in range(n_sim)]
        name = "references(rng, samples_i)"
        if any(r.shape != (n_params,) for r in refs):
            raise ValueError(
                f"{name} must return {n_params} values (one per parameter)."
            )
    else:
        refs = references
        name = "references"
    refs = _as_float_array(refs, name, ndim=2)
    if refs.shape != (n_sim, n_params):
        raise ValueError(
            f"{name} must have shape (n_simulations, n_params) = "
            f"{(n_sim, n_params)}, got {refs.shape}."
        )
    return refs
