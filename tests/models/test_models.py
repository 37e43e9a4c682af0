import numpy as np
import pytest
import torch

from skdpvi.models import (
    BetaBernoulliModel,
    DirichletCategoricalModel,
    GammaExponentialModel,
    LinearRegressionModel,
    LogisticRegressionModel,
    Model,
)


def _data(model, rng, n=9):
    if isinstance(model, LogisticRegressionModel):
        return torch.randn(n, model.n_features), torch.randint(0, 2, (n,)).float()
    if isinstance(model, LinearRegressionModel):
        return torch.randn(n, model.n_features), torch.randn(n)
    if isinstance(model, GammaExponentialModel):
        return (torch.rand(n) * 3,)
    if isinstance(model, BetaBernoulliModel):
        return (torch.randint(0, 2, (n,)).float(),)
    return (torch.randint(0, 3, (n,)).float(),)


MODELS = [
    LogisticRegressionModel(3),
    LogisticRegressionModel(3, prior_scale=2.0, fit_intercept=False),
    LinearRegressionModel(3),
    LinearRegressionModel(2, fit_intercept=False),
    GammaExponentialModel(),
    BetaBernoulliModel(),
    DirichletCategoricalModel(),
]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: type(m).__name__)
def test_closed_form_gradients_match_autograd(model):
    torch.manual_seed(0)
    data = model.prepare_data(*_data(model, None))
    theta = torch.randn(5, model.n_params) * 0.5
    eps = torch.randn(5, model.n_params)
    fast = model.likelihood_gradients(theta, eps, *data)
    slow = Model.likelihood_gradients(model, theta, eps, *data)
    for a, b in zip(fast, slow):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(
        model.grad_log_prior_unconstrained(theta),
        Model.grad_log_prior_unconstrained(model, theta), rtol=1e-4, atol=1e-5,
    )


@pytest.mark.parametrize("model", MODELS, ids=lambda m: type(m).__name__)
def test_transforms_round_trip(model):
    theta = torch.randn(4, model.n_params, dtype=torch.float64)
    torch.testing.assert_close(model.unconstrain(model.constrain(theta)), theta)


def test_log_jacobian_matches_numerical_derivative():
    model = LinearRegressionModel(1)
    u = torch.tensor([[0.0, 0.0, -1.3]], dtype=torch.float64)
    h = 1e-6
    up = model.constrain(u + torch.tensor([0, 0, h]))[0, -1]
    down = model.constrain(u - torch.tensor([0, 0, h]))[0, -1]
    numeric = torch.log((up - down) / (2 * h))
    torch.testing.assert_close(model.log_abs_det_jacobian(u)[0], numeric)


def test_nig_prior_density_integrates_to_one_in_sigma2():
    from scipy.integrate import quad

    model = LinearRegressionModel(0, fit_intercept=False)  # only sigma^2
    f = lambda s: float(torch.exp(model.log_prior(torch.tensor([[s]], dtype=torch.float64))))
    total, _ = quad(f, 1e-6, 1.0, points=[0.02, 0.03])
    assert total == pytest.approx(1.0, rel=1e-4)


def test_logistic_prior_is_standard_normal_by_default():
    model = LogisticRegressionModel(1, fit_intercept=False)
    value = model.log_prior(torch.tensor([[0.0]], dtype=torch.float64))
    assert float(value) == pytest.approx(-0.5 * np.log(2 * np.pi))


def test_param_names():
    assert LinearRegressionModel(2).param_names == (
        "coef[0]", "coef[1]", "intercept", "noise_variance")
    assert LogisticRegressionModel(2, fit_intercept=False).param_names == ("coef[0]", "coef[1]")
