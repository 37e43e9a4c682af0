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
from .utils.validation import is_real

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
    param_names : sequence of str, optional
        Names of the parameters; default the model's (``coef[0]``, ...). The
        estimators name the coefficients after ``feature_names_in_`` when X has
        column names (``coef[age]``).
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

    def __init__(self, phi_star, model, method, param_names=None, components=None):
        if components is None:
            components = MeanFieldComponents(_checked_phi_star(phi_star, model.n_params))
        self.components = components
        self.phi_star = getattr(components, "phi_star", None)
        self.model = model
        self.method = method
        self.param_names = param_names

    @classmethod
    def from_components(cls, components, model, method, param_names=None):
        """A posterior from mixture components (see :mod:`skdpvi.models.components`)."""
        return cls(None, model, method, param_names=param_names, components=components)

    @property
    def n_components(self):
        return self.components.n_components

    @property
    def param_names(self):
        """Names of the constrained parameters, in column order of :meth:`sample`.

        The names given (to the constructor, or by assigning this property), else
        the model's. Assign None to go back to the model's names.
        """
        names = getattr(self, "_param_names", None)  # absent in pickles of 0.1.0
        return tuple(self.model.param_names) if names is None else names

    @param_names.setter
    def param_names(self, names):
        if names is not None:
            names = tuple(str(n) for n in names)
            if len(names) != self.n_params:
                raise ValueError(
                    f"param_names has {len(names)} names for {self.n_params} parameters."
                )
        self._param_names = names

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
        """Map unconstrained parameters to the model's parameter space.

        Parameters
        ----------
        theta : array-like of shape (..., n_params)

        Returns
        -------
        ndarray of the same shape
        """
        with torch.no_grad():
            out = self.model.constrain(torch.as_tensor(self._checked_theta(theta)))
        return out.numpy()

    def to_unconstrained(self, theta):
        """Map constrained parameters (e.g. a true simulated theta) to unconstrained.

        Parameters
        ----------
        theta : array-like of shape (..., n_params)

        Returns
        -------
        ndarray of the same shape
        """
        with torch.no_grad():
            out = self.model.unconstrain(torch.as_tensor(self._checked_theta(theta)))
        return out.numpy()

    def _checked_theta(self, theta):
        theta = np.asarray(theta, float)
        if theta.ndim == 0 or theta.shape[-1] != self.n_params:
            raise ValueError(f"theta must have shape (..., {self.n_params}) (one value per "
                             f"parameter), got shape {theta.shape}.")
        return theta

    def mean(self, n_samples=20_000, random_state=0, unconstrained=False):
        """Posterior mean (Monte Carlo; exact in the unconstrained space for mean-field mixtures).

        Parameters
        ----------
        n_samples : int, default=20_000
            Monte Carlo draws from the mixture.
        random_state : int, numpy Generator or None, default=0
        unconstrained : bool, default=False
            In the unconstrained space of the inference instead of the model's.

        Returns
        -------
        ndarray of shape (n_params,)
        """
        if unconstrained and isinstance(self.components, MeanFieldComponents):
            return self.means.mean(0)
        return self.sample(n_samples, random_state, unconstrained).mean(0)

    def std(self, n_samples=20_000, random_state=0, unconstrained=False):
        """Posterior standard deviation (Monte Carlo; exact unconstrained for mean-field mixtures).

        Parameters
        ----------
        n_samples : int, default=20_000
            Monte Carlo draws from the mixture.
        random_state : int, numpy Generator or None, default=0
        unconstrained : bool, default=False
            In the unconstrained space of the inference instead of the model's.

        Returns
        -------
        ndarray of shape (n_params,)
        """
        if unconstrained and isinstance(self.components, MeanFieldComponents):
            return np.sqrt((self.scales**2).mean(0) + self.means.var(0))
        return self.sample(n_samples, random_state, unconstrained).std(0)

    def quantile(self, q, n_samples=20_000, random_state=0, unconstrained=False):
        """Posterior quantiles by Monte Carlo, shape ``np.shape(q) + (n_params,)``.

        Parameters
        ----------
        q : float or array-like of floats in [0, 1]
        n_samples : int, default=20_000
            Monte Carlo draws from the mixture.
        random_state : int, numpy Generator or None, default=0
        unconstrained : bool, default=False
            In the unconstrained space of the inference instead of the model's.
        """
        q_array = np.asarray(q)
        if not (q_array.dtype.kind in "iuf" and q_array.size
                and np.all((q_array >= 0) & (q_array <= 1))):
            raise ValueError(f"q must be a number or array of numbers in [0, 1], got {q!r}.")
        draws = self.sample(n_samples, random_state, unconstrained)
        return np.quantile(draws, q_array, axis=0)

    def interval(self, credibility=0.9, **kwargs):
        """Central credible interval per parameter: (lower, upper) arrays.

        The arrays follow :attr:`param_names`; :meth:`summary` gives the same
        intervals in a table with the names, means and standard deviations.

        Parameters
        ----------
        credibility : float, default=0.9
            Probability mass of the central interval, in (0, 1).
        **kwargs
            ``n_samples``, ``random_state``, ``unconstrained``, as in :meth:`quantile`.

        Returns
        -------
        lower, upper : ndarray of shape (n_params,)
        """
        _check_credibility(credibility)
        alpha = (1 - credibility) / 2
        lo, hi = self.quantile([alpha, 1 - alpha], **kwargs)
        return lo, hi

    def summary(self, credibility=0.9, *, n_samples=20_000, random_state=0,
                unconstrained=False, as_frame=True):
        """Posterior mean, standard deviation and central credible interval per parameter.

        A table like :func:`arviz.summary` (without its sampler diagnostics: the
        draws of the mixture are independent), one row per parameter, indexed by
        :attr:`param_names`. All columns come from the same Monte Carlo draws, so
        with the same ``n_samples`` and ``random_state`` they equal :meth:`mean`,
        :meth:`std` and :meth:`interval` (whose defaults are the same).

        Parameters
        ----------
        credibility : float, default=0.9
            Probability mass of the central interval, in (0, 1).
        n_samples : int, default=20_000
            Monte Carlo draws from the mixture.
        random_state : int, numpy Generator or None, default=0
        unconstrained : bool, default=False
            Summarise the parameters in the unconstrained space of the inference.
        as_frame : bool, default=True
            Return a :class:`pandas.DataFrame` (needs pandas). With False, a numpy
            record array with the same columns and a first field ``param``.

        Returns
        -------
        DataFrame or numpy.recarray
            Columns ``mean``, ``sd`` (``ddof=0``) and the two interval bounds,
            named after their quantiles (``"5%"`` and ``"95%"`` for
            ``credibility=0.9``).

        Examples
        --------
        >>> import numpy as np
        >>> from skdpvi.models import LogisticRegressionModel
        >>> phi = np.array([[0.5, -1.0, -2.0, -2.0]])
        >>> post = NoiseAwarePosterior(phi, LogisticRegressionModel(1), "last_iterate",
        ...                            param_names=["coef[age]", "intercept"])
        >>> table = post.summary(as_frame=False)
        >>> table.dtype.names
        ('param', 'mean', 'sd', '5%', '95%')
        >>> table["param"].tolist()
        ['coef[age]', 'intercept']
        """
        _check_credibility(credibility)
        draws = self.sample(n_samples, random_state, unconstrained)
        alpha = (1 - credibility) / 2
        lo, hi = np.quantile(draws, [alpha, 1 - alpha], axis=0)
        columns = {
            "mean": draws.mean(0),
            "sd": draws.std(0),
            f"{100 * alpha:.10g}%": lo,
            f"{100 * (1 - alpha):.10g}%": hi,
        }
        if not as_frame:
            return np.rec.fromarrays([np.array(self.param_names), *columns.values()],
                                     names=["param", *columns])
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError(
                "NoiseAwarePosterior.summary() returns a pandas DataFrame and needs "
                "pandas (pip install pandas); summary(as_frame=False) returns a numpy "
                "record array instead."
            ) from exc
        return pd.DataFrame(columns, index=pd.Index(self.param_names, name="param"))

    def __repr__(self):
        return (f"NoiseAwarePosterior(n_params={self.n_params}, "
                f"n_components={self.n_components}, method={self.method!r})")


def _checked_phi_star(phi_star, n_params):
    """``phi_star`` as a float array of shape (M, 2 n_params), M >= 1, all finite."""
    phi = np.asarray(phi_star, float)
    if phi.ndim != 2 or phi.shape[0] < 1 or phi.shape[1] != 2 * n_params:
        raise ValueError(f"phi_star must have shape (M, {2 * n_params}) with M >= 1 (the "
                         f"variational means and rhos of a model of {n_params} parameters), "
                         f"got shape {phi.shape}.")
    if not np.all(np.isfinite(phi)):
        raise ValueError("phi_star contains NaN or infinite values.")
    return phi


def _check_credibility(credibility):
    if not (is_real(credibility) and 0 < credibility < 1):
        raise ValueError(f"credibility must be a number in (0, 1), got {credibility!r}.")
