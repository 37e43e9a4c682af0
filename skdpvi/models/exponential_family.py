"""The paper's three exponential-family models (Section 4.2), used in benchmarks.

Their data is a single column ``x`` and their parameters live in constrained spaces:
a positive rate, a probability and a point of the 3-simplex. The gradients of the
log-likelihood and of the log-prior (with its log-Jacobian) are in closed form,
tested against autograd; the generic autograd path costs about four times as much
per DP-SGD step.
"""

import math

import torch
import torch.nn.functional as F

from .base import Model, average_over_draws


class GammaExponentialModel(Model):
    """x ~ Exponential(rate), rate ~ Gamma(shape, prior_rate); rate = softplus(u).

    Parameters
    ----------
    prior_shape, prior_rate : float, default=2.0, 2.0
    """

    param_names = ("rate",)

    def __init__(self, prior_shape=2.0, prior_rate=2.0):
        self.prior_shape = float(prior_shape)
        self.prior_rate = float(prior_rate)

    def data_statistics(self, n_examples):
        from .exponential_family_statistics import GammaExponentialStatistics

        return GammaExponentialStatistics(self, n_examples)

    def log_likelihood(self, theta, x):
        rate = F.softplus(theta[..., 0])
        return torch.log(rate) - rate * x[:, None]

    def constrain(self, theta):
        return F.softplus(theta)

    def unconstrain(self, theta_constrained):
        t = torch.as_tensor(theta_constrained)
        return t + torch.log(-torch.expm1(-t))

    def log_abs_det_jacobian(self, theta):
        return F.logsigmoid(theta[..., 0])

    def log_prior(self, theta):
        a, b = self.prior_shape, self.prior_rate
        rate = theta[..., 0]
        return a * math.log(b) - math.lgamma(a) + (a - 1) * torch.log(rate) - b * rate

    def likelihood_gradients(self, theta, eps, x):
        rate = F.softplus(theta)  # (S, 1)
        grad = (1 / rate - x[:, None, None]) * torch.sigmoid(theta)  # (B, S, 1)
        return average_over_draws(grad, eps)

    def grad_log_prior_unconstrained(self, theta):
        rate = F.softplus(theta)
        return ((self.prior_shape - 1) / rate - self.prior_rate) * torch.sigmoid(theta) \
            + torch.sigmoid(-theta)


class BetaBernoulliModel(Model):
    """x ~ Bernoulli(p), p ~ Beta(a, b); p = sigmoid(u).

    Parameters
    ----------
    prior_a, prior_b : float, default=2.0, 2.0
    """

    param_names = ("p",)

    def __init__(self, prior_a=2.0, prior_b=2.0):
        self.prior_a = float(prior_a)
        self.prior_b = float(prior_b)

    def data_statistics(self, n_examples):
        from .exponential_family_statistics import BetaBernoulliStatistics

        return BetaBernoulliStatistics(self, n_examples)

    def log_likelihood(self, theta, x):
        z = theta[..., 0]
        return -F.softplus(-(2 * x[:, None] - 1) * z)

    def constrain(self, theta):
        return torch.sigmoid(theta)

    def unconstrain(self, theta_constrained):
        return torch.logit(torch.as_tensor(theta_constrained))

    def log_abs_det_jacobian(self, theta):
        z = theta[..., 0]
        return F.logsigmoid(z) + F.logsigmoid(-z)

    def log_prior(self, theta):
        a, b = self.prior_a, self.prior_b
        p = theta[..., 0]
        log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
        return log_norm + (a - 1) * torch.log(p) + (b - 1) * torch.log1p(-p)

    def likelihood_gradients(self, theta, eps, x):
        sign = (2 * x - 1)[:, None, None]
        grad = sign * torch.sigmoid(-sign * theta)  # (B, S, 1)
        return average_over_draws(grad, eps)

    def grad_log_prior_unconstrained(self, theta):
        # (a - 1) log p + (b - 1) log(1 - p) plus the log-Jacobian log p + log(1 - p)
        p = torch.sigmoid(theta)
        return self.prior_a * (1 - p) - self.prior_b * p


class DirichletCategoricalModel(Model):
    """x ~ Categorical(p), p ~ Dirichlet(alpha), p = softmax(u_1, u_2, 0).

    The paper writes the transform with a trailing 0, which is not a diffeomorphism
    onto R^3; the variational family is 2-dimensional (paper-spec section 7.2). The
    constrained parameter returned by :meth:`constrain` is the full probability
    vector (p_1, p_2, p_3); the prior density is over (p_1, p_2).

    Parameters
    ----------
    prior_alpha : sequence of 3 floats, default=(2.0, 2.0, 2.0)
    """

    param_names = ("logit[0]", "logit[1]")

    def __init__(self, prior_alpha=(2.0, 2.0, 2.0)):
        self.prior_alpha = tuple(float(a) for a in prior_alpha)

    @staticmethod
    def _log_probs(theta):
        full = torch.cat([theta, torch.zeros_like(theta[..., :1])], -1)
        return torch.log_softmax(full, -1)

    def data_statistics(self, n_examples):
        from .exponential_family_statistics import DirichletCategoricalStatistics

        return DirichletCategoricalStatistics(self, n_examples)

    def log_likelihood(self, theta, x):
        logp = self._log_probs(theta)  # (B or 1, S, 3)
        index = x.long()[:, None, None].expand(-1, logp.shape[1], 1)
        return torch.gather(logp.expand(x.shape[0], -1, -1), 2, index)[..., 0]

    def constrain(self, theta):
        return torch.exp(self._log_probs(theta))

    def unconstrain(self, theta_constrained):
        p = torch.as_tensor(theta_constrained)
        return torch.log(p[..., :2]) - torch.log(p[..., 2:3])

    def log_abs_det_jacobian(self, theta):
        return self._log_probs(theta).sum(-1)

    def log_prior(self, p):
        alpha = torch.tensor(self.prior_alpha, dtype=p.dtype)
        log_norm = math.lgamma(sum(self.prior_alpha)) - sum(math.lgamma(a) for a in self.prior_alpha)
        return log_norm + ((alpha - 1) * torch.log(p)).sum(-1)

    def likelihood_gradients(self, theta, eps, x):
        p = torch.exp(self._log_probs(theta))[:, :2]  # (S, 2)
        onehot = (x[:, None] == torch.arange(2, dtype=x.dtype, device=x.device)).to(p.dtype)
        grad = onehot[:, None, :] - p  # (B, S, 2)
        return average_over_draws(grad, eps)

    def grad_log_prior_unconstrained(self, theta):
        # sum_k (alpha_k - 1) log p_k plus the log-Jacobian sum_k log p_k
        p = torch.exp(self._log_probs(theta))[:, :2]
        alpha = torch.tensor(self.prior_alpha, dtype=theta.dtype, device=theta.device)
        return alpha[:2] - alpha.sum() * p
