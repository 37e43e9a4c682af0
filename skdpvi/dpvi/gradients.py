"""Per-example gradients of the negative ELBO with respect to phi = (mu, rho).

The variational distribution is q(theta) = N(mu, diag(softplus(rho)^2)): softplus(rho)
is the *standard deviation*. The paper's text says variance, but its authors' code uses
the standard deviation, and so do common DPVI libraries; with the variance the scale
gradients are smaller still and need more preconditioning.
"""

import torch
import torch.nn.functional as F

__all__ = ["per_example_gradients"]


def _regulariser_gradient(model, theta, eps, rho, n_examples):
    """Gradient w.r.t. (mu, rho) of (1/N) mean_s [log q(theta_s) - log prior~(theta_s)].

    This part of every per-example loss does not depend on the example; prior~
    includes the log-Jacobian of the constraining transform. At its own
    reparameterised draws, log q = -sum(log scale) - |eps|^2 / 2 + const, whose
    gradient is -dscale/scale in rho and 0 in mu.
    """
    return _regulariser(model.grad_log_prior_unconstrained(theta), eps, rho,
                        F.softplus(rho), n_examples)


def _regulariser(grad_prior, eps, rho, scale, n_examples):
    """:func:`_regulariser_gradient` from the prior gradients (..., S, n) at theta.

    Any lead axes (runs of the lockstep engine) are kept; ``scale = softplus(rho)``.
    """
    dscale = torch.sigmoid(rho)
    g_mu = -grad_prior.mean(-2)
    g_rho = -dscale / scale - (grad_prior * eps).mean(-2) * dscale
    return torch.cat([g_mu, g_rho], -1) / n_examples


def _expected_regulariser(model, mu, rho, scale, n_examples):
    """:func:`_regulariser_gradient` as an exact expectation over q (the models with
    ``exact_expectations``): the entropy term is exact already."""
    mean, with_eps = model.expected_prior_gradients(mu, scale)
    dscale = torch.sigmoid(rho)
    return torch.cat([-mean, -dscale / scale - with_eps * dscale], -1) / n_examples


def uses_exact_expectations(model):
    """Whether the engine takes ``model``'s exact expectations over q, not draws."""
    return bool(getattr(model, "exact_expectations", False))


def per_example_gradients(model, phi, eps, batch, n_examples, preconditioner=None):
    """Gradients of the per-example negative ELBO with respect to phi = (mu, rho).

    The loss of example i is the negative of the paper's A56/A57 (with the
    log-Jacobian in log form)::

        l_i = -mean_s log p(x_i | theta_s) + (1/N) mean_s [log q(theta_s) - log p~(theta_s)]

    with theta_s = mu + softplus(rho) * eps_s shared by the batch.

    Parameters
    ----------
    model : Model
    phi : torch.Tensor of shape (2 n,), float64
    eps : torch.Tensor of shape (S, n), float64
    batch : tuple of prepared data tensors (first axis B)
    n_examples : int
        N, the size of the data set.
    preconditioner : torch.Tensor of shape (2 n,), optional
        beta; when given, the gradients come out multiplied by it (fused, cheaper
        than a separate pass over the batch).

    Returns
    -------
    grad_mu, grad_rho : torch.Tensor of shape (B, n)
        The two halves of the (preconditioned) per-example gradient.
    """
    n = model.n_params
    real = batch[0].dtype
    mu, rho = phi[:n], phi[n:]
    rho_r = rho.to(real)
    if uses_exact_expectations(model):
        mu_r, scale_r = mu.to(real), F.softplus(rho_r)
        grad_mean, grad_eps = model.expected_likelihood_gradients(mu_r, scale_r, *batch)
        reg = _expected_regulariser(model, mu_r, rho_r, scale_r, n_examples)
    else:
        theta = (mu + F.softplus(rho) * eps).to(real)
        eps_r = eps.to(real)
        grad_mean, grad_eps = model.likelihood_gradients(theta, eps_r, *batch)
        reg = _regulariser_gradient(model, theta, eps_r, rho_r, n_examples)
    beta = torch.ones(2 * n, dtype=real, device=reg.device) if preconditioner is None \
        else preconditioner.to(real)
    beta_mu, beta_rho = beta[:n], beta[n:]
    dscale = torch.sigmoid(rho_r)
    grad_mu = torch.addcmul(reg[:n] * beta_mu, grad_mean, -beta_mu)
    grad_rho = torch.addcmul(reg[n:] * beta_rho, grad_eps, -dscale * beta_rho)
    return grad_mu, grad_rho
