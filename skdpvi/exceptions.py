"""Warnings of skdpvi (as :mod:`sklearn.exceptions` for scikit-learn).

Imports nothing from skdpvi, so every layer may import it.
"""

__all__ = ["IdentifiabilityWarning", "PrivacyWarning"]


class PrivacyWarning(UserWarning):
    """A fit ran, but its privacy guarantee is weak or meaningless as configured.

    Raised, for example, when ``delta >= 1 / n_samples``: an (epsilon, delta)
    guarantee with such a delta allows a mechanism that publishes a randomly
    chosen row in full, so the reported ``epsilon_`` no longer protects anyone.
    Filter it like any warning; turn it into an error to make such a fit fail::

        import warnings
        from skdpvi.exceptions import PrivacyWarning
        warnings.simplefilter("error", PrivacyWarning)
    """


class IdentifiabilityWarning(UserWarning):
    """A fit ran, but its DP trace identifies too little for calibrated intervals.

    Raised by the statistics post-processing when the released gradients pin down
    the data's scale statistics (for linear regression the diagonal of X^T X) only
    to a relative standard deviation above one half: the posterior then rests on
    the prior of those statistics and was measured to be miscalibrated in either
    direction (small data at small epsilon). More rows, a larger epsilon or more
    iterations make the trace informative.

    Also raised by linear regression when the release shows features far from
    centred (``inference_diagnostics_["intercept_inflation"]`` above 6): the
    intercept's variance then rests on a small difference of large statistics that
    the trace cannot resolve. Centre the features with public values. And when it
    shows features far from the unit scale that the default ``clip_norm`` and
    learning rate assume (``inference_diagnostics_["feature_scales"]``, a root mean
    square above 4): clipping then distorts the release. Scale the features
    with public values, or choose ``clip_norm`` from public ranges.
    """
