"""Posteriors given data statistics, as mixture components to sample from.

Each class holds one conditional posterior per draw of the data statistics eta and
samples unconstrained parameters from the components picked by an index array
(:class:`skdpvi.posterior.NoiseAwarePosterior` draws the indices). The families are
the conjugate posteriors of the models: normal-inverse-gamma (linear regression),
gamma, beta, Dirichlet; and a Gaussian with full covariance (the Laplace
approximation given a quadratic log-likelihood, used by logistic regression).
"""

import numpy as np

__all__ = [
    "MeanFieldComponents",
    "NormalInverseGammaComponents",
    "GammaComponents",
    "BetaComponents",
    "DirichletComponents",
    "GaussianComponents",
]


def _softplus(x):
    return np.logaddexp(0.0, x)


class MeanFieldComponents:
    """theta ~ N(mu_m, diag(softplus(rho_m)^2)): the variational family at draws of phi*.

    Parameters
    ----------
    phi_star : ndarray of shape (M, 2 n)
        Draws of the variational parameters (mu, rho).
    """

    def __init__(self, phi_star):
        self.phi_star = np.asarray(phi_star, float)
        self.n_params = self.phi_star.shape[1] // 2

    @property
    def n_components(self):
        return len(self.phi_star)

    @property
    def means(self):
        return self.phi_star[:, : self.n_params]

    @property
    def scales(self):
        return _softplus(self.phi_star[:, self.n_params:])

    def sample(self, index, rng):
        return self.means[index] + self.scales[index] * rng.standard_normal(
            (len(index), self.n_params))


def _inverse_softplus(x):
    return x + np.log(-np.expm1(-x))


class NormalInverseGammaComponents:
    """sigma^2 ~ InvGamma(shape, scale_m), w | sigma^2 ~ N(mean_m, sigma^2 V_m).

    Draws are (w, u) with u = softplus^-1(sigma^2), the linear model's unconstrained
    parameters.

    Parameters
    ----------
    mean : ndarray of shape (M, p)
    chol : ndarray of shape (M, p, p)
        Lower Cholesky factors of V_m.
    shape : float
        Shared by all components.
    scale : ndarray of shape (M,)
    """

    def __init__(self, mean, chol, shape, scale):
        self.mean, self.chol = np.asarray(mean, float), np.asarray(chol, float)
        self.shape, self.scale = float(shape), np.asarray(scale, float)

    @property
    def n_components(self):
        return len(self.mean)

    def sample(self, index, rng):
        var = self.scale[index] / rng.gamma(self.shape, size=len(index))
        z = rng.standard_normal((len(index), self.mean.shape[1]))
        w = self.mean[index] + np.sqrt(var)[:, None] * np.einsum(
            "mij,mj->mi", self.chol[index], z)
        return np.column_stack([w, _inverse_softplus(var)])


class GammaComponents:
    """rate ~ Gamma(shape_m, rate_m); draws u = softplus^-1(rate)."""

    def __init__(self, shape, rate):
        self.shape, self.rate = np.asarray(shape, float), np.asarray(rate, float)

    @property
    def n_components(self):
        return len(self.shape)

    def sample(self, index, rng):
        rate = rng.gamma(self.shape[index]) / self.rate[index]
        return _inverse_softplus(np.maximum(rate, 1e-300))[:, None]


class BetaComponents:
    """p ~ Beta(a_m, b_m); draws u = logit(p)."""

    def __init__(self, a, b):
        self.a, self.b = np.asarray(a, float), np.asarray(b, float)

    @property
    def n_components(self):
        return len(self.a)

    def sample(self, index, rng):
        # logit of a Beta draw through two gammas, stable for extreme p
        ga = rng.gamma(self.a[index])
        gb = rng.gamma(self.b[index])
        return (np.log(ga) - np.log(gb))[:, None]


class DirichletComponents:
    """p ~ Dirichlet(alpha_m); draws u_k = log(p_k / p_K), k < K."""

    def __init__(self, alpha):
        self.alpha = np.asarray(alpha, float)

    @property
    def n_components(self):
        return len(self.alpha)

    def sample(self, index, rng):
        g = np.log(rng.gamma(self.alpha[index]))
        return g[:, :-1] - g[:, -1:]


class GaussianComponents:
    """theta ~ N(mean_m, L_m L_m^T) in the unconstrained space.

    Parameters
    ----------
    mean : ndarray of shape (M, n)
    chol : ndarray of shape (M, n, n) or (n, n)
        Factors L of the covariances L L^T (one shared factor if 2-D): lower Cholesky
        factors, or any square root (the draws are ``mean + L z``).
    """

    def __init__(self, mean, chol):
        self.mean, self.chol = np.asarray(mean, float), np.asarray(chol, float)

    @property
    def n_components(self):
        return len(self.mean)

    def sample(self, index, rng):
        z = rng.standard_normal((len(index), self.mean.shape[1]))
        if self.chol.ndim == 2:
            return self.mean[index] + z @ self.chol.T
        return self.mean[index] + np.einsum("mij,mj->mi", self.chol[index], z)
