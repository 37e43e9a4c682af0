"""Warnings of skdpvi (as :mod:`sklearn.exceptions` for scikit-learn).

Imports nothing from skdpvi, so every layer may import it.
"""

__all__ = ["PrivacyWarning"]


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
