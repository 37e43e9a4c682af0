"""The exponential families' expected gradients in their sufficient statistics.

For the three models of :mod:`skdpvi.models.exponential_family` the negative ELBO is
linear in the sufficient statistic of the data (the sum of x, or the category
counts) with N known, so the expected DP-SGD gradient is exactly
``J(phi) eta + r(phi)`` (:mod:`skdpvi.models.statistics`). The posterior given eta is
the conjugate one, and eta's prior predictive density is the compound (beta-prime,
beta-binomial, Dirichlet-multinomial) distribution, continued to real eta through
the gamma function so that Gaussian draws of eta can be weighted.

Gamma-Exponential, rate = softplus(u), prior Gamma(a, b), S = sum x::

    L = -(N + a - 1) E[log rate] + (S + b) E[rate] - E[log sigmoid(u)] - log s

Beta-Bernoulli, p = sigmoid(u), prior Beta(a, b), S = sum x::

    L = (S + a) E[softplus(-u)] + (N - S + b) E[softplus(u)] - log s

Dirichlet-Categorical, p = softmax(u_1, u_2, 0), prior Dirichlet(alpha), counts n::

    L = -sum_k (n_k + alpha_k) E[u_k] + (N + sum alpha) E[logsumexp(u_1, u_2, 0)] - sum log s_k
"""

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import gammaln

from ._quadrature import (gaussian_expectation, sigmoid, softplus,
                          softplus_family_expectations, softplus_value)
from .components import BetaComponents, DirichletComponents, GammaComponents
from .statistics import DataStatistics

__all__ = ["GammaExponentialStatistics", "BetaBernoulliStatistics",
           "DirichletCategoricalStatistics"]


def _scale_parts(phi):
    mu, rho = phi[:, 0], phi[:, 1]
    return mu, softplus(rho), sigmoid(rho)


class GammaExponentialStatistics(DataStatistics):
    """eta = (sum of x,) for :class:`~skdpvi.models.GammaExponentialModel`.

    Parameters
    ----------
    model : GammaExponentialModel
    n_examples : int
        N, the number of rows (public).
    """

    n_statistics = 1
    statistic_names = ("sum_x",)

    def __init__(self, model, n_examples):
        self.model, self.n_examples = model, int(n_examples)

    def design(self, phi):
        phi = np.atleast_2d(np.asarray(phi, float))
        a, b, n = self.model.prior_shape, self.model.prior_rate, self.n_examples
        mu, s, sig = _scale_parts(phi)
        (_, lm, ls), (_, rm, rs), (_, gm, gs) = softplus_family_expectations(
            mu, s, ("log_softplus", "softplus_value", "log_sigmoid"))
        J = np.stack([rm, sig * rs], 1)[:, :, None]
        r = np.stack([-(n + a - 1) * lm + b * rm - gm,
                      sig * (-(n + a - 1) * ls + b * rs - gs - 1.0 / s)], 1)
        return J, r

    def per_example_predictive(self, eta):
        # x ~ Exponential(rate) at the posterior mean rate, on a fine trapezoid grid
        # up to 40 / rate: clipping makes the integrand kinked, where Gauss-Laguerre
        # nodes got the correction's slope in eta 18-30 % wrong, and 256
        # equal-probability nodes (the previous rule) the clipped loss 7 % low with
        # 2 % of the rows clipped, 27 % with 0.5 % (their last node stops at the
        # 0.998 quantile of a tail that clipping weighs linearly)
        a, b, n = self.model.prior_shape, self.model.prior_rate, self.n_examples
        rate = (a + n) / (b + max(float(eta[0]), 1e-12))
        return _exponential_grid(rate)

    def log_prior(self, eta):
        S = np.asarray(eta, float)[:, 0]
        a, b, n = self.model.prior_shape, self.model.prior_rate, self.n_examples
        out = np.full(len(S), -np.inf)
        ok = S > 0
        out[ok] = (n - 1) * np.log(S[ok]) - (n + a) * np.log(b + S[ok])
        return out

    def conditional_posterior(self, eta):
        S = np.asarray(eta, float)[:, 0]
        a, b = self.model.prior_shape, self.model.prior_rate
        return GammaComponents(np.full(len(S), a + self.n_examples), b + S)


def _exponential_grid(rate, n_points=1001, reach=40.0):
    """Nodes and trapezoid weights (summing to 1) of Exponential(rate) on [0, reach / rate]."""
    z = np.linspace(0.0, reach, n_points)
    weights = np.exp(-z)
    weights[[0, -1]] *= 0.5
    return (z / rate)[:, None], weights / weights.sum()


