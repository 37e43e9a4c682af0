"""The interface every probabilistic model of skdpvi implements.

A model knows its parameters and their transforms, its per-example log-likelihood
and its log-prior; nothing about privacy, optimisation or scikit-learn. The DPVI
engine works on the *unconstrained* parameter ``theta`` (shape ``(..., n_params)``);
the model maps it to the constrained space where needed.
"""

import functools

import torch
from numpy.polynomial.hermite_e import hermegauss


class Model:
    """Base class of the probabilistic models.

    Subclasses set ``param_names`` and implement :meth:`log_likelihood`,
    :meth:`log_prior` and, if some parameters are constrained, :meth:`constrain`,
    :meth:`unconstrain` and :meth:`log_abs_det_jacobian`.

    Data are passed as a tuple of tensors whose first axis indexes examples, e.g.
    ``(X, y)`` for regression or ``(x,)`` for the exponential-family models.
    """

    param_names = ()

    #: Whether the engine takes exact expectations over q (:meth:`expected_likelihood_gradients`,
    #: :meth:`expected_prior_gradients`) instead of Monte Carlo averages over its draws.
    exact_expectations = False
    #: Gauss-Hermite nodes per parameter of the generic exact expectations.
    n_quadrature_nodes = 16
    #: The generic exact expectations' tensor grid grows like nodes^n_params.
    MAX_QUADRATURE_PARAMS = 3

    @property
    def n_params(self):
        """Dimension of the (unconstrained) parameter theta."""
        return len(self.param_names)

    def init_mean(self):
        """Public starting point of the variational mean (unconstrained); zeros."""
        return torch.zeros(self.n_params).numpy()

    def data_statistics(self, n_examples):
        """The expected gradient in statistics of the data (:mod:`skdpvi.models.statistics`).

        Returns a :class:`~skdpvi.models.statistics.DataStatistics` for a data set of
        ``n_examples`` rows, or None if the model does not define one (then only the
        paper's gradient-model backends apply).
        """
        return None

    def prepare_data(self, *data):
        """Turn user data into the tensors the likelihood works on (once per fit).

        The regression models append a column of ones for the intercept here, so
        the hot loop never copies the design matrix.
        """
        return data

    def log_likelihood(self, theta, *data):
        """Per-example log-likelihood of prepared data.

        Parameters
        ----------
        theta : torch.Tensor of shape (B or 1, S, n_params)
            Unconstrained parameter draws; the first axis broadcasts over examples.
        *data : torch.Tensor
            Tensors of first dimension B.

        Returns
        -------
        torch.Tensor of shape (B, S)
        """
        raise NotImplementedError

    def log_prior(self, theta_constrained):
        """Log prior density in the constrained space, shape ``theta.shape[:-1]``."""
        raise NotImplementedError

    def constrain(self, theta):
        """Map unconstrained theta to the model's parameter space (identity here)."""
        return theta

    def unconstrain(self, theta_constrained):
        """Inverse of :meth:`constrain`."""
        return theta_constrained

    def log_abs_det_jacobian(self, theta):
        """``log |det d constrain(theta) / d theta|``, shape ``theta.shape[:-1]``."""
        return torch.zeros(theta.shape[:-1], dtype=theta.dtype, device=theta.device)

    def log_prior_unconstrained(self, theta):
        """Log density of the prior pushed to the unconstrained space."""
        return self.log_prior(self.constrain(theta)) + self.log_abs_det_jacobian(theta)

    def grad_log_prior_unconstrained(self, theta):
        """Gradient of :meth:`log_prior_unconstrained` at each row of theta (S, n).

        Autograd here (``torch.func``, so that it also runs under ``vmap``); the
        regression models override it with the closed form.
        """
        return torch.func.grad(lambda t: self.log_prior_unconstrained(t).sum())(theta)

    def likelihood_gradients(self, theta, eps, *data):
        """Monte Carlo averages of per-example log-likelihood gradients.

        With ``theta[s] = mu + scale * eps[s]``, returns

        - ``mean_s grad_theta log p(x_i | theta_s)`` and
        - ``mean_s grad_theta log p(x_i | theta_s) * eps_s``,

        both of shape (B, n_params): everything the engine needs for the per-example
        gradients with respect to the variational mean and scale. This generic
        version uses autograd on a per-example copy of theta; models with a closed
        form override it (and are tested against this one). It uses ``torch.func``
        rather than ``torch.autograd``, so it also runs under ``vmap`` (the batched
        engine).

        Parameters
        ----------
        theta : torch.Tensor of shape (S, n_params)
        eps : torch.Tensor of shape (S, n_params)
        *data : torch.Tensor

        Returns
        -------
        grad_mean, grad_eps : torch.Tensor of shape (B, n_params)
        """
        batch = data[0].shape[0]
        theta_b = theta.unsqueeze(0).expand(batch, *theta.shape).clone()
        grad = torch.func.grad(lambda t: self.log_likelihood(t, *data).sum())(theta_b)
        return average_over_draws(grad, eps)

    def _quadrature_grid(self, like):
        """Tensor-product Gauss-Hermite nodes z (M, n) and weights (M,) for N(0, I_n)."""
        n = self.n_params
        if n > self.MAX_QUADRATURE_PARAMS:
            raise NotImplementedError(
                f"{type(self).__name__} has {n} parameters: exact expectations need a "
                f"closed form above {self.MAX_QUADRATURE_PARAMS} (use Monte Carlo gradients).")
        z, w = gauss_hermite(self.n_quadrature_nodes, like.dtype, like.device)
        grids = torch.meshgrid(*([z] * n), indexing="ij")
        weights = torch.meshgrid(*([w] * n), indexing="ij")
        return (torch.stack([g.reshape(-1) for g in grids], -1),
                torch.stack([g.reshape(-1) for g in weights], -1).prod(-1))

    def expected_likelihood_gradients(self, mu, scale, *data):
        """:meth:`likelihood_gradients`'s two outputs as exact expectations over q.

        ``E[grad log p(x_i | theta)]`` and ``E[grad log p(x_i | theta) * eps]`` with
        theta = mu + scale * eps, eps ~ N(0, I), by tensor-product Gauss-Hermite
        quadrature (models with at most ``MAX_QUADRATURE_PARAMS`` parameters; the
        regression models override it with closed forms). Uses only
        :meth:`likelihood_gradients`, whose second output is linear in ``eps``:
        weighted "draws" give the weighted sums.

        Parameters
        ----------
        mu, scale : torch.Tensor of shape (n_params,)
        *data : torch.Tensor

        Returns
        -------
        grad_mean, grad_eps : torch.Tensor of shape (B, n_params)
        """
        z, w = self._quadrature_grid(mu)
        theta = mu + scale * z
        m = w.shape[0] * w
        _, mean = self.likelihood_gradients(theta, m[:, None].expand_as(z), *data)
        _, with_eps = self.likelihood_gradients(theta, z * m[:, None], *data)
        return mean, with_eps

    def expected_prior_gradients(self, mu, scale):
        """``E_q[g]`` and ``E_q[g * eps]`` of :meth:`grad_log_prior_unconstrained` g.

        Gauss-Hermite quadrature as :meth:`expected_likelihood_gradients`.
        """
        z, w = self._quadrature_grid(mu)
        g = self.grad_log_prior_unconstrained(mu + scale * z)  # (M, n)
        return w @ g, (w[:, None] * z * g).sum(0)


