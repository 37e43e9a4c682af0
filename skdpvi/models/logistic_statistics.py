"""Logistic regression's expected gradient in a local quadratic model of the likelihood.

The logistic log-likelihood has no finite sufficient statistic. Near the optimum it is
quadratic to a good approximation (Bernstein-von Mises), so write the negative
log-likelihood as ``1/2 theta^T Lambda theta + b^T theta + const``; with the prior
N(0, tau^2 I) and q = N(mu, diag(s^2)) the negative ELBO is then

    L = 1/2 mu^T Lambda mu + 1/2 sum_j Lambda_jj s_j^2 + b^T mu
        + (|mu|^2 + |s|^2) / (2 tau^2) - sum_j log s_j,

whose gradient is linear in eta = (vech Lambda, b): exactly the form of
:mod:`skdpvi.models.statistics`. Lambda is the (expected) Hessian of the negative
log-likelihood, dense: the coupling of correlated features and of one-hot blocks that
a diagonal gradient model misses. Given eta the posterior is Gaussian with the full
covariance ``(Lambda + I / tau^2)^-1`` (the linear-response covariance of the
mean-field fit, Giordano, Broderick & Jordan 2018), not mean-field's diagonal
``1 / (Lambda_jj + 1 / tau^2)``.

The quadratic model is an approximation: where the trace wanders far beyond the
posterior width, the curvature it averages over is not the curvature at the
optimum.

Prior predictive. Lambda must be positive semi-definite (a sum of per-example
Hessians). Draws outside the cone are projected onto it (negative eigenvalues set to
0) rather than rejected: along a direction the data do not inform (a one-hot block
beside the intercept) half the Gaussian's mass has a negative eigenvalue, and with
several such directions rejection left no draw at all (a ValueError on the
correlated benchmark at T = 10,000); projected, the prior takes over there. Given Lambda, the likelihood's minimiser theta_hat = -Lambda^-1 b is
about N(theta, Lambda^-1) and theta ~ N(0, tau^2 I), so b ~ N(0, Lambda + tau^2
Lambda^2): along directions the data do not inform (Lambda ~ 0, e.g. a one-hot block
beside the intercept) b must be ~0, however noisy its trace estimate. This Gaussian
prior on b, with Lambda at a first estimate, enters the normal equations
(:meth:`gaussian_prior`); without it the DP noise of b along such directions spread
the mixture components several prior widths apart.
"""

import numpy as np

from ._quadrature import sigmoid, softplus
from .components import GaussianComponents
from .statistics import SymmetricBlockStatistics, unvech

__all__ = ["LogisticRegressionStatistics"]


