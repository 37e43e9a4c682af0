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


def test_wander_offset_equals_the_second_order_effect_of_gaussian_wander():
    """b_u = kappa (E_delta G_u(mu* + delta) - G_u(mu*)) with Var_j from the AR(1) formula."""
    model = LinearRegressionModel(3)
    rng = np.random.default_rng(0)
    n, kappa, var = 4000, 0.1, 0.05
    X = rng.normal(size=(n, 3)) * [1.0, 2.0, 0.5]
    w = np.array([0.3, -0.2, 0.1, 0.05])
    Xa = np.column_stack([X, np.ones(n)])
    y = Xa @ w + rng.normal(0, np.sqrt(var), n)
    u = float(np.log(np.expm1(var)))
    lr = np.full(10, 2e-6)
    tau = np.full(10, 300.0)
    phi = np.r_[w, u, np.full(5, -6.0)]
    offset = model.wander_gradient_offset(phi, lr, tau)
    assert np.count_nonzero(offset) == 1 and offset[4] < 0
    # independent check: Monte Carlo over the wander with the model's own gradients
    a = (Xa**2).sum(0) / var  # curvature of the negative ELBO in each coefficient mean
    wander_sd = np.sqrt(lr[:4] * tau[:4] ** 2 / (2 * kappa * a))
    delta = rng.normal(size=(20_000, 4)) * wander_sd
    delta -= delta.mean(0)  # exact first moment: only the second-order term remains
    theta = torch.tensor(np.column_stack([w + delta, np.full(len(delta), u)]))
    data = (torch.tensor(Xa), torch.tensor(y))
    at = torch.tensor(np.r_[w, u])[None]
    zeros = torch.zeros_like(theta)
    g_wander = -model.glm_gradients(theta, zeros, *data)[2].sum().item()
    g_optimum = -model.glm_gradients(at, zeros[:1], *data)[2].sum().item()
    assert kappa * (g_wander - g_optimum) == pytest.approx(offset[4], rel=0.05)


def test_wander_variance_factor_maps_the_fixed_point_to_the_optimum():
    """Iterate var <- mean residual^2 under the wander that var implies; times the factor,
    the fixed point is the residual variance at the optimum."""
    model = LinearRegressionModel(3)
    rng = np.random.default_rng(1)
    n, kappa = 3000, 0.1
    Xa = np.column_stack([rng.normal(size=(n, 3)) * [1.0, 2.0, 0.5], np.ones(n)])
    y = Xa @ [0.3, -0.2, 0.1, 0.05] + rng.normal(0, 0.2, n)
    w = np.linalg.lstsq(Xa, y, rcond=None)[0]
    var_opt = np.mean((y - Xa @ w) ** 2)
    lr, tau = np.full(10, 3e-4), np.full(10, 400.0)
    factor = model.wander_variance_factor(lr, tau, kappa, n)
    assert 0.5 < factor < 0.95  # a sizeable effect
    var = var_opt
    for _ in range(100):
        wander = lr[:4] * tau[:4] ** 2 / (2 * kappa * (Xa**2).sum(0) / var)  # Var_j at var
        var = var_opt + np.sum((Xa**2).mean(0) * wander)  # E over the wander of r^2
    assert var * factor == pytest.approx(var_opt, rel=1e-6)


def test_scale_noise_variance_changes_only_sigma2():
    model = LinearRegressionModel(2)
    phi = np.random.default_rng(0).normal(size=(5, 8))
    scaled = model.scale_noise_variance(phi, 0.8)
    np.testing.assert_array_equal(np.delete(scaled, 3, axis=1), np.delete(phi, 3, axis=1))
    np.testing.assert_allclose(np.logaddexp(0, scaled[:, 3]), 0.8 * np.logaddexp(0, phi[:, 3]))
