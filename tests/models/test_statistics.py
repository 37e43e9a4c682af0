"""The expected DP-SGD gradient written in data statistics (skdpvi.models.*statistics)."""

import numpy as np
import pytest
import torch

from skdpvi.dpvi import per_example_gradients
from skdpvi.dpvi.sampling import _centred_normal
from skdpvi.models import (BetaBernoulliModel, DirichletCategoricalModel,
                           GammaExponentialModel, LinearRegressionModel,
                           LogisticRegressionModel)
from skdpvi.models.statistics import DataStatistics

N = 200


def _case(name):
    rng = np.random.default_rng(1)
    if name == "linear":
        model = LinearRegressionModel(2)
        X = rng.normal(size=(N, 2)) @ np.array([[1.0, 0.6], [0.0, 0.8]])
        y = X @ [0.5, -0.3] + 0.2 + rng.normal(0, 0.3, N)
        Xp = np.c_[X, np.ones(N)]
        st = model.data_statistics(N)
        eta = np.r_[(Xp.T @ Xp)[st.rows, st.cols], Xp.T @ y, y @ y]
        phi = np.r_[0.4, -0.2, 0.1, -2.0, np.log(np.expm1([0.05, 0.04, 0.06, 0.2]))]
        return model, (X, y), eta, phi
    if name == "gamma_exponential":
        model = GammaExponentialModel()
        x = rng.exponential(1 / 1.3, N)
        return model, (x,), np.array([x.sum()]), np.array([0.6, np.log(np.expm1(0.1))])
    if name == "beta_bernoulli":
        model = BetaBernoulliModel()
        x = (rng.random(N) < 0.3).astype(float)
        return model, (x,), np.array([x.sum()]), np.array([-0.7, np.log(np.expm1(0.15))])
    model = DirichletCategoricalModel()
    x = rng.choice(3, N, p=[0.5, 0.2, 0.3]).astype(float)
    eta = np.array([(x == 0).sum(), (x == 1).sum()], float)
    return model, (x,), eta, np.array([0.4, -0.3, np.log(np.expm1(0.1)), np.log(np.expm1(0.2))])


@pytest.mark.parametrize("name", ["linear", "gamma_exponential", "beta_bernoulli",
                                  "dirichlet_categorical"])
def test_expected_gradient_is_exactly_linear_in_the_statistics(name):
    """sum_i E[grad l_i(phi)] (the engine's own per-example gradients, averaged over many
    Monte Carlo draws) equals J(phi) eta + r(phi) with eta the data's statistics."""
    model, data, eta, phi = _case(name)
    J, r = model.data_statistics(N).design(phi[None])
    predicted = J[0] @ eta + r[0]
    tensors = model.prepare_data(*(torch.tensor(a, dtype=torch.float64) for a in data))
    gen = torch.Generator().manual_seed(0)
    totals = []
    for _ in range(30):
        eps = _centred_normal((2000, model.n_params), gen, "cpu")
        grad_mu, grad_rho = per_example_gradients(model, torch.tensor(phi), eps, tensors, N)
        totals.append(torch.cat([grad_mu.sum(0), grad_rho.sum(0)]).numpy())
    totals = np.array(totals)
    se = totals.std(0) / np.sqrt(len(totals))
    assert np.all(np.abs(totals.mean(0) - predicted) <= 5 * se + 1e-6 * np.abs(predicted))


@pytest.mark.parametrize("model", [LinearRegressionModel(3), LogisticRegressionModel(3),
                                   LogisticRegressionModel(2, fit_intercept=False)],
                         ids=["linear", "logistic", "logistic_no_intercept"])
def test_structured_normal_equations_equal_the_generic_ones(model):
    st = model.data_statistics(500)
    rng = np.random.default_rng(0)
    d = 2 * model.n_params
    phi = rng.normal(0, 0.3, d) + rng.normal(0, 0.05, (300, d))
    phi[:, model.n_params:] -= 4
    target = rng.normal(0, 100, (300, d))
    precision = rng.uniform(0.5, 2, d)
    fast = st.normal_equations(phi, target, precision)
    generic = DataStatistics.normal_equations(st, phi, target, precision)
    for a, b in zip(fast, generic):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-8 * np.max(np.abs(b)))