class LogisticRegressionStatistics(SymmetricBlockStatistics):
    """:class:`DataStatistics` of :class:`~skdpvi.models.LogisticRegressionModel`.

    Parameters
    ----------
    model : LogisticRegressionModel
    n_examples : int
    """

    #: the prior predictive density is flat (up to positive definiteness)
    flat_prior = True

    def __init__(self, model, n_examples):
        self.model = model
        self.n_examples = int(n_examples)
        p = model.n_weights
        self._init_block(p)
        self.n_statistics = self.n_vech + p
        names = [f"Lambda[{i},{k}]" for i, k in zip(self.rows, self.cols)]
        self.statistic_names = tuple(names + [f"b[{j}]" for j in range(p)])

    def _parts(self, phi):
        phi = np.atleast_2d(np.asarray(phi, float))
        p = self.p
        prec = 1.0 / self.model.prior_scale**2
        mu, rho = phi[:, :p], phi[:, p:]
        s, sig = softplus(rho), sigmoid(rho)
        r = np.concatenate([prec * mu, sig * (prec * s - 1.0 / s)], 1)
        return mu, s * sig, r

    def design(self, phi):
        mu, scale_design, r = self._parts(phi)
        T, p = mu.shape
        J = np.zeros((T, 2 * p, self.n_statistics))
        rows, cols, off = self.rows, self.cols, self.off_diagonal
        vech = np.arange(self.n_vech)
        J[:, rows, vech] += mu[:, cols]
        J[:, cols[off], off] += mu[:, rows[off]]
        J[:, np.arange(p), self.n_vech + np.arange(p)] = 1.0
        J[:, p + np.arange(p), self.diagonal] = scale_design
        return J, r

    def normal_equations(self, phi, target, precision):
        """As :meth:`DataStatistics.normal_equations`, through ``G = sum (mu, 1)(mu, 1)^T``."""
        mu, scale_design, r = self._parts(phi)
        p, k = self.p, self.n_statistics
        y = np.asarray(target, float) - r
        P, h = np.zeros((k, k)), np.zeros(k)
        yy = float(np.einsum("td,d,td->", y, precision, y))
        P[self.diagonal, self.diagonal] += precision[p:] * (scale_design**2).sum(0)
        h[self.diagonal] += precision[p:] * (scale_design * y[:, p:]).sum(0)
        ext = np.column_stack([mu, np.ones(len(mu))])
        G = ext.T @ ext
        Gy = ext.T @ y[:, :p]
        for j in range(p):
            index = self._scatter[j]
            P[np.ix_(index, index)] += precision[j] * G
            h[index] += precision[j] * Gy[:, j]
        return P, h, yy

    def expected_gradient(self, phi, eta):
        mu, scale_design, r = self._parts(phi)
        Lam = unvech(np.asarray(eta, float)[:self.n_vech], self.p)
        out = r.copy()
        out[:, :self.p] += mu @ Lam + eta[self.n_vech:]
        out[:, self.p:] += scale_design * np.diag(Lam)
        return out

    def scale_statistics(self):
        """The diagonal of the curvature Lambda."""
        return self.diagonal

    def gaussian_prior(self, eta_hat):
        Lam = unvech(np.asarray(eta_hat, float)[:self.n_vech], self.p)
        w, v = np.linalg.eigh(0.5 * (Lam + Lam.T))
        w = np.maximum(w, 0.0)
        tau2 = self.model.prior_scale**2
        var = w + tau2 * w**2 + 1e-9 * max(w.max(), 1.0)
        prec_b = (v / var) @ v.T
        precision = np.zeros((self.n_statistics, self.n_statistics))
        precision[self.n_vech:, self.n_vech:] = prec_b
        return precision, np.zeros(self.n_statistics)

    def _precision(self, eta):
        """Lambda projected onto the PSD cone (eigenvalues floored at 0), plus the prior's."""
        Lam = unvech(np.asarray(eta, float)[..., :self.n_vech], self.p)
        w, v = np.linalg.eigh(0.5 * (Lam + np.swapaxes(Lam, -1, -2)))
        Lam = (v * np.maximum(w, 0.0)[..., None, :]) @ np.swapaxes(v, -1, -2)
        return Lam + np.eye(self.p) / self.model.prior_scale**2

    def step_curvature(self, eta):
        """The curvature of the negative ELBO in all the means, ``Lambda + I / tau^2``
        (Lambda projected onto the PSD cone): the intercept included, since the
        direction a one-hot block shares with it is restrained by the prior alone."""
        return np.arange(self.p), self._precision(np.asarray(eta, float)[None])[0]

    def mean_curvature(self, eta, phi):
        """``Lambda + I / tau^2`` (the quadratic model's, the same at every phi)."""
        return self.step_curvature(eta)

    def log_prior(self, eta):
        # flat: a draw of Lambda outside the PSD cone is projected onto it in
        # conditional_posterior rather than rejected (see the module docstring)
        return np.zeros(len(np.atleast_2d(eta)))

    def conditional_posterior(self, eta):
        eta = np.asarray(eta, float)
        cov = np.linalg.inv(self._precision(eta))
        cov = 0.5 * (cov + np.swapaxes(cov, 1, 2))
        mean = -np.einsum("mij,mj->mi", cov, eta[:, self.n_vech:])
        return GaussianComponents(mean, np.linalg.cholesky(cov))
