"""Simulators drawing parameters from a prior and data given the parameters.

Each function first draws the true parameter ``theta`` from the prior and then
the data given ``theta``, so that posterior calibration (e.g. TARP coverage)
can be checked on many simulated data sets.
"""

import numbers

import numpy as np

from ..utils.validation import is_int, is_real

__all__ = [
    "make_nig_linear_regression",
    "make_gamma_exponential",
    "make_beta_bernoulli",
    "make_dirichlet_categorical",
]


def _check_random_state(random_state):
    """Turn ``random_state`` into a :class:`numpy.random.Generator`.

    ``None`` and integers seed a new Generator, a Generator is used as is
    (and advanced), and a legacy RandomState seeds a new Generator with one
    integer drawn from it.
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, numbers.Integral):
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int64).max))
    raise ValueError(
        "random_state must be None, an int, a numpy RandomState or Generator; "
        f"got {random_state!r}"
    )


def _check_count(value, name):
    if not is_int(value) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _check_positive(value, name):
    if not is_real(value) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def make_nig_linear_regression(
    n_samples=5000,
    n_features=10,
    *,
    prior_weight_scale=2.0,
    prior_noise_shape=20.0,
    prior_noise_scale=0.5,
    random_state=None,
):
    """Simulate Bayesian linear regression with a normal-inverse-gamma prior.

    This is the model of eq. 28 of the NA-DPVI paper, the normal-inverse-gamma
    prior NIG(0, 1/4, 20, 1/2), i.e. a weight variance factor of
    ``prior_weight_scale ** 2 = 4``:

    - ``sigma2 ~ InvGamma(prior_noise_shape, prior_noise_scale)``, with
      density proportional to ``s ** (-shape - 1) * exp(-scale / s)``;
    - the ``n_features`` coefficients and the intercept are independent given
      ``sigma2``: ``N(0, prior_weight_scale ** 2 * sigma2)``;
    - ``X ~ N(0, 1)`` elementwise, and
      ``y = X @ coef + intercept + N(0, sigma2)``.

    Parameters
    ----------
    n_samples : int, default=5000
        Number of rows.
    n_features : int, default=10
        Number of features (coefficients, not counting the intercept).
    prior_weight_scale : float, default=2.0
        Prior standard deviation of the weights in units of the noise
        standard deviation.
    prior_noise_shape : float, default=20.0
        Shape of the inverse-gamma prior on the noise variance.
    prior_noise_scale : float, default=0.5
        Scale of the inverse-gamma prior on the noise variance (its mean is
        ``scale / (shape - 1)`` when ``shape > 1``).
    random_state : int, RandomState, Generator or None, default=None
        Source of randomness; pass an int for reproducible output.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        Features.
    y : ndarray of shape (n_samples,)
        Targets.
    theta : ndarray of shape (n_features + 2,)
        True parameters: the coefficients, then the intercept, then the noise
        variance ``sigma2``.

    Examples
    --------
    >>> from skdpvi.datasets import make_nig_linear_regression
    >>> X, y, theta = make_nig_linear_regression(100, 3, random_state=0)
    >>> X.shape, y.shape, theta.shape
    ((100, 3), (100,), (5,))
    """
    n_samples = _check_count(n_samples, "n_samples")
    n_features = _check_count(n_features, "n_features")
    weight_scale = _check_positive(prior_weight_scale, "prior_weight_scale")
    shape = _check_positive(prior_noise_shape, "prior_noise_shape")
    scale = _check_positive(prior_noise_scale, "prior_noise_scale")
    rng = _check_random_state(random_state)

    sigma2 = scale / rng.gamma(shape)  # 1 / Gamma(shape, rate=scale)
    weights = rng.normal(0.0, weight_scale * np.sqrt(sigma2), size=n_features + 1)
    coef, intercept = weights[:-1], weights[-1]
    X = rng.standard_normal((n_samples, n_features))
    y = X @ coef + intercept + rng.normal(0.0, np.sqrt(sigma2), size=n_samples)
    return X, y, np.concatenate([weights, [sigma2]])


def make_gamma_exponential(n_samples=5000, *, prior_shape=2.0, prior_rate=2.0, random_state=None):
    """Simulate exponential data with a gamma prior on the rate.

    ``theta ~ Gamma(prior_shape, rate=prior_rate)`` and, given ``theta``,
    ``x_i ~ Exponential(rate=theta)`` independently (mean ``1 / theta``).
    The paper does not state the prior's hyper-parameters; the defaults
    Gamma(2, 2) (prior mean 1) are this package's choice.

    Parameters
    ----------
    n_samples : int, default=5000
        Number of observations.
    prior_shape : float, default=2.0
        Shape of the gamma prior.
    prior_rate : float, default=2.0
        Rate (inverse scale) of the gamma prior.
    random_state : int, RandomState, Generator or None, default=None
        Source of randomness; pass an int for reproducible output.

    Returns
    -------
    x : ndarray of shape (n_samples,)
        Positive observations.
    theta : float
        True rate.

    Examples
    --------
    >>> from skdpvi.datasets import make_gamma_exponential
    >>> x, theta = make_gamma_exponential(1000, random_state=0)
    >>> x.shape, bool(x.min() > 0)
    ((1000,), True)
    """
    n_samples = _check_count(n_samples, "n_samples")
    shape = _check_positive(prior_shape, "prior_shape")
    rate = _check_positive(prior_rate, "prior_rate")
    rng = _check_random_state(random_state)

    theta = rng.gamma(shape, 1.0 / rate)
    return rng.exponential(1.0 / theta, size=n_samples), float(theta)


def make_beta_bernoulli(n_samples=5000, *, prior_a=2.0, prior_b=2.0, random_state=None):
    """Simulate Bernoulli data with a beta prior on the success probability.

    ``theta ~ Beta(prior_a, prior_b)`` and, given ``theta``,
    ``x_i ~ Bernoulli(theta)`` independently. The paper does not state the
    prior's hyper-parameters; the defaults Beta(2, 2) are this package's
    choice.

    Parameters
    ----------
    n_samples : int, default=5000
        Number of observations.
    prior_a, prior_b : float, default=2.0
        Parameters of the beta prior.
    random_state : int, RandomState, Generator or None, default=None
        Source of randomness; pass an int for reproducible output.

    Returns
    -------
    x : ndarray of shape (n_samples,), dtype int64
        Observations in {0, 1}.
    theta : float
        True success probability.

    Examples
    --------
    >>> from skdpvi.datasets import make_beta_bernoulli
    >>> x, theta = make_beta_bernoulli(1000, random_state=0)
    >>> x.shape, sorted(set(x.tolist())) == [0, 1]
    ((1000,), True)
    """
    n_samples = _check_count(n_samples, "n_samples")
    a = _check_positive(prior_a, "prior_a")
    b = _check_positive(prior_b, "prior_b")
    rng = _check_random_state(random_state)

    theta = rng.beta(a, b)
    return (rng.random(n_samples) < theta).astype(np.int64), float(theta)


def make_dirichlet_categorical(n_samples=5000, *, prior_alpha=(2.0, 2.0, 2.0), random_state=None):
    """Simulate categorical data with a Dirichlet prior on the probabilities.

    ``theta ~ Dirichlet(prior_alpha)`` and, given ``theta``, each ``x_i`` is
    category ``k`` with probability ``theta[k]``. The number of categories is
    ``len(prior_alpha)`` (3 by default, categories {0, 1, 2}). The paper does
    not state the prior's hyper-parameters; the default Dirichlet(2, 2, 2) is
    this package's choice.

    Parameters
    ----------
    n_samples : int, default=5000
        Number of observations.
    prior_alpha : array-like of shape (n_categories,), default=(2, 2, 2)
        Positive concentration parameters, at least two.
    random_state : int, RandomState, Generator or None, default=None
        Source of randomness; pass an int for reproducible output.

    Returns
    -------
    x : ndarray of shape (n_samples,), dtype int64
        Categories in ``{0, ..., n_categories - 1}``.
    theta : ndarray of shape (n_categories,)
        True category probabilities (they sum to 1).

    Examples
    --------
    >>> from skdpvi.datasets import make_dirichlet_categorical
    >>> x, theta = make_dirichlet_categorical(1000, random_state=0)
    >>> x.shape, theta.shape, bool(x.max() <= 2)
    ((1000,), (3,), True)
    """
    n_samples = _check_count(n_samples, "n_samples")
    alpha = np.asarray(prior_alpha, dtype=float)
    if alpha.ndim != 1 or alpha.size < 2 or not np.all(np.isfinite(alpha) & (alpha > 0)):
        raise ValueError(
            f"prior_alpha must be a 1-D sequence of at least 2 finite numbers > 0, got {prior_alpha!r}"
        )
    rng = _check_random_state(random_state)

    theta = rng.dirichlet(alpha)
    return rng.choice(alpha.size, size=n_samples, p=theta).astype(np.int64), theta
