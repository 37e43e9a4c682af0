import math

import numpy as np
import pytest
import torch
from scipy import stats

from skdpvi.dpvi import (
    TraceStatistics,
    _centred_normal,
    clip_and_sum,
    glm_clip_and_sum,
    per_example_gradients,
    poisson_subsample,
    poisson_subsamples,
    privatize,
    run_dpvi,
)
from skdpvi.models import LinearRegressionModel, LogisticRegressionModel, Model


class GaussianMeanModel(Model):
    """y ~ N(theta, 1), theta ~ N(0, 10^2): the gradient in mu is linear."""

    param_names = ("mean",)

    def log_likelihood(self, theta, y):
        return -0.5 * (y[:, None] - theta[..., 0]) ** 2 - 0.5 * math.log(2 * math.pi)

    def log_prior(self, theta):
        return -0.5 * (theta[..., 0] / 10) ** 2


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


@pytest.mark.parametrize("model", [LogisticRegressionModel(4), LinearRegressionModel(4)],
                         ids=["logistic", "linear"])
def test_factored_glm_clipping_equals_the_dense_path(model):
    torch.manual_seed(2)
    x = torch.randn(40, 4, dtype=torch.float64) * torch.logspace(-1, 1, 40)[:, None]
    y = (torch.randint(0, 2, (40,)) if isinstance(model, LogisticRegressionModel)
         else torch.randn(40) * 3).double()
    data = model.prepare_data(x, y)
    phi = torch.randn(2 * model.n_params, dtype=torch.float64) * 0.3
    phi[model.n_params:] -= 2
    eps = torch.randn(10, model.n_params, dtype=torch.float64)
    beta = torch.linspace(1, 30, 2 * model.n_params, dtype=torch.float64)
    dense_rows = per_example_gradients(model, phi, eps, data, 500, beta)
    clip = float(torch.linalg.vector_norm(torch.cat(dense_rows, 1), dim=1).median())
    dense_sum, dense_norms = clip_and_sum(dense_rows, clip)
    row_sq = ((data[0] * beta[: model.n_weights]) ** 2).sum(1)
    glm_sum, glm_norms = glm_clip_and_sum(model, phi, eps, data, 500, beta, clip, row_sq)
    assert (dense_norms > clip).sum() >= 15  # the clipping is exercised
    torch.testing.assert_close(glm_norms, dense_norms, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(glm_sum, dense_sum, rtol=1e-9, atol=1e-12)


def test_clipped_rows_have_norm_at_most_c_and_small_rows_pass_unchanged():
    gen = torch.Generator().manual_seed(0)
    rows = torch.randn(200, 7) * torch.logspace(-2, 2, 200)[:, None]
    beta = torch.ones(7, dtype=torch.float64)
    g_tilde, norms = privatize(rows, clip_norm=1.5, noise_std=0.0, preconditioner=beta,
                               generator=gen)
    factors = torch.clamp(1.5 / norms, max=1.0)
    clipped = rows * factors[:, None]
    assert torch.all(torch.linalg.vector_norm(clipped, dim=1) <= 1.5 + 1e-5)
    small = norms < 1.5
    torch.testing.assert_close(clipped[small], rows[small])
    torch.testing.assert_close(g_tilde, clipped.sum(0).double(), rtol=1e-5, atol=1e-5)
    # the sum of B clipped rows can never exceed B * C
    assert torch.linalg.vector_norm(g_tilde) <= 200 * 1.5


def test_noise_standard_deviation_is_sigma_c_over_beta():
    gen = torch.Generator().manual_seed(0)
    beta = torch.tensor([1.0, 1.0, 50.0], dtype=torch.float64)
    draws = torch.stack([
        privatize(torch.zeros(0, 3), 2.0, noise_std=3.0 * 2.0, preconditioner=beta,
                  generator=gen)[0]
        for _ in range(20_000)
    ])
    expected = 6.0 / beta
    np.testing.assert_allclose(draws.std(0).numpy(), expected.numpy(), rtol=0.03)
    np.testing.assert_allclose(draws.mean(0).numpy(), 0.0, atol=4 * 6.0 / np.sqrt(20_000))
    # Gaussian: KS test of the standardised first coordinate
    assert stats.kstest(draws[:, 0].numpy() / 6.0, "norm").pvalue > 1e-3


def test_batch_sizes_follow_binomial():
    gen = torch.Generator().manual_seed(0)
    n, q = 60, 0.05  # P(empty batch) = 0.95^60 = 4.6 %
    sizes = np.array([len(poisson_subsample(n, q, gen)) for _ in range(5000)])
    assert sizes.mean() == pytest.approx(n * q, rel=0.03)
    assert sizes.var() == pytest.approx(n * q * (1 - q), rel=0.1)
    assert (sizes == 0).any()  # empty batches happen and are allowed
    counts = np.bincount(sizes, minlength=20)[:20]
    expected = stats.binom.pmf(np.arange(20), n, q) * len(sizes)
    keep = expected > 5
    chi2 = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3
    # indices are distinct examples (sampling without replacement)
    idx = poisson_subsample(n, 0.5, gen)
    assert len(torch.unique(idx)) == len(idx)


@pytest.mark.parametrize("chunk", [None, 3], ids=["default", "tiny-chunks"])
def test_block_of_subsamples_includes_every_example_with_the_rate(chunk):
    # many steps drawn at once; tiny chunks force the rows to be continued
    gen = torch.Generator().manual_seed(1)
    n, q, steps = 40, 0.2, 4000
    batches = poisson_subsamples(n, q, steps, gen, chunk=chunk)
    assert len(batches) == steps
    member = torch.zeros(steps, n)
    for t, idx in enumerate(batches):
        assert torch.all(idx[1:] > idx[:-1]) and (len(idx) == 0 or (0 <= idx[0] and idx[-1] < n))
        member[t, idx] = 1
    # every example independently with rate q: marginal rates and no correlation
    np.testing.assert_allclose(member.mean(0).numpy(), q, atol=4 * np.sqrt(q * (1 - q) / steps))
    corr = np.corrcoef(member[:, :10].T.numpy())
    assert np.abs(corr[np.triu_indices(10, 1)]).max() < 0.08
    sizes = member.sum(1).numpy()
    assert sizes.var() == pytest.approx(n * q * (1 - q), rel=0.1)


def test_engine_handles_empty_batches_and_is_reproducible():
    rng = np.random.default_rng(0)
    y = rng.normal(0.5, 1.0, 20)
    kwargs = dict(noise_multiplier=1.0, clip_norm=5.0, sampling_rate=0.02, n_steps=300,
                  burn_in=100, learning_rate=1e-3, random_state=3, return_diagnostics=True)
    a = run_dpvi(GaussianMeanModel(), (y,), **kwargs)
    b = run_dpvi(GaussianMeanModel(), (y,), **kwargs)
    np.testing.assert_array_equal(a.phi, b.phi)
    np.testing.assert_array_equal(a.stats.sum_gx, b.stats.sum_gx)
    assert a.diagnostics["mean_batch_size"] == pytest.approx(0.4, abs=0.15)
    c = run_dpvi(GaussianMeanModel(), (y,), **{**kwargs, "random_state": 4})
    assert not np.array_equal(a.phi, c.phi)


def test_running_statistics_equal_statistics_of_the_recorded_trace():
    rng = np.random.default_rng(0)
    y = rng.normal(0.5, 1.0, 200)
    res = run_dpvi(GaussianMeanModel(), (y,), noise_multiplier=2.0, clip_norm=5.0,
                   sampling_rate=0.1, n_steps=500, burn_in=100, learning_rate=1e-3,
                   random_state=0, record_trace=True)
    ref = TraceStatistics.from_trace(res.trace_phi, res.trace_grad, 100)
    for name in ("sum_x", "sum_xx", "sum_g", "sum_gg", "sum_gx"):
        np.testing.assert_allclose(getattr(res.stats, name), getattr(ref, name),
                                   rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(res.trace_phi[-1], res.phi)


def test_stationary_variance_matches_the_linear_gaussian_formula():
    """paper-spec 5.5: Var = (lambda sigma C)^2 / (1 - (1 - lambda kappa a)^2)."""
    rng = np.random.default_rng(0)
    n_examples, kappa, clip, sigma = 1000, 0.1, 10.0, 20.0
    y = rng.normal(0.5, 1.0, n_examples)
    a = n_examples + 1 / 100  # curvature of the negative ELBO in mu
    lam = 0.05 / (kappa * a)
    res = run_dpvi(GaussianMeanModel(), (y,), noise_multiplier=sigma, clip_norm=clip,
                   sampling_rate=kappa, n_steps=10_000, burn_in=500, learning_rate=lam,
                   init_mean=[y.mean()], init_scale=0.03, random_state=0, record_trace=True)
    mu = res.trace_phi[500:, 0]
    expected = (lam * sigma * clip) ** 2 / (1 - (1 - lam * kappa * a) ** 2)
    assert mu.var() == pytest.approx(expected, rel=0.2)
    # and the trace is centred on the optimum (the posterior mean of mu)
    assert mu.mean() == pytest.approx(y.sum() / a, abs=4 * np.sqrt(expected / 250))


def test_centred_monte_carlo_draws_sum_to_zero_and_keep_unit_variance():
    gen = torch.Generator().manual_seed(0)
    eps = _centred_normal((20_000, 10, 3), gen, "cpu")
    torch.testing.assert_close(eps.sum(1), torch.zeros(20_000, 3, dtype=torch.float64),
                               atol=1e-12, rtol=0)
    assert eps.var().item() == pytest.approx(1.0, rel=0.01)  # each draw is N(0, 1)
    assert stats.kstest(eps[:, 0, 0].numpy(), "norm").pvalue > 1e-3


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


def test_engine_gives_the_same_run_on_the_glm_and_the_dense_path(monkeypatch):
    import skdpvi.dpvi as dpvi

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X @ [1.0, -2.0, 0.5] + rng.logistic(size=400) > 0).astype(float)
    kwargs = dict(noise_multiplier=2.0, clip_norm=1.0, sampling_rate=0.2, n_steps=60,
                  burn_in=20, learning_rate=1e-3, preconditioner=30.0, random_state=1,
                  return_diagnostics=True)
    runs = {}
    for name, threshold in (("glm", 0), ("dense", float("inf"))):
        monkeypatch.setattr(dpvi, "_GLM_PATH_MIN_BLOCK", threshold)
        runs[name] = run_dpvi(LogisticRegressionModel(3), (X, y), **kwargs)
    assert runs["glm"].diagnostics["clipped_fraction"] > 0.1  # clipping is exercised
    np.testing.assert_allclose(runs["glm"].phi, runs["dense"].phi, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(runs["glm"].stats.sum_gx, runs["dense"].stats.sum_gx,
                               rtol=1e-3, atol=1e-3)