def test_logistic_design_is_the_gradient_of_the_quadratic_surrogate():
    model = LogisticRegressionModel(2, prior_scale=1.5)
    st = model.data_statistics(100)
    rng = np.random.default_rng(2)
    A = rng.normal(size=(3, 3))
    Lam, b = A @ A.T + 3 * np.eye(3), rng.normal(size=3)
    eta = np.r_[Lam[st.rows, st.cols], b]
    tau2 = 1.5**2

    def elbo(phi):
        mu, s = phi[:3], np.logaddexp(0, phi[3:])
        return (0.5 * mu @ Lam @ mu + 0.5 * np.sum(np.diag(Lam) * s**2) + b @ mu
                + (mu @ mu + s @ s) / (2 * tau2) - np.log(s).sum())

    phi = np.r_[rng.normal(size=3), -1.0, -0.5, -2.0]
    J, r = st.design(phi[None])
    numeric = np.array([(elbo(phi + h) - elbo(phi - h)) / 2e-6 for h in 1e-6 * np.eye(6)])
    np.testing.assert_allclose(J[0] @ eta + r[0], numeric, rtol=1e-6, atol=1e-6)


def test_prior_predictive_rules_out_impossible_statistics():
    assert np.isneginf(BetaBernoulliModel().data_statistics(10).log_prior(
        np.array([[-1.0], [11.0]]))).all()
    assert np.isfinite(BetaBernoulliModel().data_statistics(10).log_prior(np.array([[4.0]])))
    assert np.isneginf(GammaExponentialModel().data_statistics(10).log_prior(np.array([[-2.0]])))
    assert np.isneginf(DirichletCategoricalModel().data_statistics(10).log_prior(
        np.array([[6.0, 5.0]])))  # n_3 = -1
    st = LinearRegressionModel(1).data_statistics(50)
    XtX, Xty = np.array([[50.0, 5.0], [5.0, 50.0]]), np.array([10.0, 3.0])
    rss_zero = Xty @ np.linalg.solve(XtX, Xty)
    good = np.r_[XtX[st.rows, st.cols], Xty, rss_zero + 4.0]
    negative_rss = np.r_[XtX[st.rows, st.cols], Xty, rss_zero - 1.0]
    not_pd = np.r_[np.array([[50.0, 60.0], [60.0, 50.0]])[st.rows, st.cols], Xty, 100.0]
    logp = st.log_prior(np.array([good, negative_rss, not_pd]))
    assert np.isfinite(logp[0]) and np.isneginf(logp[1:]).all()


def test_conditional_posteriors_are_the_conjugate_ones():
    rng = np.random.default_rng(0)
    gamma = GammaExponentialModel(2.0, 3.0).data_statistics(40).conditional_posterior(
        np.array([[25.0]]))
    rate = np.logaddexp(0, gamma.sample(np.zeros(40_000, int), rng)[:, 0])
    assert rate.mean() == pytest.approx((2.0 + 40) / (3.0 + 25.0), rel=0.01)
    beta = BetaBernoulliModel(2.0, 3.0).data_statistics(40).conditional_posterior(
        np.array([[10.0]]))
    p = 1 / (1 + np.exp(-beta.sample(np.zeros(40_000, int), rng)[:, 0]))
    assert p.mean() == pytest.approx(12.0 / 45.0, rel=0.01)
    dirichlet = DirichletCategoricalModel((1.0, 2.0, 3.0)).data_statistics(30)
    u = dirichlet.conditional_posterior(np.array([[10.0, 5.0]])).sample(
        np.zeros(40_000, int), rng)
    probs = np.exp(np.c_[u, np.zeros(len(u))])
    probs /= probs.sum(1, keepdims=True)
    np.testing.assert_allclose(probs.mean(0), np.array([11, 7, 18]) / 36, rtol=0.02)
    # linear: the normal-inverse-gamma posterior in closed form
    model = LinearRegressionModel(1, weight_scale=2.0, noise_shape=3.0, noise_scale=0.5)
    st = model.data_statistics(30)
    XtX, Xty, yty = np.array([[30.0, 3.0], [3.0, 30.0]]), np.array([6.0, -3.0]), 12.0
    nig = st.conditional_posterior(np.r_[XtX[st.rows, st.cols], Xty, yty][None])
    V = np.linalg.inv(XtX + np.eye(2) / 4.0)
    m = V @ Xty
    draws = nig.sample(np.zeros(100_000, int), rng)
    np.testing.assert_allclose(draws[:, :2].mean(0), m, atol=0.01)
    var = np.logaddexp(0, draws[:, 2])
    shape, scale = 3.0 + 15, 0.5 + 0.5 * (yty - m @ Xty)
    assert var.mean() == pytest.approx(scale / (shape - 1), rel=0.02)


