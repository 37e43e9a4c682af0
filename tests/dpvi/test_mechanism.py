"""Clipping, noise and the factored GLM path (skdpvi.dpvi.mechanism)."""

import numpy as np
import pytest
import torch
from scipy import stats

from skdpvi.dpvi import (clip_and_sum, glm_clip_and_sum, heuristic_learning_rate,
                         per_example_gradients, privatize, release)
from skdpvi.models import LinearRegressionModel, LogisticRegressionModel


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


def _grouped_rows(model, seed=3, n=60):
    torch.manual_seed(seed)
    x = torch.randn(n, 3, dtype=torch.float64) * torch.logspace(-1, 1, n)[:, None]
    y = torch.randn(n, dtype=torch.float64) * 3
    data = model.prepare_data(x, y)
    phi = torch.randn(2 * model.n_params, dtype=torch.float64) * 0.3
    phi[model.n_params:] -= 2
    eps = torch.randn(10, model.n_params, dtype=torch.float64)
    beta = torch.linspace(1, 30, 2 * model.n_params, dtype=torch.float64)
    return data, phi, eps, beta


def test_group_clipping_glm_path_equals_dense_path_and_bounds_each_group():
    from skdpvi.dpvi import group_clip_norms

    model = LinearRegressionModel(3)
    data, phi, eps, beta = _grouped_rows(model)
    mu_rows, rho_rows = per_example_gradients(model, phi, eps, data, 500, beta)
    clip = float(torch.linalg.vector_norm(torch.cat([mu_rows, rho_rows], 1), dim=1).median())
    norms = group_clip_norms(clip, model.clip_shares)
    assert sum(c * c for c in norms) == pytest.approx(clip**2)
    p = model.n_weights
    dense_sum, dense_norms = clip_and_sum((mu_rows, rho_rows), clip, groups=(p, norms))
    row_sq = ((data[0] * beta[:p]) ** 2).sum(1)
    glm_sum, glm_norms = glm_clip_and_sum(model, phi, eps, data, 500, beta, clip, row_sq,
                                          group_norms=norms)
    torch.testing.assert_close(glm_sum, dense_sum, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(glm_norms, dense_norms, rtol=1e-9, atol=1e-9)
    # each group of each row clipped to its own norm; the whole row then to C
    groups = [mu_rows[:, :p], torch.cat([mu_rows[:, p:], rho_rows[:, p:]], 1), rho_rows[:, :p]]
    clipped = []
    for rows, c in zip(groups, norms):
        n = torch.linalg.vector_norm(rows, dim=1)
        assert (n > c).sum() >= 3  # every group's clipping is exercised
        clipped.append(rows * torch.clamp(c / n, max=1.0)[:, None])
    whole = torch.linalg.vector_norm(torch.cat(clipped, 1), dim=1)
    assert torch.all(whole <= clip * (1 + 1e-9))
    expected = torch.cat([clipped[0].sum(0), clipped[1][:, :1].sum(0), clipped[2].sum(0),
                          clipped[1][:, 1:].sum(0)])
    torch.testing.assert_close(dense_sum, expected, rtol=1e-9, atol=1e-9)
    # a row is reported clipped iff one of its groups was
    any_clipped = torch.stack([torch.linalg.vector_norm(r, dim=1) > c
                               for r, c in zip(groups, norms)]).any(0)
    assert torch.equal(dense_norms > clip, any_clipped)


def test_group_clip_norms_rejects_bad_shares():
    from skdpvi.dpvi import group_clip_norms

    with pytest.raises(ValueError, match="clip shares"):
        group_clip_norms(1.0, {"weights": 0, "extra": 0, "scales": 0})
    with pytest.raises(ValueError, match="clip shares"):
        group_clip_norms(1.0, {"weights": -1, "scales": 1})


def test_exact_expectations_glm_path_equals_dense_path_and_the_monte_carlo_limit():
    from skdpvi.dpvi import group_clip_norms

    model = LinearRegressionModel(3, exact_expectations=True)
    data, phi, eps, beta = _grouped_rows(model)
    mu_rows, rho_rows = per_example_gradients(model, phi, eps, data, 500, beta)
    # the draws are not used: any eps gives the same rows
    again = per_example_gradients(model, phi, 5 * eps, data, 500, beta)
    torch.testing.assert_close(torch.cat(again, 1), torch.cat([mu_rows, rho_rows], 1))
    clip = float(torch.linalg.vector_norm(torch.cat([mu_rows, rho_rows], 1), dim=1).median())
    norms = group_clip_norms(clip, model.clip_shares)
    p = model.n_weights
    dense_sum, dense_norms = clip_and_sum((mu_rows, rho_rows), clip, groups=(p, norms))
    row_sq = ((data[0] * beta[:p]) ** 2).sum(1)
    glm_sum, glm_norms = glm_clip_and_sum(model, phi, eps, data, 500, beta, clip, row_sq,
                                          group_norms=norms)
    assert (dense_norms > clip).sum() >= 10
    torch.testing.assert_close(glm_sum, dense_sum, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(glm_norms, dense_norms, rtol=1e-9, atol=1e-9)
    # the Monte Carlo rows of the same model average to the exact ones
    mc_model = LinearRegressionModel(3)
    gen = torch.Generator().manual_seed(0)
    many = torch.stack([torch.cat(per_example_gradients(
        mc_model, phi, torch.randn(1000, model.n_params, generator=gen, dtype=torch.float64),
        data, 500, beta), 1) for _ in range(100)])  # 100 x 1,000 draws
    mean, se = many.mean(0), many.std(0) / 10
    exact = torch.cat([mu_rows, rho_rows], 1)
    assert float(((exact - mean) / (se + 1e-12)).abs().max()) < 5


@pytest.mark.parametrize("model", [LinearRegressionModel(3), LogisticRegressionModel(4)],
                         ids=["linear", "logistic"])
@pytest.mark.parametrize("grouped", [False, True])
def test_lockstep_glm_clip_equals_each_run_alone(model, grouped):
    # the lockstep engine's layout: runs as a lead axis, X a strided slice of the
    # packed (X, y, |beta x|^2) gather, padding rows of weight 0; its products take
    # other orientations than a single run's (narrow blocks, one-column products)
    from skdpvi.dpvi import group_clip_norms
    from skdpvi.dpvi.mechanism import _GLMClip

    gen = torch.Generator().manual_seed(5)
    R, B, p, n = 3, 40, model.n_weights, model.n_params
    packed = torch.randn(R, B, p + 2, generator=gen)
    if isinstance(model, LogisticRegressionModel):
        packed[..., p] = (packed[..., p] > 0).float()
    beta = torch.linspace(1, 20, 2 * n)
    packed[..., p + 1] = ((packed[..., :p] * beta[:p]) ** 2).sum(-1)
    X, y, row_sq = packed[..., :p], packed[..., p], packed[..., p + 1]
    phi = 0.3 * torch.randn(R, 2 * n, generator=gen)
    phi[:, n:] -= 2
    eps = torch.randn(R, 10, n, generator=gen)
    weights = (torch.rand(R, B, generator=gen) > 0.2).float()
    clip = 3.0
    shares = getattr(model, "clip_shares", {"weights": 1.0, "scales": 0.5})
    groups = group_clip_norms(clip, shares) if grouped else None
    lockstep = _GLMClip(model, 500, beta, clip, batched=True, group_norms=groups)
    single = _GLMClip(model, 500, beta, clip, group_norms=groups)
    sums, norms = lockstep(phi, eps, X, y, row_sq, weights)
    for r in range(R):
        alone, alone_norms = single(phi[r], eps[r], X[r].contiguous(), y[r].contiguous(),
                                    row_sq[r].contiguous(), weights[r])
        torch.testing.assert_close(sums[r], alone, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(norms[r], alone_norms, rtol=1e-5, atol=1e-5)
    assert (norms * weights > clip).any()  # clipping is exercised


@pytest.mark.parametrize("call, name", [
    (lambda pe, pre: clip_and_sum(pe, float("inf")), "clip_norm"),
    (lambda pe, pre: clip_and_sum(pe, -1.0), "clip_norm"),
    (lambda pe, pre: clip_and_sum(pe, 1.0, weights=-torch.ones(10, dtype=torch.float64)),
     "weights"),
    (lambda pe, pre: privatize(pe, float("nan"), 1.0, pre), "clip_norm"),
    (lambda pe, pre: privatize(pe, 1.0, -1.0, pre), "noise_std"),
    (lambda pe, pre: privatize(pe, 1.0, 1.0, torch.zeros(4, dtype=torch.float64)),
     "preconditioner"),
    (lambda pe, pre: release(pe.sum(0), float("inf"), pre), "noise_std"),
])
def test_public_mechanism_pieces_reject_settings_that_would_break_the_guarantee(call, name):
    # the pieces are public (the privacy audit builds its mechanism from them): an
    # infinite or negative clip norm would release unclipped or sign-flipped sums, a
    # negative noise scale or a zero preconditioner a wrong or infinite release
    pe = torch.randn(10, 4, dtype=torch.float64)
    pre = torch.ones(4, dtype=torch.float64)
    with pytest.raises(ValueError, match=name):
        call(pe, pre)
    # zero noise (a non-private run) and zero weights (the padding rows) stay allowed
    privatize(pe, 1.0, 0.0, pre)
    clip_and_sum(pe, 1.0, weights=torch.zeros(10, dtype=torch.float64))


@pytest.mark.parametrize("bad, name", [
    (dict(noise_multiplier=0.0), "noise_multiplier"), (dict(clip_norm=-1.0), "clip_norm"),
    (dict(scale=float("nan")), "scale"), (dict(n_steps=0), "n_steps"), (dict(dim=2.5), "dim"),
])
def test_heuristic_learning_rate_names_a_bad_setting(bad, name):
    settings = dict(noise_multiplier=10.0, clip_norm=2.0, n_steps=10_000, dim=8, scale=2.0)
    assert heuristic_learning_rate(**settings) == pytest.approx(5e-4)
    with pytest.raises(ValueError, match=name):
        heuristic_learning_rate(**{**settings, **bad})
