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


def _mc_limit(values):
    """Mean over draws (axis 0) and its standard error."""
    return values.mean(0), values.std(0) / np.sqrt(values.shape[0])


def _check_glm_expectations(model, mu, scale, X, y, theta, eps, draws):
    """The model's exact expectations (GLM part and prior) within 5 standard errors of
    the per-draw values ``draws`` (and the prior's at ``theta``); the errors small."""
    exact = dict(zip(draws, model.expected_glm_gradients(mu, scale, X, y)))
    prior = model.grad_log_prior_unconstrained(theta)
    draws = {**draws, "prior": prior, "prior_eps": prior * eps}
    exact["prior"], exact["prior_eps"] = model.expected_prior_gradients(mu, scale)
    for name, values in draws.items():
        mean, se = _mc_limit(values)
        assert exact[name].shape == mean.shape, name
        assert float(((exact[name] - mean) / se).abs().max()) < 5, name
        assert float((se / (mean.abs() + se)).median()) < 0.05, name


def test_linear_exact_expectations_are_the_monte_carlo_limit():
    # what the engine's draws estimate, without their Monte Carlo noise: every
    # coordinate of the per-example and prior expectations within 5 standard errors
    # of 200,000 draws (and the errors small, so the check has teeth)
    torch.manual_seed(0)
    model = LinearRegressionModel(3, exact_expectations=True)
    n, p = model.n_params, model.n_weights
    mu = torch.tensor([0.4, -0.3, 0.8, 0.1, -1.0], dtype=torch.float64)
    scale = torch.tensor([0.3, 0.1, 0.2, 0.15, 0.4], dtype=torch.float64)
    X, y = model.prepare_data(torch.randn(6, 3, dtype=torch.float64),
                              torch.randn(6, dtype=torch.float64))
    eps = torch.randn(200_000, n, dtype=torch.float64)
    theta = mu + scale * eps
    inv = 1 / torch.nn.functional.softplus(theta[:, -1:])
    resid = y - theta[:, :p] @ X.T  # (S, B)
    dll_du = (0.5 * resid**2 * inv - 0.5) * inv * torch.sigmoid(theta[:, -1:])
    draws = {
        "r_mean": inv * resid,
        "r_eps": (inv * resid)[:, :, None] * eps[:, None, :p],
        "extra_mean": dll_du[:, :, None],
        "extra_eps": (dll_du * eps[:, -1:])[:, :, None],
    }
    _check_glm_expectations(model, mu, scale, X, y, theta, eps, draws)
    # and the model's Monte Carlo path agrees with the draws above
    mc = model.glm_gradients(theta, eps, X, y)
    torch.testing.assert_close(mc[0], draws["r_mean"].mean(0))


def test_logistic_exact_expectations_are_the_monte_carlo_limit():
    torch.manual_seed(1)
    model = LogisticRegressionModel(3, exact_expectations=True)
    mu = torch.tensor([0.4, -0.3, 0.8, 0.1], dtype=torch.float64)
    scale = torch.tensor([0.3, 0.5, 0.2, 0.4], dtype=torch.float64)
    X, y = model.prepare_data(torch.randn(6, 3, dtype=torch.float64) * 2,
                              torch.randint(0, 2, (6,)).double())
    eps = torch.randn(200_000, model.n_params, dtype=torch.float64)
    theta = mu + scale * eps
    r = y - torch.sigmoid(theta @ X.T)  # (S, B)
    draws = {"r_mean": r, "r_eps": r[:, :, None] * eps[:, None, :]}
    _check_glm_expectations(model, mu, scale, X, y, theta, eps, draws)


@pytest.mark.parametrize("model", [GammaExponentialModel(), BetaBernoulliModel(),
                                   DirichletCategoricalModel()],
                         ids=["gamma", "beta", "dirichlet"])
def test_generic_exact_expectations_are_the_monte_carlo_limit(model):
    # tensor-product Gauss-Hermite through the model's own likelihood_gradients
    torch.manual_seed(2)
    n = model.n_params
    mu = torch.linspace(-0.5, 0.7, n, dtype=torch.float64)
    scale = torch.linspace(0.2, 0.5, n, dtype=torch.float64)
    if isinstance(model, GammaExponentialModel):
        x = torch.rand(5, dtype=torch.float64) * 3
    elif isinstance(model, BetaBernoulliModel):
        x = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    else:
        x = torch.tensor([0.0, 1.0, 2.0, 2.0, 1.0], dtype=torch.float64)
    exact_mean, exact_eps = model.expected_likelihood_gradients(mu, scale, x)
    assert exact_mean.shape == exact_eps.shape == (5, n)
    # 20 independent Monte Carlo estimates of 10,000 draws each: their spread is the
    # standard error
    chunks = []
    for _ in range(20):
        eps = torch.randn(10_000, n, dtype=torch.float64)
        theta = mu + scale * eps
        prior = model.grad_log_prior_unconstrained(theta)
        chunks.append(torch.stack([*model.likelihood_gradients(theta, eps, x),
                                   prior.mean(0).expand(5, n),
                                   (prior * eps).mean(0).expand(5, n)]))
    mean, se = _mc_limit(torch.stack(chunks))
    exact = torch.stack([exact_mean, exact_eps,
                         *(e.expand(5, n) for e in model.expected_prior_gradients(mu, scale))])
    assert float(((exact - mean) / se).abs().max()) < 5


def test_generic_exact_expectations_refuse_large_models():
    class Big(GammaExponentialModel):
        param_names = ("a", "b", "c", "d")

    with pytest.raises(NotImplementedError, match="closed form"):
        Big().expected_prior_gradients(torch.zeros(4), torch.ones(4))