@pytest.mark.parametrize("name", ["gamma_exponential", "beta_bernoulli", "dirichlet_categorical"])
def test_clipping_correction_is_what_the_mechanism_clips(name):
    """N E_t[(1 - f(t)) grad(t)] under the model's predictive equals what clip_and_sum
    removes from the per-example gradients of a large data set drawn from it."""
    from skdpvi.dpvi import clip_and_sum
    from skdpvi.models.clipping_correction import clipping_correction

    model, _, _, phi = _case(name)
    n = 20_000
    rng = np.random.default_rng(3)
    if name == "gamma_exponential":
        x = rng.exponential(1 / 1.3, n)
        eta = np.array([n / 1.3])  # the predictive's rate, (a + n) / (b + S), is ~1.3
    elif name == "beta_bernoulli":
        x = (rng.random(n) < 0.3).astype(float)
        eta = np.array([0.3 * n])
    else:
        x = rng.choice(3, n, p=[0.5, 0.2, 0.3]).astype(float)
        eta = np.array([0.5 * n, 0.2 * n])
    st = model.data_statistics(n)
    beta = np.r_[np.ones(model.n_params), np.full(model.n_params, 30.0)]
    tensors = model.prepare_data(torch.tensor(x))
    eps = _centred_normal((4000, model.n_params), torch.Generator().manual_seed(0), "cpu")
    rows = per_example_gradients(model, torch.tensor(phi), eps, tensors, n,
                                 torch.tensor(beta))
    full = torch.cat([r.sum(0) for r in rows]).numpy()
    row_norms = torch.linalg.vector_norm(torch.cat(rows, 1), dim=1).numpy()
    clip = (float(np.quantile(row_norms, 0.8)) if name == "gamma_exponential"
            else 0.5 * (row_norms.min() + row_norms.max()))  # discrete: between the values
    clipped, norms = clip_and_sum(rows, clip)
    removed = (full - clipped.numpy()) / beta
    predicted = clipping_correction(st, phi[None], eta, beta, clip)[0]
    assert float((norms > clip).float().mean()) > 0.1
    np.testing.assert_allclose(predicted, removed, rtol=0.05, atol=0.02 * np.abs(full / beta).max())