class GLMModel(Model):
    """A model whose first ``n_weights`` parameters enter only through ``x_i @ w``.

    For such a model, the likelihood gradient of example i with respect to the
    weights is a scalar residual times the covariate row, ``r_i x_i``, so the
    engine can compute per-example gradient norms and clipped sums without
    materialising the (B, n) mean-gradient block (see :func:`skdpvi.dpvi.glm_clip_and_sum`).
    The remaining ``n_params - n_weights`` parameters (e.g. a noise variance) are
    handled densely. ``prepare_data`` must return ``(X, y)`` with ``X`` of shape
    (B, n_weights).
    """

    n_weights = 0

    def glm_gradients(self, theta, eps, X, y):
        """Factored Monte Carlo averages of the likelihood gradients.

        Parameters
        ----------
        theta, eps : torch.Tensor of shape (S, n_params)
        X : torch.Tensor of shape (B, n_weights)
        y : torch.Tensor of shape (B,)

        Returns
        -------
        r_mean : torch.Tensor of shape (B,)
            ``mean_s r_is``: the weights block of ``grad_mean`` is ``r_mean[:, None] * X``.
        r_eps : torch.Tensor of shape (B, n_weights)
            ``mean_s r_is eps_s[:n_weights]``: the weights block of ``grad_eps`` is
            ``r_eps * X``.
        extra_mean, extra_eps : torch.Tensor of shape (B, n_params - n_weights)
            The other parameters' blocks of ``grad_mean`` and ``grad_eps``.
        """
        raise NotImplementedError

    def likelihood_gradients(self, theta, eps, X, y):
        r_mean, r_eps, extra_mean, extra_eps = self.glm_gradients(theta, eps, X, y)
        return (torch.cat([r_mean[:, None] * X, extra_mean], 1),
                torch.cat([r_eps * X, extra_eps], 1))

    def expected_glm_gradients(self, mu, scale, X, y):
        """:meth:`glm_gradients` as exact expectations over q (``eps`` of unit weight).

        Parameters
        ----------
        mu, scale : torch.Tensor of shape (..., n_params)
        X : torch.Tensor of shape (..., B, n_weights)
        y : torch.Tensor of shape (..., B)
        """
        raise NotImplementedError

    def expected_likelihood_gradients(self, mu, scale, X, y):
        r_mean, r_eps, extra_mean, extra_eps = self.expected_glm_gradients(mu, scale, X, y)
        return (torch.cat([r_mean.unsqueeze(-1) * X, extra_mean], -1),
                torch.cat([r_eps * X, extra_eps], -1))


@functools.lru_cache(maxsize=16)
def gauss_hermite(n_nodes, dtype, device):
    """Gauss-Hermite nodes and normalised weights for N(0, 1), as tensors."""
    nodes, weights = hermegauss(n_nodes)
    return (torch.as_tensor(nodes, dtype=dtype, device=device),
            torch.as_tensor(weights / weights.sum(), dtype=dtype, device=device))


def average_over_draws(grad, eps):
    """``(mean_s grad[:, s], mean_s grad[:, s] * eps[s])`` of per-draw gradients (B, S, n)."""
    return grad.mean(1), torch.einsum("bsn,sn->bn", grad, eps) / grad.shape[1]


def softplus_inverse(x):
    """Inverse of softplus, stable for large and small x (torch or float)."""
    x = torch.as_tensor(x, dtype=torch.get_default_dtype())
    return x + torch.log(-torch.expm1(-x))