class BetaBernoulliStatistics(DataStatistics):
    """eta = (number of ones,) for :class:`~skdpvi.models.BetaBernoulliModel`.

    Parameters
    ----------
    model : BetaBernoulliModel
    n_examples : int
        N, the number of rows (public).
    """

    n_statistics = 1
    statistic_names = ("sum_x",)

    def __init__(self, model, n_examples):
        self.model, self.n_examples = model, int(n_examples)

    def design(self, phi):
        phi = np.atleast_2d(np.asarray(phi, float))
        a, b, n = self.model.prior_a, self.model.prior_b, self.n_examples
        mu, s, sig = _scale_parts(phi)
        # E[softplus(-u)] = E[softplus(u)] - E[u]: its derivatives are those of
        # E[softplus(u)] minus (1, 0)
        _, pm, ps = gaussian_expectation(softplus_value, mu, s)
        nm, ns = pm - 1.0, ps
        J = np.stack([nm - pm, sig * (ns - ps)], 1)[:, :, None]
        r = np.stack([a * nm + (n + b) * pm, sig * (a * ns + (n + b) * ps - 1.0 / s)], 1)
        return J, r

    def per_example_predictive(self, eta):
        a, b, n = self.model.prior_a, self.model.prior_b, self.n_examples
        p = (a + float(eta[0])) / (a + b + n)
        return np.array([[0.0], [1.0]]), np.array([1 - p, p])

    def log_prior(self, eta):
        S = np.asarray(eta, float)[:, 0]
        a, b, n = self.model.prior_a, self.model.prior_b, self.n_examples
        out = np.full(len(S), -np.inf)
        ok = (S >= 0) & (S <= n)
        Sk = S[ok]
        out[ok] = (-gammaln(Sk + 1) - gammaln(n - Sk + 1)
                   + gammaln(a + Sk) + gammaln(b + n - Sk))
        return out

    def conditional_posterior(self, eta):
        S = np.asarray(eta, float)[:, 0]
        a, b = self.model.prior_a, self.model.prior_b
        return BetaComponents(a + S, b + self.n_examples - S)


# 24 x 24 nodes: against 40 x 40 the design differs by 1e-7 (absolute, on gradients
# of size 5,000) even for posterior sds up to 1; at 40 x 40 the quadrature was most of
# the post-processing's time
_NODES, _WEIGHTS = hermegauss(24)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


class DirichletCategoricalStatistics(DataStatistics):
    """eta = (n_1, n_2), counts of the first two categories, for
    :class:`~skdpvi.models.DirichletCategoricalModel` (n_3 = N - n_1 - n_2).

    Parameters
    ----------
    model : DirichletCategoricalModel
    n_examples : int
        N, the number of rows (public).
    """

    n_statistics = 2
    statistic_names = ("count[0]", "count[1]")

    def __init__(self, model, n_examples):
        self.model, self.n_examples = model, int(n_examples)

    def _softmax_moments(self, mu, s):
        """E[softmax_k(u)] and E[softmax_k(u) z_k] for k = 1, 2 (tensor Gauss-Hermite)."""
        z1, z2 = np.meshgrid(_NODES, _NODES, indexing="ij")
        w = np.outer(_WEIGHTS, _WEIGHTS)
        u1 = mu[:, 0, None, None] + s[:, 0, None, None] * z1
        u2 = mu[:, 1, None, None] + s[:, 1, None, None] * z2
        top = np.maximum(np.maximum(u1, u2), 0.0)
        e1, e2, e3 = np.exp(u1 - top), np.exp(u2 - top), np.exp(-top)
        total = e1 + e2 + e3
        p1, p2 = e1 / total, e2 / total
        mean = np.stack([(p1 * w).sum((1, 2)), (p2 * w).sum((1, 2))], 1)
        with_z = np.stack([(p1 * z1 * w).sum((1, 2)), (p2 * z2 * w).sum((1, 2))], 1)
        return mean, with_z

    def design(self, phi):
        J, r = self._memoised(self._design, phi)
        return J.copy(), r.copy()

    def _design(self, phi):
        alpha = np.asarray(self.model.prior_alpha, float)
        n = self.n_examples
        mu, rho = phi[:, :2], phi[:, 2:]
        s, sig = softplus(rho), sigmoid(rho)
        mean, with_z = self._softmax_moments(mu, s)
        total = n + alpha.sum()
        J = np.zeros((len(phi), 4, 2))
        J[:, 0, 0] = J[:, 1, 1] = -1.0
        r = np.concatenate([-alpha[:2] + total * mean, sig * (total * with_z - 1.0 / s)], 1)
        return J, r

    def per_example_predictive(self, eta):
        alpha = np.asarray(self.model.prior_alpha, float)
        counts = np.r_[eta, self.n_examples - np.sum(eta)]
        p = (alpha + counts) / (alpha.sum() + self.n_examples)
        # one-hot of the first two categories; the third is (0, 0)
        return np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]), p

    def log_prior(self, eta):
        counts = np.asarray(eta, float)
        alpha = np.asarray(self.model.prior_alpha, float)
        n = self.n_examples
        full = np.column_stack([counts, n - counts.sum(1)])
        out = np.full(len(full), -np.inf)
        ok = np.all(full >= 0, axis=1)
        c = full[ok]
        out[ok] = (gammaln(c + alpha) - gammaln(c + 1)).sum(1)
        return out

    def conditional_posterior(self, eta):
        counts = np.asarray(eta, float)
        alpha = np.asarray(self.model.prior_alpha, float)
        full = np.column_stack([counts, self.n_examples - counts.sum(1)])
        return DirichletComponents(alpha + full)