@pytest.mark.parametrize("clipped", [0.2, 0.02, 0.005])
def test_gamma_exponential_clipping_is_accurate_in_the_tail(clipped):
    """The Exponential predictive's grid against one 200 times finer: the clipped loss
    within 0.5 % and its slope in eta within 3 %, down to 0.5 % of the rows clipped
    (the previous 256 equal-probability nodes: 7 % low at 2 %, 27 % at 0.5 %)."""
    from skdpvi.models import exponential_family_statistics as efs
    from skdpvi.models.clipping_correction import clipping_correction

    model, _, _, phi = _case("gamma_exponential")
    n = 20_000
    st = model.data_statistics(n)
    eta = np.array([n / 1.3])
    beta = np.r_[np.ones(model.n_params), np.full(model.n_params, 30.0)]

    class Fine(efs.GammaExponentialStatistics):
        def per_example_predictive(self, eta):
            rate = (model.prior_shape + n) / (model.prior_rate + float(eta[0]))
            return efs._exponential_grid(rate, n_points=200_001)

    fine = Fine(model, n)
    x, weights = fine.per_example_predictive(eta)
    norms = np.sqrt(((fine.per_example_rows(phi[None], eta)[0] * beta) ** 2).sum(-1))
    order = np.argsort(norms)
    clip = norms[order][np.searchsorted(np.cumsum(weights[order]), 1 - clipped)]
    step = 1e-4 * eta

    def loss_and_slope(stats):
        loss = clipping_correction(stats, phi[None], eta, beta, clip)[0]
        slope = (clipping_correction(stats, phi[None], eta + step, beta, clip)[0]
                 - clipping_correction(stats, phi[None], eta - step, beta, clip)[0]) / (2 * step)
        return loss, slope

    (loss, slope), (loss_ref, slope_ref) = loss_and_slope(st), loss_and_slope(fine)
    np.testing.assert_allclose(loss, loss_ref, rtol=0.005)
    np.testing.assert_allclose(slope, slope_ref, rtol=0.03)


def test_clipped_design_has_the_slope_of_the_clipped_mechanism():
    """Gamma-Exponential, 20 % of the rows clipped: how the released (clipped) gradient
    changes with the statistic, measured on two data sets that differ only by a scale
    of x, is the linearised design J - d lost / d eta of the statistics posterior, not
    the unclipped J (which over-states the gradients' information on eta)."""
    from skdpvi.dpvi import clip_and_sum
    from skdpvi.noise_aware.statistics_clipping import _ClippedStatistics

    model, _, _, phi = _case("gamma_exponential")
    n = 20_000
    x = np.random.default_rng(3).exponential(1 / 1.3, n)
    beta = np.r_[np.ones(model.n_params), np.full(model.n_params, 30.0)]
    eps = _centred_normal((4000, model.n_params), torch.Generator().manual_seed(0), "cpu")
    clip, released, etas = None, [], []
    for scale in (1.0, 1.03):
        xs = x * scale
        rows = per_example_gradients(model, torch.tensor(phi), eps,
                                     model.prepare_data(torch.tensor(xs)), n,
                                     torch.tensor(beta))
        if clip is None:
            norms = torch.linalg.vector_norm(torch.cat(rows, 1), dim=1).numpy()
            clip = float(np.quantile(norms, 0.8))
        clipped, _ = clip_and_sum(rows, clip)
        released.append(clipped.numpy() / beta)
        etas.append(xs.sum())
    slope = (released[1] - released[0]) / (etas[1] - etas[0])
    st = model.data_statistics(n)
    J, _ = st.design(phi[None])
    clipped_design, _ = _ClippedStatistics(st, np.array([np.mean(etas)]), beta,
                                           clip).design(phi[None])
    np.testing.assert_allclose(clipped_design[0, :, 0], slope, rtol=0.1)
    assert np.max(np.abs(J[0, :, 0] - slope) / np.abs(slope)) > 0.2


def _linear_clipping_case(n=20_000, shares="model"):
    rng = np.random.default_rng(3)
    model = LinearRegressionModel(2)
    if shares is None:
        model.clip_shares = None
    X = rng.normal(size=(n, 2)) @ np.array([[1.0, 0.6], [0.0, 0.8]]) + [0.3, -0.2]
    y = X @ [0.5, -0.3] + 0.2 + rng.normal(0, 0.3, n)
    Xp = np.c_[X, np.ones(n)]
    st = model.data_statistics(n)
    eta = np.r_[(Xp.T @ Xp)[st.rows, st.cols], Xp.T @ y, y @ y]
    phi = np.r_[0.4, -0.2, 0.1, -2.0, np.log(np.expm1([0.05, 0.04, 0.06, 0.2]))]
    beta = np.r_[np.ones(model.n_params), np.full(model.n_params, 30.0)]
    return model, X, y, st, eta, phi, beta


