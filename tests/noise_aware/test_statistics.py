"""The statistics posterior (skdpvi.noise_aware.statistics) on traces with a known answer."""

import warnings

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning

from skdpvi.dpvi import DPVIResult, TraceStatistics, run_dpvi
from skdpvi.models import LinearRegressionModel, LogisticRegressionModel
from skdpvi.noise_aware.statistics import StatisticsFit, statistics_posterior

KAPPA, TAU = 0.1, 2.0


def _true_logistic_eta(st, rng):
    """A dense, strongly coupled Lambda (correlation 0.6 between all coefficients)."""
    p = st.p
    corr = 0.6 * np.ones((p, p)) + 0.4 * np.eye(p)
    Lam = 400.0 * corr
    b = rng.normal(0, 50, p)
    return np.r_[Lam[st.rows, st.cols], b]


def _synthetic_trace(st, eta, rng, n_steps=4000, shift=None):
    """phi_t wandering as DP-SGD does; g_t = kappa (J(phi_t) eta + r(phi_t)) + noise."""
    d = 2 * st.p
    phi = np.zeros((n_steps + 1, d))
    phi[0, st.p:] = -2.0
    for t in range(n_steps):
        phi[t + 1] = phi[t] + rng.normal(0, 0.01, d) - 0.01 * (phi[t] - phi[0])
    J, r = st.design(phi[:-1])
    truth = np.broadcast_to(eta, (n_steps, len(eta))).copy()
    if shift is not None:
        truth[n_steps // 2:] += shift
    mean = np.einsum("tdk,tk->td", J, truth) + r
    grads = KAPPA * mean + rng.normal(0, TAU, (n_steps, d))
    return phi, grads


def _result(phi, grads):
    n_steps, d = grads.shape
    return DPVIResult(phi=phi[-1], stats=TraceStatistics.from_trace(phi, grads, 0),
                      noise_multiplier=TAU, clip_norm=1.0, sampling_rate=KAPPA,
                      preconditioner=np.ones(d), learning_rate=np.full(d, 0.01),
                      n_steps=n_steps, burn_in=0, trace_phi=phi, trace_grad=grads)


def _fit(st, phi, grads, gammas=None):
    precision = np.full(phi.shape[1], (KAPPA / TAU) ** 2)
    P, h, _ = st.normal_equations(phi[:-1], grads / KAPPA, precision)
    index, scale_of = st.shrinkage_groups()
    first = StatisticsFit(P, h, index, np.ones(len(index)), gammas=(0.0,))
    kwargs = {} if gammas is None else {"gammas": gammas}
    return StatisticsFit(P, h, index, scale_of(first.means[0]), **kwargs)


def test_coupled_model_recovers_a_dense_curvature_and_the_diagonal_one_does_not():
    """90 % intervals of the statistics cover the truth at their rate over seeds; the
    diagonal model (off-diagonal curvature fixed at 0) misses b whenever the
    coordinates are coupled."""
    st = LogisticRegressionModel(2).data_statistics(1000)
    covered, covered_diagonal = [], []
    for seed in range(30):
        rng = np.random.default_rng(seed)
        eta = _true_logistic_eta(st, rng)
        phi, grads = _synthetic_trace(st, eta, rng)
        for gammas, out in ((None, covered), ((0.0,), covered_diagonal)):
            fit = _fit(st, phi, grads, gammas)
            g = int(np.argmax(fit.weights))
            sd = np.sqrt(np.maximum(np.diag(fit.covs[g]), 1e-300))
            out.append(np.abs(fit.means[g] - eta) <= norm.ppf(0.95) * sd)
    covered, covered_diagonal = np.array(covered), np.array(covered_diagonal)
    assert 0.84 <= covered.mean() <= 0.96
    b = slice(st.n_vech, None)
    assert covered_diagonal[:, b].mean() < 0.5


def test_split_window_check_warns_when_the_halves_disagree_and_not_otherwise():
    st = LogisticRegressionModel(2).data_statistics(1000)
    rng = np.random.default_rng(5)
    eta = _true_logistic_eta(st, rng)
    shift = np.zeros_like(eta)
    shift[st.n_vech:] = 40.0  # b moves between the halves of the window
    phi, grads = _synthetic_trace(st, eta, rng, shift=shift)
    with pytest.warns(ConvergenceWarning, match="do not follow") as caught:
        statistics_posterior(_result(phi, grads), st, 200, random_state=0, settle=False)
    assert caught[0].filename == __file__  # points at the caller
    p_values = []
    for seed in range(8):
        rng = np.random.default_rng(100 + seed)
        phi, grads = _synthetic_trace(st, _true_logistic_eta(st, rng), rng)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            _, diag = statistics_posterior(_result(phi, grads), st, 200, random_state=0)
        p_values.append(diag["split_p_value"])
        assert 0.8 < diag["variance_ratio"] < 1.2
    assert np.mean(p_values) > 0.2  # roughly uniform under the model


def test_engine_run_with_little_noise_recovers_the_exact_posterior():
    """With the DP noise made negligible and no clipping, the noise-aware posterior is
    the exact normal-inverse-gamma posterior of the data."""
    rng = np.random.default_rng(0)
    n = 400
    X = rng.normal(size=(n, 2))
    y = X @ [0.8, -0.5] + 0.3 + rng.normal(0, 0.4, n)
    model = LinearRegressionModel(2, noise_shape=3.0, noise_scale=0.5)
    result = run_dpvi(model, (X, y), noise_multiplier=1e-3, clip_norm=1e4, sampling_rate=0.5,
                      n_steps=1500, burn_in=300, learning_rate=2e-4, preconditioner=50.0,
                      random_state=0, record_trace=True)
    components, _ = statistics_posterior(result, model.data_statistics(n), 400, random_state=0)
    draws = components.sample(np.random.default_rng(1).integers(400, size=20_000),
                              np.random.default_rng(2))
    Xp = np.c_[X, np.ones(n)]
    V = np.linalg.inv(Xp.T @ Xp + np.eye(3) / 4.0)
    m = V @ Xp.T @ y
    shape, scale = 3.0 + n / 2, 0.5 + 0.5 * (y @ y - m @ Xp.T @ y)
    sd = np.sqrt(np.diag(V) * scale / (shape - 1))
    np.testing.assert_allclose(draws[:, :3].mean(0), m, atol=0.2 * sd.max())
    np.testing.assert_allclose(draws[:, :3].std(0), sd, rtol=0.15)
    var = np.logaddexp(0, draws[:, 3])
    assert var.mean() == pytest.approx(scale / (shape - 1), rel=0.05)


def test_statistics_posterior_needs_the_trace():
    model = LinearRegressionModel(1)
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 1)), rng.normal(size=200)
    result = run_dpvi(model, (X, y), noise_multiplier=1.0, clip_norm=5.0, sampling_rate=0.2,
                      n_steps=50, burn_in=10, random_state=0)
    with pytest.raises(ValueError, match="record_trace"):
        statistics_posterior(result, model.data_statistics(200))
    with pytest.raises(ValueError, match="n_components"):
        statistics_posterior(result, model.data_statistics(200), 0)


