"""The noise-aware posterior: a mixture over what the DP noise leaves uncertain.

The paper's form (eq. 23) is p~(theta | trace) = (1/M) sum_m q(theta; phi*_m), where
phi*_m are draws from the post-processing posterior of the variational optimum and
q(theta; phi) = N(mu, diag(softplus(rho)^2)) lives in the unconstrained space
(:class:`~skdpvi.models.components.MeanFieldComponents`). The default
post-processing (:func:`skdpvi.noise_aware.statistics_posterior`) gives the same kind
of mixture over draws of the data statistics, each component the model's posterior
given them (normal-inverse-gamma, gamma, beta, Dirichlet or Gaussian components of
:mod:`skdpvi.models.components`). The object holds only the components (functions of
the privatised trace) and the model's public definition, so it can be pickled and
used without the trace or the data.
"""

import numpy as np
import torch

from .models.components import MeanFieldComponents

__all__ = ["NoiseAwarePosterior"]


class NoiseAwarePosterior:
    """Mixture posterior over the model parameters.

    Parameters
    ----------
    phi_star : ndarray of shape (M, 2 * n_params) or None
        Draws of the variational parameters (mu, rho): the paper's mixture of
        mean-field Gaussians. None when ``components`` are given.
    model : skdpvi.models.Model
        Supplies the parameter names and the constraining transform.
    method : str
        The inference backend that produced the components.
    components : object, optional
        Mixture components with ``n_components`` and ``sample(index, rng)`` (see
        :mod:`skdpvi.models.components`); built from ``phi_star`` when not given.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpvi.models import LogisticRegressionModel
    >>> phi = np.array([[0.5, -1.0, -2.0, -2.0]])  # mu = (0.5, -1), softplus(-2) = 0.13
    >>> post = NoiseAwarePosterior(phi, LogisticRegressionModel(1), "last_iterate")
    >>> post.sample(5, random_state=0).shape
    (5, 2)
    >>> post.param_names
    ('coef[0]', 'intercept')
    """

    def __init__(self, phi_star, model, method, components=None):
        if components is None:
            components = MeanFieldComponents(phi_star)
        self.components = components
        self.phi_star = getattr(components, "phi_star", None)
        self.model = model
        self.method = method

    @classmethod
    def from_components(cls, components, model, method):
        """A posterior from mixture components (see :mod:`skdpvi.models.components`)."""
        return cls(None, model, method, components=components)

    @property
    def n_components(self):
        return self.components.n_components

    @property
    def param_names(self):
        """Names of the constrained parameters, in column order of :meth:`sample`."""
        return tuple(self.model.param_names)

    @property
    def n_params(self):
        return self.model.n_params

    @property
    def means(self):
        """Variational means mu of the mixture components, shape (M, n_params).

        Only for the paper's mixture of mean-field Gaussians (``phi_star`` given).
        """
        return self._mean_field().means

    @property
    def scales(self):
        """Variational standard deviations of the components, shape (M, n_params).

        Only for the paper's mixture of mean-field Gaussians (``phi_star`` given).
        """
        return self._mean_field().scales

    def _mean_field(self):
        if not isinstance(self.components, MeanFieldComponents):
            raise AttributeError(
                f"The {self.method!r} posterior is not a mixture of mean-field Gaussians; "
                "use sample(), mean() or std() instead."
            )
        return self.components

    def sample(self, n_samples=1000, random_state=None, unconstrained=False):
        """Draw parameters from the mixture.

        Parameters
        ----------
        n_samples : int, default=1000
        random_state : int, numpy Generator or None
        unconstrained : bool, default=False
            Return draws in the unconstrained space the inference works in
            (e.g. the softplus-inverse of the noise variance).

        Returns
        -------
        ndarray of shape (n_samples, n_params)
        """
        if not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}.")
        rng = np.random.default_rng(random_state)
        component = rng.integers(self.n_components, size=n_samples)
        theta = self.components.sample(component, rng)
        return theta if unconstrained else self.to_constrained(theta)

    def to_constrained(self, theta):
        """Map unconstrained parameters to the model's parameter space."""
        with torch.no_grad():
            out = self.model.constrain(torch.as_tensor(np.asarray(theta, float)))
        return out.numpy()

    def to_unconstrained(self, theta):
        """Map constrained parameters (e.g. a true simulated theta) to unconstrained."""
        with torch.no_grad():
            out = self.model.unconstrain(torch.as_tensor(np.asarray(theta, float)))
        return out.numpy()

    def mean(self, n_samples=20_000, random_state=0, unconstrained=False):
        """Posterior mean (Monte Carlo; exact in the unconstrained space for mean-field mixtures)."""
        if unconstrained and isinstance(self.components, MeanFieldComponents):
            return self.means.mean(0)
        return self.sample(n_samples, random_state, unconstrained).mean(0)

    def std(self, n_samples=20_000, random_state=0, unconstrained=False):
        """Posterior standard deviation (Monte Carlo; exact unconstrained for mean-field mixtures)."""
        if unconstrained and isinstance(self.components, MeanFieldComponents):
            return np.sqrt((self.scales**2).mean(0) + self.means.var(0))
        return self.sample(n_samples, random_state, unconstrained).std(0)

    def quantile(self, q, n_samples=20_000, random_state=0, unconstrained=False):
        """Posterior quantiles by Monte Carlo, shape ``np.shape(q) + (n_params,)``."""
        draws = self.sample(n_samples, random_state, unconstrained)
        return np.quantile(draws, q, axis=0)

    def interval(self, credibility=0.9, **kwargs):
        """Central credible interval per parameter: (lower, upper) arrays."""
        alpha = (1 - credibility) / 2
        lo, hi = self.quantile([alpha, 1 - alpha], **kwargs)
        return lo, hi

    def __repr__(self):
        return (f"NoiseAwarePosterior(n_params={self.n_params}, "
                f"n_components={self.n_components}, method={self.method!r})")