def _mechanism_rows(model, X, y, phi, beta):
    """The mechanism's preconditioned per-example gradients of (X, y) at phi (4,000
    centred draws: nearly their expectation), their unclipped sum over beta, and the
    rows' norms."""
    tensors = model.prepare_data(torch.tensor(X), torch.tensor(y))
    eps = _centred_normal((4000, model.n_params), torch.Generator().manual_seed(0), "cpu")
    rows = per_example_gradients(model, torch.tensor(phi), eps, tensors, len(y),
                                 torch.tensor(beta))
    full = torch.cat([r.sum(0) for r in rows]).numpy() / beta
    return rows, full, torch.linalg.vector_norm(torch.cat(rows, 1), dim=1).numpy()


@pytest.mark.parametrize("shares", ["model", None])
def test_linear_clipping_correction_is_what_the_mechanism_clips(shares):
    """Linear regression, 20,000 Gaussian rows, a clip norm that clips 30 % of them (by
    the model's clip groups, or as one row): what clip_and_sum removes from the
    per-example gradients is what the correction predicts from eta alone."""
    from skdpvi.dpvi import clip_and_sum
    from skdpvi.dpvi.mechanism import group_clip_norms
    from skdpvi.models.clipping_correction import clipping_correction

    model, X, y, st, eta, phi, beta = _linear_clipping_case(shares=shares)
    rows, full, norms = _mechanism_rows(model, X, y, phi, beta)
    clip = float(np.quantile(norms, 0.8))
    groups = (None if shares is None
              else (model.n_weights, group_clip_norms(clip, model.clip_shares)))
    clipped, clip_norms = clip_and_sum(rows, clip, groups=groups)
    removed = full - clipped.numpy() / beta
    norms_used = clip if groups is None else groups[1]
    predicted = clipping_correction(st, phi[None], eta, beta, norms_used)[0]
    assert float((clip_norms > clip).float().mean()) > 0.2
    big = np.abs(removed) > 0.1 * np.abs(removed).max()
    assert big.sum() >= 3 and np.abs(removed[big] / full[big]).min() > 0.1
    np.testing.assert_allclose(predicted, removed, rtol=0.1,
                               atol=0.03 * np.abs(removed).max())


@pytest.mark.parametrize("quantile", [0.8, 0.95])
def test_noise_variance_clipping_is_what_the_mechanism_clips(quantile):
    """``correct_clipping = "noise_variance"``: the one-dimensional integral over the
    residual predicts what clip_and_sum removes from the noise variance's group within
    3 % with 20 % or 5 % of the rows clipped (the 256 Sobol nodes of the full
    correction err by 9 % and 42 % here: a tail expectation), and leaves the other
    groups alone."""
    from skdpvi.dpvi import clip_and_sum
    from skdpvi.dpvi.mechanism import group_clip_norms
    from skdpvi.models.clipping_correction import clipping_correction

    model, X, y, st, eta, phi, beta = _linear_clipping_case()
    st.correct_clipping = "noise_variance"
    rows, full, norms = _mechanism_rows(model, X, y, phi, beta)
    clip_norms = group_clip_norms(float(np.quantile(norms, quantile)), model.clip_shares)
    clipped, _ = clip_and_sum(rows, 1.0, groups=(model.n_weights, clip_norms))
    removed = full - clipped.numpy() / beta
    predicted = clipping_correction(st, phi[None], eta, beta, clip_norms)[0]
    u = [model.n_weights, 2 * model.n_params - 1]
    assert np.abs(removed[u[0]] / full[u[0]]) > 0.01
    np.testing.assert_allclose(predicted[u], removed[u], rtol=0.03)
    assert not np.any(np.delete(predicted, u))
    model.clip_shares = None
    assert not np.any(clipping_correction(st, phi[None], eta, beta, 1.0))