def test_known_statistics_are_fixed_and_the_rest_conditioned_on_them():
    """Fixing a statistic at a public value is Gaussian conditioning of the free fit."""
    rng = np.random.default_rng(3)
    k = 5
    A = rng.normal(size=(k, k))
    P, h = A @ A.T + k * np.eye(k), rng.normal(size=k)
    known = (np.array([2]), np.array([1.7]))
    fit = StatisticsFit(P, h, np.zeros(0, int), np.zeros(0), known=known)
    assert fit.means[0][2] == 1.7
    assert np.all(fit.covs[0][2] == 0) and np.all(fit.covs[0][:, 2] == 0)
    cov = np.linalg.inv(P)
    mean = cov @ h
    free = np.array([0, 1, 3, 4])
    cond_mean = mean[free] + cov[free, 2] / cov[2, 2] * (1.7 - mean[2])
    cond_cov = cov[np.ix_(free, free)] - np.outer(cov[free, 2], cov[free, 2]) / cov[2, 2]
    np.testing.assert_allclose(fit.means[0][free], cond_mean, rtol=1e-10)
    np.testing.assert_allclose(fit.covs[0][np.ix_(free, free)], cond_cov, rtol=1e-8)


def test_linear_model_knows_the_intercept_column_and_not_without_one():
    st = LinearRegressionModel(3).data_statistics(250)
    index, values = st.known_statistics()
    assert st.statistic_names[index[0]] == "XtX[3,3]" and values[0] == 250
    st = LinearRegressionModel(3, fit_intercept=False).data_statistics(250)
    assert len(st.known_statistics()[0]) == 0


class _GaussianPriorStatistics:
    """A stand-in DataStatistics: a narrow Gaussian prior predictive, eta as components."""

    flat_prior = False

    def __init__(self, mean, sd):
        self.mean, self.sd = np.asarray(mean), np.asarray(sd)

    def log_prior(self, eta):
        return -0.5 * (((eta - self.mean) / self.sd) ** 2).sum(1)

    def conditional_posterior(self, eta):
        return eta


