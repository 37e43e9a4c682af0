"""Bayesian logistic regression with an isotropic Gaussian prior."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from .base import GLMModel, gauss_hermite


class LogisticRegressionModel(GLMModel):
    """y | x, theta ~ Bernoulli(sigmoid(x . w + b)), theta = (w, b) ~ N(0, s^2 I).

    Parameters
    ----------
    n_features : int
    prior_scale : float, default=1.0
        Prior standard deviation s of every coefficient and the intercept.
    fit_intercept : bool, default=True
    exact_expectations : bool, default=False
        Compute the ELBO's per-example gradients as exact expectations over q
        (Gauss-Hermite quadrature of the logit's one-dimensional Gaussian) instead of
        Monte Carlo averages over the engine's draws: see
        :meth:`expected_glm_gradients`.
    """

    #: glm_gradients and grad_log_prior_unconstrained broadcast over lead axes (the
    #: runs of the lockstep engine), which then calls them without vmap
    broadcasts_lead_axes = True

    def __init__(self, n_features, prior_scale=1.0, fit_intercept=True,
                 exact_expectations=False):
        self.n_features = n_features
        self.exact_expectations = bool(exact_expectations)
        self.prior_scale = float(prior_scale)
        self.fit_intercept = fit_intercept
        names = [f"coef[{j}]" for j in range(n_features)]
        self.param_names = tuple(names + (["intercept"] if fit_intercept else []))
        self.n_weights = len(self.param_names)

    def data_statistics(self, n_examples):
        from .logistic_statistics import LogisticRegressionStatistics

        return LogisticRegressionStatistics(self, n_examples)

    def prepare_data(self, X, y):
        if self.fit_intercept:
            X = torch.cat([X, torch.ones_like(X[:, :1])], 1)
        return X, y

    def log_likelihood(self, theta, X, y):
        z = torch.einsum("bp,bsp->bs", X, theta.expand(X.shape[0], *theta.shape[1:]))
        return -F.softplus(-(2 * y[:, None] - 1) * z)

    def log_prior(self, theta):
        s = self.prior_scale
        n = theta.shape[-1]
        return -0.5 * (theta**2).sum(-1) / s**2 - n * (math.log(s) + 0.5 * math.log(2 * math.pi))

    def grad_log_prior_unconstrained(self, theta):
        return -theta / self.prior_scale**2

    def weight_prior_sd(self, draws):
        """The prior sd of the coefficients and the intercept for each unconstrained
        draw (rows of ``draws``): ``prior_scale`` for all (for
        :class:`~skdpvi.noise_aware.FlatPriorComponents`)."""
        return np.full(len(draws), self.prior_scale)

    def glm_gradients(self, theta, eps, X, y):
        # d/dtheta_s log p(y_i | x_i, theta_s) = (y_i - sigmoid(x_i . theta_s)) x_i;
        # any lead axes (runs of the lockstep engine) broadcast
        r = (theta @ X.mT).sigmoid_().neg_().add_(y.unsqueeze(-2))  # (..., S, B), in place
        n_draws = theta.shape[-2]
        none = X.new_empty((*X.shape[:-1], 0))
        return r.mean(-2), r.mT @ (eps / n_draws), none, none

    def expected_glm_gradients(self, mu, scale, X, y):
        """:meth:`glm_gradients` as exact expectations over q instead of draws.

        Under q the logit ``z_i = x_i . theta`` is Gaussian with mean ``x_i . mu`` and
        variance ``sum_j x_ij^2 scale_j^2``, so ``E[y_i - sigmoid(z_i)]`` is a
        one-dimensional Gauss-Hermite quadrature per example, and by Stein's lemma
        ``E[(y_i - sigmoid(z_i)) eps_j] = -x_ij scale_j E[sigmoid'(z_i)]``. The
        released gradients then carry no Monte Carlo noise (DP noise and
        subsampling only).

        Parameters
        ----------
        mu, scale : torch.Tensor of shape (..., n_params)
        X : torch.Tensor of shape (..., B, n_params)
        y : torch.Tensor of shape (..., B)

        Returns
        -------
        r_mean, r_eps, extra_mean, extra_eps
            As :meth:`glm_gradients` with ``eps`` of unit weight (no extra blocks).
        """
        z, w = gauss_hermite(self.n_quadrature_nodes, X.dtype, X.device)
        mean = (X @ mu.unsqueeze(-1)).squeeze(-1)  # (..., B)
        sd = ((X * X) @ (scale * scale).unsqueeze(-1)).sqrt()  # (..., B, 1)
        prob = torch.sigmoid(mean.unsqueeze(-1) + sd * z)  # (..., B, K)
        e_prob = prob @ w
        e_slope = (prob * (1 - prob)) @ w
        none = X.new_empty((*X.shape[:-1], 0))
        return y - e_prob, -(e_slope.unsqueeze(-1) * scale.unsqueeze(-2)) * X, none, none

    def expected_prior_gradients(self, mu, scale):
        """``E_q[g]`` and ``E_q[g * eps]`` of :meth:`grad_log_prior_unconstrained`."""
        s2 = self.prior_scale**2
        return -mu / s2, -scale / s2