def _linear_expected_loss(model, st, X, y, phi, beta, clip_quantile):
    """What the clip groups remove from the expected (over the draws) per-example
    gradients of the rows (X, y) (the mechanism's clipping without Monte Carlo), with
    the clip norm at a quantile of the rows' norms; and the group clip norms."""
    from skdpvi.dpvi.mechanism import group_clip_norms
    from skdpvi.models.linear_clipping import _lost_fraction

    p, n_params, n = model.n_weights, model.n_params, len(y)
    Xp = np.c_[X, np.ones(n)]
    parts = st._parts(phi[None])
    r = parts["r"][0] / st.n_examples
    resid = y - Xp @ parts["mu_w"][0]
    g_w = -parts["e1"][0] * resid[:, None] * Xp + r[:p]
    dq = resid**2 + (Xp**2) @ parts["s_w"][0] ** 2
    g_e = np.c_[parts["u_mean"][0] * dq + r[p], parts["u_scale"][0] * dq + r[n_params + p]]
    g_s = parts["w_scale"][0] * Xp**2 + r[n_params:n_params + p]
    blocks = ((g_w, beta[:p]), (g_e, beta[[p, n_params + p]]), (g_s, beta[n_params:n_params + p]))
    norms = np.sqrt(sum(((g * b) ** 2).sum(1) for g, b in blocks))
    clip_norms = group_clip_norms(float(np.quantile(norms, clip_quantile)), model.clip_shares)
    lost = [(_lost_fraction(((g * b) ** 2).sum(1), c)[:, None] * g).sum(0)
            for g, b, c in ((g_w, beta[:p], clip_norms[0]),
                            (g_e, beta[[p, n_params + p]], clip_norms[1]),
                            (g_s, beta[n_params:n_params + p], clip_norms[2]))]
    return np.r_[lost[0], lost[1][0], lost[2], lost[1][1]] * st.n_examples / n, clip_norms


@pytest.mark.parametrize("at_optimum", [False, True])
def test_residual_clipping_quadrature_is_exact_in_the_residual(at_optimum):
    """``clipping_quadrature="residual"`` (1,024 nodes for x) against the expected
    clipped loss of 400,000 rows of the model, 20 % of them clipped. Far from the
    optimum: within 2 % on every coordinate (the node quadrature, 256 nodes: up to
    22 %). At ``mu_w = w_hat``: the coefficients' loss is 0 by the residual's symmetry
    (the rows' own is a few % of the noise variance's: their sampling noise and the
    prior's share, left out of the norm), where the nodes put it at 10-15 times the
    truth; the noise variance's within 2 % (nodes: 16 %)."""
    from skdpvi.models.clipping_correction import clipping_correction

    model, X, y, st, eta, phi, beta = _linear_clipping_case(n=400_000)
    if at_optimum:
        XtX, Xty, _ = st.unpack(eta)
        phi[:3] = np.linalg.solve(XtX, Xty)
    truth, clip_norms = _linear_expected_loss(model, st, X, y, phi, beta, 0.8)
    st.n_nodes = 1024
    predicted = clipping_correction(st, phi[None], eta, beta, clip_norms)[0]
    st.clipping_quadrature, st.n_nodes = "nodes", 256
    nodes = clipping_correction(st, phi[None], eta, beta, clip_norms)[0]
    means, rest = np.arange(3), np.arange(3, 8)
    if at_optimum:
        assert np.abs(predicted[means]).max() < 1e-9 * np.abs(predicted[rest]).max()
        assert np.abs(truth[means]).max() < 0.1 * np.abs(truth[rest]).max()
        assert np.abs(nodes[means] - truth[means]).min() > 5 * np.abs(truth[means]).max()
        np.testing.assert_allclose(predicted[rest], truth[rest], rtol=0.02)
        assert abs(nodes[3] / truth[3] - 1) > 0.1
    else:
        np.testing.assert_allclose(predicted, truth, rtol=0.02)
        assert np.max(np.abs(nodes / truth - 1)) > 0.15