def test_tempered_sampler_finds_a_posterior_that_importance_sampling_cannot():
    """Trace Gaussian N(0, 1) x prior N(2, 0.05^2) in 3-D: importance sampling from the
    trace Gaussian has an effective sample size of a few draws; the tempered sampler
    reproduces the exact product (mean and sd within a few percent)."""
    from skdpvi.noise_aware.statistics_sampling import _resample

    d, prior_sd = 3, 0.05
    fit = StatisticsFit(np.eye(d), np.zeros(d), np.zeros(0, int), np.zeros(0))
    st = _GaussianPriorStatistics(np.full(d, 2.0), np.full(d, prior_sd))
    post_var = 1.0 / (1.0 + 1.0 / prior_sd**2)
    post_mean = post_var * 2.0 / prior_sd**2
    with pytest.warns(RuntimeWarning, match="degenerate"):
        _, diag_is = _resample(st, fit, 1000, np.random.default_rng(0), n_proposals=10_000)
    assert diag_is["effective_sample_size"] < 50
    draws, diag = _resample(st, fit, 1000, np.random.default_rng(0), None)
    assert diag["smc_stages"] > 1
    np.testing.assert_allclose(draws.mean(0), post_mean, atol=0.1 * np.sqrt(post_var))
    np.testing.assert_allclose(draws.std(0), np.sqrt(post_var), rtol=0.1)
    assert len(np.unique(draws[:, 0])) > 500


def test_shrinkage_scales_follow_their_statistics_in_any_order():
    """The prior scale of each shrunk statistic is its own, however the index is ordered
    and whether or not a known statistic is listed among them."""
    rng = np.random.default_rng(5)
    k = 6
    A = rng.normal(size=(k, k))
    P, h = A @ A.T + k * np.eye(k), rng.normal(size=k)
    ordered = StatisticsFit(P, h, np.array([1, 3, 4]), np.array([0.5, 2.0, 7.0]),
                            gammas=(0.3,))
    shuffled = StatisticsFit(P, h, np.array([4, 1, 3, 0]), np.array([7.0, 0.5, 2.0, 9.0]),
                             gammas=(0.3,), known=(np.array([0]), np.array([0.0])))
    fixed_zero = StatisticsFit(P, h, np.array([1, 3, 4]), np.array([0.5, 2.0, 7.0]),
                               gammas=(0.3,), known=(np.array([0]), np.array([0.0])))
    np.testing.assert_allclose(shuffled.means[0], fixed_zero.means[0])
    assert not np.allclose(ordered.means[0], fixed_zero.means[0])


def _linear_trace(rng, n=2000, n_steps=3000):
    """A linear-regression trace with a known eta (no clipping in the simulation)."""
    st = LinearRegressionModel(2).data_statistics(n)
    X = np.c_[rng.normal(size=(n, 2)), np.ones(n)]
    y = X @ [0.5, -0.3, 0.2] + rng.normal(0, 0.3, n)
    eta = np.r_[(X.T @ X)[st.rows, st.cols], X.T @ y, y @ y]
    center = np.r_[0.5, -0.3, 0.2, -2.4, np.full(4, -4.0)]
    phi = center + 0.02 * rng.standard_normal((n_steps + 1, len(center)))
    grads = KAPPA * st.expected_gradient(phi[:-1], eta) + rng.normal(0, TAU, (n_steps, 8))
    return st, eta, phi, grads


@pytest.mark.parametrize("kind", ["none", "constant", "unsettled"])
def test_clipping_correction_is_applied_only_when_its_plug_in_settles(monkeypatch, kind):
    """No predicted loss: the model's statistics are kept. A loss that does not depend
    on eta: one plug-in round settles it and the clipped design is used. A loss that
    grows with the distance of eta from the truth (a first estimate too far off to
    linearise at): the second round moves further than the first and the correction
    is refused (None), rather than extrapolated."""
    from skdpvi.noise_aware import statistics as module
    from skdpvi.noise_aware.statistics_clipping import _ClippedStatistics

    st, eta_true, phi, grads = _linear_trace(np.random.default_rng(4))
    st.correct_clipping = True  # off by default for linear regression
    result = _result(phi, grads)
    target = grads / KAPPA
    precision = np.full(phi.shape[1], (KAPPA / TAU) ** 2)
    halves = (slice(0, 1500), slice(1500, None))

    def fake(data_statistics, phi_, eta, preconditioner, clip_norm):
        if kind == "none":
            return np.zeros_like(phi_)
        if kind == "constant":
            return np.tile(50.0 * np.sqrt(1.0 / precision), (len(phi_), 1))
        return 3.0 * (data_statistics.expected_gradient(phi_, eta)
                      - data_statistics.expected_gradient(phi_, eta_true))

    monkeypatch.setattr(module, "clipping_correction", fake)
    out = module._undo_clipping(st, result, phi[:-1], target, precision, halves)
    if kind == "none":
        assert out is st
    elif kind == "constant":
        assert isinstance(out, _ClippedStatistics)
    else:
        assert out is None


class _SupportStatistics(_GaussianPriorStatistics):
    """A flat prior predictive on eta > bound (a stand-in for RSS > 0)."""

    def __init__(self, bound):
        self.bound = bound

    def log_prior(self, eta):
        return np.where(eta[:, 0] > self.bound, 0.0, -np.inf)


