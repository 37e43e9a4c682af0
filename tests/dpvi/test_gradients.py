"""Per-example gradients of the negative ELBO (skdpvi.dpvi.gradients)."""

import pytest
import torch

from skdpvi.dpvi import per_example_gradients
from skdpvi.dpvi.sampling import _centred_normal
from skdpvi.models import LinearRegressionModel, LogisticRegressionModel


def _full_loss(model, phi, eps, x, y, n_examples):
    """The per-example negative ELBO of one example, written out directly."""
    n = model.n_params
    mu, rho = phi[:n], phi[n:]
    scale = torch.nn.functional.softplus(rho)
    theta = mu + scale * eps
    ll = model.log_likelihood(theta[None], x[None], y[None])[0]
    log_q = torch.distributions.Normal(mu, scale).log_prob(theta).sum(-1)
    log_p = model.log_prior_unconstrained(theta)
    return -ll.mean() + (log_q - log_p).mean() / n_examples


@pytest.mark.parametrize("model", [LogisticRegressionModel(3), LinearRegressionModel(3)],
                         ids=["logistic", "linear"])
def test_per_example_gradients_equal_autograd_on_the_full_loss(model):
    torch.manual_seed(1)
    x = torch.randn(6, 3, dtype=torch.float64)
    y = (torch.randint(0, 2, (6,)) if isinstance(model, LogisticRegressionModel)
         else torch.randn(6)).double()
    data = model.prepare_data(x, y)
    phi = torch.randn(2 * model.n_params, dtype=torch.float64) * 0.3
    phi[model.n_params:] -= 2
    eps = torch.randn(10, model.n_params, dtype=torch.float64)
    fast = torch.cat(per_example_gradients(model, phi, eps, data, n_examples=50), 1)
    for i in range(6):
        p = phi.clone().requires_grad_(True)
        (slow,) = torch.autograd.grad(_full_loss(model, p, eps, data[0][i], data[1][i], 50), p)
        torch.testing.assert_close(fast[i], slow, rtol=1e-6, atol=1e-8)
    beta = torch.linspace(1, 3, 2 * model.n_params, dtype=torch.float64)
    scaled = torch.cat(per_example_gradients(model, phi, eps, data, 50, beta), 1)
    torch.testing.assert_close(scaled, fast * beta)


def test_centred_draws_remove_the_monte_carlo_noise_of_scale_gradients():
    """At fixed phi, the per-example rho gradients vary far less across steps."""
    model = LogisticRegressionModel(3)
    torch.manual_seed(0)
    X = torch.randn(50, 3)
    data = model.prepare_data(X, (X[:, 0] > 0).float())
    phi = torch.zeros(8, dtype=torch.float64)
    phi[4:] = -3.0  # scale 0.05
    gen = torch.Generator().manual_seed(1)
    def spread(draw):
        grads = torch.stack([per_example_gradients(model, phi, draw(), data, 50)[1]
                             for _ in range(200)])
        return grads.std(0).mean().item()
    plain = spread(lambda: torch.randn((10, 4), generator=gen, dtype=torch.float64))
    centred = spread(lambda: _centred_normal((10, 4), gen, "cpu"))
    assert centred < plain / 3