@pytest.mark.parametrize("shares", ["model", None])
def test_linear_clipping_loss_equals_the_generic_per_example_rows(shares):
    """The (T, K) shortcut of the linear model gives the generic (T, K, d) computation
    on the same nodes."""
    from skdpvi.models import linear_statistics
    from skdpvi.models.clipping_correction import clipping_correction

    from skdpvi.noise_aware.statistics import _clip_norms

    model, _, _, st, eta, phi, beta = _linear_clipping_case(shares=shares)
    st.clipping_quadrature = "nodes"
    phis = phi + 0.05 * np.random.default_rng(0).standard_normal((7, len(phi)))
    clip = _clip_norms(model, 8.0)
    fast = clipping_correction(st, phis, eta, beta, clip)
    assert np.abs(fast).max() > 100  # something is clipped

    class Generic(linear_statistics.LinearRegressionStatistics):
        clipping_loss = None
        clipping_quadrature = "nodes"

    slow = clipping_correction(Generic(st.model, st.n_examples), phis, eta, beta, clip)
    np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-9 * np.abs(slow).max())
    direct = st.per_example_rows(phis, eta)
    np.testing.assert_allclose(direct, DataStatistics.per_example_rows(st, phis, eta),
                               rtol=1e-9, atol=1e-9 * np.abs(direct).max())


def test_linear_design_sum_and_predictive_moments():
    _, _, _, st, eta, phi, _ = _linear_clipping_case(n=1000)
    phis = phi + 0.1 * np.random.default_rng(0).standard_normal((700, len(phi)))
    for fast, slow in zip(st.design_sum(phis), DataStatistics.design_sum(st, phis)):
        np.testing.assert_allclose(fast, slow, rtol=1e-10, atol=1e-10 * np.abs(slow).max())
    nodes, weights = st.per_example_predictive(eta)
    np.testing.assert_allclose(st.n_examples * weights @ nodes, eta, rtol=1e-10)


def test_clipped_statistics_with_anchors_match_their_design():
    """Linear regression takes the correction's slope at anchors of the trace; its
    shortcut normal equations and expected gradient equal those of its own design."""
    from skdpvi.noise_aware.statistics_clipping import _ClippedStatistics

    from skdpvi.noise_aware.statistics import _clip_norms

    model, _, _, st, eta, phi, beta = _linear_clipping_case(n=1000)
    rng = np.random.default_rng(1)
    trace = phi + 0.03 * np.cumsum(rng.standard_normal((600, len(phi))), 0) / 10
    clipped = _ClippedStatistics(st, eta, beta, _clip_norms(model, 2.0), trace_phi=trace)
    assert clipped._anchors is not None and np.abs(clipped._trace_lost).max() > 0
    J, r = clipped.design(trace[:300])
    assert np.abs(J - st.design(trace[:300])[0]).max() > 0  # the slope is there
    target = J @ eta + r + rng.standard_normal(r.shape)
    precision = rng.uniform(0.5, 2.0, len(phi))
    fast = clipped.normal_equations(trace[:300], target, precision)
    slow = DataStatistics.normal_equations(clipped, trace[:300], target, precision)
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * np.abs(b).max())
    moved = eta * 1.01
    np.testing.assert_allclose(clipped.expected_gradient(trace[:300], moved),
                               DataStatistics.expected_gradient(clipped, trace[:300], moved),
                               rtol=1e-9, atol=1e-9)


def test_logistic_curvature_outside_the_psd_cone_is_projected_not_rejected():
    """A draw of Lambda with a negative eigenvalue (a direction the data do not inform)
    gives the posterior of its PSD projection: the prior alone along that direction."""
    st = LogisticRegressionModel(2).data_statistics(1000)
    v = np.array([1.0, -1.0, 0.0]) / np.sqrt(2)
    Lam_psd = 300.0 * np.eye(3) - 300.0 * np.outer(v, v)  # singular along v
    Lam_bad = Lam_psd - 50.0 * np.outer(v, v)  # eigenvalue -50 along v
    b = np.array([10.0, -5.0, 2.0])
    etas = np.array([np.r_[L[st.rows, st.cols], b] for L in (Lam_psd, Lam_bad)])
    assert np.isfinite(st.log_prior(etas)).all()
    comps = st.conditional_posterior(etas)
    np.testing.assert_allclose(comps.mean[1], comps.mean[0], rtol=1e-10)
    cov = comps.chol[1] @ comps.chol[1].T
    assert v @ cov @ v == pytest.approx(LogisticRegressionModel(2).prior_scale**2, rel=1e-8)