def test_resampling_refuses_a_posterior_resting_on_a_few_possible_draws():
    """Trace Gaussian N(0, 1), support eta > 3.72 (probability 1e-4): even 64 times the
    proposals leave about 64 possible draws, under the 100 that 1000 components need.
    Tempering cannot cross the support, so the particles would all descend from those
    few: strict mode raises, otherwise a RuntimeWarning says so. A support that
    leaves enough draws passes silently."""
    from skdpvi.noise_aware.statistics_sampling import FewValidDraws, _resample

    fit = StatisticsFit(np.eye(1), np.zeros(1), np.zeros(0, int), np.zeros(0))
    with pytest.raises(FewValidDraws):
        _resample(_SupportStatistics(3.72), fit, 1000, np.random.default_rng(0), None,
                  strict=True)
    with pytest.warns(RuntimeWarning, match="possible under the model's prior"):
        _resample(_SupportStatistics(3.72), fit, 1000, np.random.default_rng(0), None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        draws, _ = _resample(_SupportStatistics(2.0), fit, 1000, np.random.default_rng(0),
                             None, strict=True)
    assert np.all(draws[:, 0] > 2.0) and len(np.unique(draws[:, 0])) > 100


def test_unused_coordinates_leave_the_posterior_of_eta():
    """``use_scale_gradients=False``: the coefficients' scale gradients get zero
    precision, so a bias in them (what their unmodelled clipping does) leaves eta's
    posterior unchanged, where with them it moves the diagonal of X^T X."""
    st, eta, phi, grads = _linear_trace(np.random.default_rng(5))
    scales = st.model.n_params + np.arange(st.p)
    biased = grads.copy()
    biased[:, scales] -= 3 * TAU
    means = {}
    for use in (True, False):
        st.use_scale_gradients = use
        for name, g in (("clean", grads), ("biased", biased)):
            _, diag = statistics_posterior(_result(phi, g), st, 200, random_state=0,
                                           check=False)
            means[use, name] = diag["eta_mean"]
    np.testing.assert_array_equal(st.unused_coordinates(), scales)
    np.testing.assert_allclose(means[False, "clean"], means[False, "biased"])
    diagonal = st.diagonal[:-1]  # the intercept's entry is known
    moved = np.abs(means[True, "biased"] - means[True, "clean"])[diagonal]
    assert np.all(moved > 0.1)  # the unused case agrees to rounding


def test_each_shrinkage_group_finds_its_own_scale():
    """Two groups of statistics, one far from 0 and one near it, observed with the same
    noise: with a gamma per group the small ones are shrunk (their posterior sd falls
    below the noise) while the large ones keep their values; one shared gamma cannot
    do both, and the small ones stay as loose as the noise. The reverse (the last
    group large, the first small) is outside the nested grid: the last group is then
    shrunk no less than the first, like one shared gamma."""
    rng = np.random.default_rng(11)
    k, noise = 8, 1.0
    truth = np.r_[np.full(4, 30.0), np.zeros(4)]
    P = np.eye(k) / noise**2
    h = P @ (truth + rng.normal(0, noise, k))
    index, scale, labels = np.arange(k), np.full(k, 10.0), np.r_[np.zeros(4), np.ones(4)]
    grouped = StatisticsFit(P, h, index, scale, labels=labels)
    shared = StatisticsFit(P, h, index, scale)
    n = len(shared.gammas)
    assert grouped.gammas.shape == (n * (n + 1) // 2, 2)
    assert np.all(grouped.gammas[:, 1] <= grouped.gammas[:, 0])
    assert grouped.index_gammas.shape == (len(grouped.gammas), k)
    best = grouped.gammas[np.argmax(grouped.weights)]
    assert best[0] >= 1.0 and best[1] <= 0.03
    sd = lambda fit: np.sqrt(sum(w * np.diag(c) for w, c in zip(fit.weights, fit.covs)
                                 if c is not None))
    assert np.all(sd(grouped)[4:] < 0.5 * noise)
    assert np.all(sd(shared)[4:] > 0.8 * noise)
    np.testing.assert_allclose(grouped.mean[:4], shared.mean[:4], atol=0.5)
    reverse = StatisticsFit(P, h, index, scale, labels=1 - labels)
    assert np.all(sd(reverse)[4:] > 0.8 * noise)


def test_linear_model_shrinks_the_intercept_column_sums_apart():
    st = LinearRegressionModel(3).data_statistics(250)
    index, _ = st.shrinkage_groups()
    labels = st.shrinkage_labels()
    names = np.array(st.statistic_names)[index]
    assert sorted(names[labels == 1]) == ["XtX[3,0]", "XtX[3,1]", "XtX[3,2]"]
    assert len(names[labels == 0]) == 3
    assert LinearRegressionModel(3, fit_intercept=False).data_statistics(250) \
        .shrinkage_labels() is None


def test_intercept_inflation_is_one_plus_the_means_mahalanobis_distance():
    rng = np.random.default_rng(2)
    n = 4000
    X = np.c_[rng.normal(0.0, 2.0, n), rng.normal(3.0, 0.5, n), np.ones(n)]
    st = LinearRegressionModel(2).data_statistics(n)
    eta = np.r_[(X.T @ X)[st.rows, st.cols], np.zeros(3), 1.0]
    XtX = X.T @ X
    s, S = XtX[2, :2], XtX[:2, :2]
    expected = n / (n - s @ np.linalg.solve(S, s))
    assert expected > 30  # the second feature lies 6 sds from 0
    np.testing.assert_allclose(st.intercept_inflation(eta), expected, rtol=1e-8)
    m, C = X[:, :2].mean(0), np.cov(X[:, :2].T, bias=True)
    np.testing.assert_allclose(expected, 1 + m @ np.linalg.solve(C, m), rtol=1e-8)
    assert np.isnan(LinearRegressionModel(2, fit_intercept=False)
                    .data_statistics(n).intercept_inflation(eta[:6]))


def test_grouped_grid_updates_equal_full_fits():
    """The last group's gammas come from rank-|group| updates of its loosest one: the
    same means, covariances and marginal likelihoods as a full fit at every point."""
    from skdpvi.noise_aware.statistics_fit import GAMMA_GRID, _PointFit

    rng = np.random.default_rng(4)
    k = 9
    A = rng.normal(size=(k, k))
    P, h = A @ A.T + 0.5 * np.eye(k), rng.normal(size=k) * 3
    index = np.array([6, 1, 2, 3, 4, 7])
    scale = rng.uniform(0.5, 2.0, len(index))
    labels = np.array([0, 0, 1, 1, 0, 1])
    known = (np.array([0, 7]), np.array([1.5, 0.0]))
    fit = StatisticsFit(P, h, index, scale, known=known, labels=labels)
    order = {i: j for j, i in enumerate(index)}
    shrunk = fit.shrunk_index
    point_fit = _PointFit(P, h, known[0], known[1], shrunk,
                          scale[[order[i] for i in shrunk]])
    assert len(fit.means) == len(fit.gammas) == 36  # gamma_1 <= gamma_0 of 8 x 8
    for g, gamma in enumerate(fit.index_gammas):
        mean, cov, lml = point_fit(gamma)
        np.testing.assert_allclose(fit.means[g], mean, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(fit.covs[g], cov, rtol=1e-6, atol=1e-9)
        # the grid's prior: uniform in gamma_0, then in the gamma_1 <= gamma_0 allowed
        allowed = np.sum(np.asarray(GAMMA_GRID) <= fit.gammas[g, 0])
        np.testing.assert_allclose(fit.log_marginal[g], lml - np.log(allowed), rtol=1e-8,
                                   atol=1e-7)
    prior_of_first = np.array([np.exp(-np.log(np.sum(np.asarray(GAMMA_GRID) <= g0)))
                               for g0 in fit.gammas[:, 0]])
    for g0 in GAMMA_GRID:
        np.testing.assert_allclose(prior_of_first[fit.gammas[:, 0] == g0].sum(), 1.0)


class _PooledStatistics:
    """A stand-in with four statistics, the first three pooled, nothing shrunk."""

    def __init__(self, pooled=(0, 1, 2)):
        self.pooled = np.asarray(pooled)

    def shrinkage_groups(self):
        return np.zeros(0, int), lambda eta: np.zeros(0)

    def shrinkage_labels(self):
        return None

    def known_statistics(self):
        return np.zeros(0, int), np.zeros(0)

    def gaussian_prior(self, eta):
        return None

    def pooled_statistics(self):
        return self.pooled

    def pooled_correlations(self):
        return np.zeros(0, int), lambda eta: np.zeros(0)


class _PooledCorrelations(_PooledStatistics):
    """The first three statistics pooled relative to the scales 1 : 2 : 4."""

    unit = np.r_[1.0, 2.0, 4.0]

    def __init__(self):
        super().__init__(pooled=())

    def pooled_correlations(self):
        return np.arange(3), lambda eta: self.unit


@pytest.mark.parametrize("equal", [True, False])
def test_correlation_pooling_tightens_equal_ratios_and_leaves_unequal_ones(equal):
    """Statistics 0.5 times their scales 1 : 2 : 4 (one correlation on unequal scales)
    are pulled towards that ratio; ratios 0.1 : 0.5 : 0.9 keep their estimates."""
    from skdpvi.noise_aware.statistics_fit import _shrinkage_fit

    rng = np.random.default_rng(5)
    unit = _PooledCorrelations.unit
    ratio = np.full(3, 0.5) if equal else np.r_[0.1, 0.5, 0.9]
    truth = np.r_[ratio * unit, 5.0]
    noise = np.r_[0.1 * unit, 1.0]
    P = np.diag(1.0 / noise**2)
    observed = truth + rng.normal(0.0, noise)
    fit, prior, _, _ = _shrinkage_fit(_PooledCorrelations(), P, h=P @ observed)
    estimated = fit.mean[:3] / unit
    if equal:
        assert prior is not None
        assert np.ptp(estimated) < 0.3 * np.ptp(observed[:3] / unit)
        np.testing.assert_allclose(estimated.mean(), 0.5, atol=0.1)
    else:
        np.testing.assert_allclose(estimated, observed[:3] / unit, atol=0.05)
    np.testing.assert_allclose(fit.mean[3], observed[3], rtol=1e-6)


@pytest.mark.parametrize("equal", [True, False])
def test_pooling_tightens_equal_statistics_and_leaves_unequal_ones(equal):
    """Three statistics observed with 20 % noise: equal ones are pulled together (their
    contrasts' posterior sd falls well below the noise, their mean stays), unequal
    ones (1 : 2 : 3) choose a loose tau and keep their own estimates."""
    from skdpvi.noise_aware.statistics_fit import _shrinkage_fit

    rng = np.random.default_rng(8)
    truth = np.r_[100.0, 100.0, 100.0, 5.0] if equal else np.r_[50.0, 100.0, 150.0, 5.0]
    noise = np.r_[20.0, 20.0, 20.0, 1.0]
    P = np.diag(1.0 / noise**2)
    observed = truth + rng.normal(0.0, noise)
    h = P @ observed
    fit, prior, _, _ = _shrinkage_fit(_PooledStatistics(), P, h)
    cov = fit.covs[0]
    contrast = np.array([1.0, -1.0, 0.0, 0.0])
    sd_contrast = np.sqrt(contrast @ cov @ contrast)
    if equal:
        assert prior is not None
        assert sd_contrast < 0.3 * np.sqrt(2) * 20.0
        np.testing.assert_allclose(fit.mean[:3].mean(), observed[:3].mean(), rtol=1e-6)
        assert np.ptp(fit.mean[:3]) < 0.3 * np.ptp(observed[:3])
    else:
        assert sd_contrast > 0.8 * np.sqrt(2) * 20.0
        np.testing.assert_allclose(fit.mean[:3], observed[:3], atol=0.25 * 20.0)
    np.testing.assert_allclose(fit.mean[3], observed[3], rtol=1e-6)


def test_linear_model_pools_the_features_diagonal_and_their_correlations():
    st = LinearRegressionModel(3).data_statistics(250)
    names = np.array(st.statistic_names)[st.pooled_statistics()]
    assert sorted(names) == ["XtX[0,0]", "XtX[1,1]", "XtX[2,2]"]
    index, scale = st.pooled_correlations()
    names = np.array(st.statistic_names)[index]
    assert sorted(names) == ["XtX[1,0]", "XtX[2,0]", "XtX[2,1]"]  # not the intercept's
    eta = np.zeros(st.n_statistics)
    eta[st.diagonal] = [4.0, 9.0, 1.0, 250.0]
    np.testing.assert_allclose(sorted(scale(eta)), sorted([6.0, 2.0, 3.0]))
    st.pool_diagonal = st.pool_correlations = False
    assert len(st.pooled_statistics()) == 0 and len(st.pooled_correlations()[0]) == 0


def test_negligible_grid_points_keep_no_covariance(monkeypatch):
    """Grid points far below the best marginal likelihood drop their covariance and get
    weight 0 (memory: the nested grid at 40 features); the mixture is unchanged."""
    import skdpvi.noise_aware.statistics_fit as statistics_fit

    rng = np.random.default_rng(3)
    k = 6
    truth = np.r_[np.full(3, 30.0), np.zeros(3)]
    P = np.eye(k) * 100.0
    h = P @ (truth + rng.normal(0, 0.1, k))
    index, scale, labels = np.arange(k), np.full(k, 10.0), np.r_[np.zeros(3), np.ones(3)]
    fit = StatisticsFit(P, h, index, scale, labels=labels)
    dropped = np.array([c is None for c in fit.covs])
    assert dropped.any() and not dropped.all()
    assert np.all(fit.weights[dropped] == 0.0)
    assert np.all(fit.log_marginal[dropped] < fit.log_marginal.max() - 35.0)
    np.testing.assert_allclose(fit.weights.sum(), 1.0)
    draws = fit.sample(200, np.random.default_rng(0))
    assert np.all(np.isfinite(draws))
    monkeypatch.setattr(statistics_fit, "_NEGLIGIBLE_LOG_WEIGHT", np.inf)
    kept = StatisticsFit(P, h, index, scale, labels=labels)
    assert all(c is not None for c in kept.covs)
    np.testing.assert_allclose(fit.weights, kept.weights, atol=1e-14)
    np.testing.assert_allclose(fit.mean, kept.mean, rtol=1e-12)


def test_prior_predictive_in_chunks_equals_one_call(monkeypatch):
    """The sampler evaluates the prior predictive in chunks (bounded memory): the same
    values as one call, in the same order."""
    import skdpvi.noise_aware.statistics_sampling as sampling

    st = LinearRegressionModel(3).data_statistics(500)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3))
    y = X @ [0.5, -1.0, 0.2] + rng.normal(0, 0.3, 500)
    Xa = np.c_[X, np.ones(500)]
    truth = np.r_[(Xa.T @ Xa)[np.tril_indices(4)], Xa.T @ y, y @ y]
    etas = truth * (1 + 0.01 * rng.standard_normal((50, len(truth))))
    whole = st.log_prior(etas)
    assert np.isfinite(whole).sum() > 40
    monkeypatch.setattr(sampling, "_LOG_PRIOR_CHUNK", 7)
    np.testing.assert_array_equal(sampling._log_prior(st, etas), whole)


def _shifted_trace(at, seed=5):
    """A trace whose b statistics move by 40 at step ``at`` of 4,000."""
    st = LogisticRegressionModel(2).data_statistics(1000)
    rng = np.random.default_rng(seed)
    eta = _true_logistic_eta(st, rng)
    shift = np.zeros_like(eta)
    shift[st.n_vech:] = 40.0
    phi, grads = _synthetic_trace(st, eta, rng)
    J, r = st.design(phi[:-1])
    grads[at:] += KAPPA * np.einsum("tdk,k->td", J[at:], shift)
    return st, eta, shift, _result(phi, grads)


def test_settle_fits_the_later_window_where_the_recorded_one_did_not_settle():
    """Statistics that move at step 2,000 of 4,000: the recorded window's halves
    disagree, the last half agrees with itself; the posterior is fitted there (the
    warning says so) and recovers the moved statistics, which the whole window's fit
    misses."""
    st, eta, shift, result = _shifted_trace(2000)
    with pytest.warns(ConvergenceWarning, match="from step 2000 on, where they agree") as w:
        _, diag = statistics_posterior(result, st, 200, random_state=0)
    assert w[0].filename == __file__  # points at the caller
    assert diag["window_start"] == 2000
    assert diag["recorded_window_p_value"] < 1e-3 <= diag["split_p_value"]
    b = slice(st.n_vech, None)
    moved = eta[b] + shift[b]
    assert np.max(np.abs(diag["eta_mean"][b] - moved)) < 10.0
    with pytest.warns(ConvergenceWarning, match="do not follow"):
        _, whole = statistics_posterior(result, st, 200, random_state=0, settle=False)
    assert whole["window_start"] == 0 and "recorded_window_p_value" not in whole
    assert np.max(np.abs(whole["eta_mean"][b] - moved)) > 15.0


def test_settle_still_warns_where_no_later_window_settles():
    """A move in the last eighth of the trace: every window tried straddles it."""
    st, _, _, result = _shifted_trace(3500)
    with pytest.warns(ConvergenceWarning, match="do not follow") as caught:
        _, diag = statistics_posterior(result, st, 200, random_state=0)
    unsettled = [w for w in caught if "do not follow" in str(w.message)]
    assert len(unsettled) == 1 and unsettled[0].filename == __file__  # at the caller
    assert diag["split_p_value"] < 1e-3
    assert diag["window_start"] in (0, 1000, 2000, 3000)
    if diag["window_start"]:  # a later window only where it was rejected less
        assert diag["recorded_window_p_value"] < diag["split_p_value"]
    else:
        assert "recorded_window_p_value" not in diag


def test_settled_trace_keeps_the_recorded_window():
    st = LogisticRegressionModel(2).data_statistics(1000)
    rng = np.random.default_rng(11)
    phi, grads = _synthetic_trace(st, _true_logistic_eta(st, rng), rng)
    _, diag = statistics_posterior(_result(phi, grads), st, 200, random_state=0)
    _, fixed = statistics_posterior(_result(phi, grads), st, 200, random_state=0, settle=False)
    assert diag["window_start"] == 0 and "recorded_window_p_value" not in diag
    np.testing.assert_array_equal(diag["eta_mean"], fixed["eta_mean"])


def test_with_window_recomputes_the_window_statistics_from_the_trace():
    st = LogisticRegressionModel(2).data_statistics(1000)
    rng = np.random.default_rng(3)
    phi, grads = _synthetic_trace(st, _true_logistic_eta(st, rng), rng, n_steps=400)
    result = _result(phi, grads)
    assert result.with_window(0) is result
    later = result.with_window(100)
    assert later.burn_in == 100 and later.stats.count == 300
    expected = TraceStatistics.from_trace(phi, grads, 100)
    np.testing.assert_allclose(later.stats.sum_gx, expected.sum_gx)
    np.testing.assert_array_equal(later.trace_phi, result.trace_phi)
    with pytest.raises(ValueError, match="start must be in"):
        result.with_window(398)
    bare = DPVIResult(**{**result.__dict__, "trace_phi": None, "trace_grad": None})
    with pytest.raises(ValueError, match="recorded trace"):
        bare.with_window(100)


def test_the_split_check_of_a_window_is_computed_once():
    """settled_window and the posterior's diagnostics share one check per window (its
    three inversions are of a matrix of the statistics' size, about 1,900 square at
    60 features; not timed)."""
    from skdpvi.noise_aware.statistics import _window_fit
    from skdpvi.noise_aware.statistics_window import split_check

    st, _, _, result = _shifted_trace(2000)
    window = _window_fit(st, result, 0)
    first = split_check(window)
    assert split_check(window) is first and window["check"] is first
    assert first["split_p_value"] < 1e-3


def test_equicorrelated_features_keep_their_correlation_in_the_release_posterior():
    """Six features with correlation 0.9: the statistics posterior's X^T X keeps the
    common correlation and little spread around it (without the correlations' pooling
    the same fit read them as 0.38 +- 0.19, and the small eigenvalues of X^T X spread
    over 0.09-1.2 times N where all five are 0.1 N)."""
    from skdpvi import DPBayesianLinearRegression

    rng = np.random.default_rng(0)
    n, d = 3000, 6
    X = np.sqrt(0.1) * rng.standard_normal((n, d)) + np.sqrt(0.9) * rng.standard_normal((n, 1))
    y = X @ rng.normal(0.0, 0.5, d) + rng.normal(0.0, 0.5, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DPBayesianLinearRegression(epsilon=0.5, max_iter=3000, random_state=1).fit(X, y)
    rows, cols = np.tril_indices(d + 1)
    M = np.zeros((d + 1, d + 1))
    M[rows, cols] = est.inference_diagnostics_["eta_mean"][:len(rows)]
    features = (M + np.tril(M, -1).T)[:d, :d]
    scale = np.sqrt(np.diag(features))
    correlations = (features / np.outer(scale, scale))[np.tril_indices(d, -1)]
    assert abs(correlations.mean() - 0.9) < 0.05
    assert correlations.std() < 0.1


@pytest.mark.parametrize("free", [slice(None), slice(0, 3)])
def test_the_grid_takes_the_normaliser_of_shrinkage_and_pooling_together(free):
    """The log normaliser of ``N(0, diag(1 / (gamma s)^2))`` times the pooling prior
    ``exp(-c/2 u^T W C W u)``: the closed form (one gamma for the whole group) and the
    partial group (two entries fixed at 0) against the determinant itself."""
    from skdpvi.noise_aware.statistics_pooling import log_normaliser

    m, c, gamma = 5, 7.0, 0.3
    unit = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    shrunk = np.arange(m)[free]
    prior = np.zeros(m)
    prior[shrunk] = 1.0 / (gamma * unit[shrunk]) ** 2
    shape = (np.eye(m) - 1.0 / m) / np.outer(unit, unit)
    block = np.diag(prior[shrunk]) + c * shape[np.ix_(shrunk, shrunk)]
    np.testing.assert_allclose(log_normaliser(prior, shrunk, [(np.arange(m), unit, c)]),
                               0.5 * np.linalg.slogdet(block)[1], rtol=1e-12)


def test_pooled_correlations_with_no_valid_draw_are_dropped(monkeypatch):
    """Where the pooled fit leaves no draw inside the model's support, the fit without
    the correlations' pooling is used (and says so); a fit that pools is marked "on"."""
    import skdpvi.noise_aware.statistics as statistics_module
    from skdpvi.noise_aware.statistics_sampling import NoValidDraws

    rng = np.random.default_rng(0)
    n = 400
    X = rng.normal(size=(n, 3))
    y = X @ [0.8, -0.5, 0.2] + 0.3 + rng.normal(0, 0.4, n)
    model = LinearRegressionModel(3)
    result = run_dpvi(model, (X, y), noise_multiplier=1.0, clip_norm=5.0, sampling_rate=0.2,
                      n_steps=600, burn_in=120, random_state=0, record_trace=True)
    _, diagnostics = statistics_posterior(result, model.data_statistics(n), 100,
                                          random_state=0, check=False)
    assert diagnostics["correlation_pooling"] == "on"
    real = statistics_module._resample_or_explain
    pooled_fits = []

    def no_draw_when_pooled(data_statistics, regression, *args, **kwargs):
        fit = regression["fit"]
        off = data_statistics.pooled_correlations()[0]
        if fit.pooling is not None and np.any(fit.pooling[np.ix_(off, off)]):
            pooled_fits.append(fit)
            raise NoValidDraws("every residual sum of squares negative")
        return real(data_statistics, regression, *args, **kwargs)

    monkeypatch.setattr(statistics_module, "_resample_or_explain", no_draw_when_pooled)
    components, diagnostics = statistics_posterior(result, model.data_statistics(n), 100,
                                                   random_state=0, check=False)
    assert pooled_fits and diagnostics["correlation_pooling"] == "dropped"
    assert components.n_components == 100
