"""DPBayesianLogisticRegression(variational_family="full_rank")."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from skdpvi import DPBayesianLogisticRegression
from skdpvi.dpvi import FullRankRelease
from skdpvi.metrics import run_tarp_study


def _data(seed=0, n=600):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ [1.0, -1.0, 0.5] + 0.3)))).astype(int)
    return X, y


def _estimator(**params):
    params = {"max_iter": 300, **params}
    return DPBayesianLogisticRegression(variational_family="full_rank", random_state=0,
                                        **params)


def test_fit_predict_and_reproducible():
    X, y = _data()
    est = _estimator().fit(X, y)
    assert isinstance(est.dpvi_result_, FullRankRelease)
    assert est.posterior_.method == "full_rank"
    assert est.error_model_ is None and est.wander_correction_ == "probit"
    assert est.inference_diagnostics_["wander_width"] >= 0
    assert est.epsilon_ <= 1.0 and est.clip_norm_ > 0
    assert est.predict_proba(X[:4]).shape == (4, 2)
    assert est.sample_posterior(7).shape == (7, 4)
    assert len(est.dpvi_result_.phi) == 2 * 4 + 6
    again = _estimator().fit(X, y)
    np.testing.assert_array_equal(again.coef_, est.coef_)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).predict_proba(X[:4]),
                                  est.predict_proba(X[:4]))
    assert clone(est).get_params()["variational_family"] == "full_rank"


@pytest.mark.parametrize("params, name", [
    (dict(variational_family="full"), "variational_family"),
    (dict(variational_family="full_rank", inference="emcee"), "inference"),
    (dict(variational_family="full_rank", error_model="dense"), "error_model"),
    (dict(variational_family="full_rank", wander_correction="probit", fit_intercept=False),
     "fit_intercept"),
    (dict(variational_family="full_rank", decorrelation=0.1), "decorrelation"),
])
def test_unsupported_combinations_name_the_parameter(params, name):
    X, y = _data()
    with pytest.raises(ValueError, match=name):
        DPBayesianLogisticRegression(max_iter=50, **params).fit(X, y)


def test_onehot_blocks_take_the_prior_along_their_flat_direction():
    rng = np.random.default_rng(1)
    n = 800
    onehot = np.eye(3)[rng.integers(3, size=n)]
    X = np.c_[rng.standard_normal((n, 1)), onehot]
    y = (rng.random(n) < 0.5).astype(int)
    est = _estimator(onehot_blocks=[[1, 2, 3]], prior_scale=2.0).fit(X, y)
    flat = np.r_[0.0, 1.0, 1.0, 1.0, -1.0] / 2.0
    draws = est.sample_posterior(4000, random_state=0)
    assert abs(np.std(draws @ flat) / 2.0 - 1) < 0.05


def test_tarp_study_in_lockstep_equals_the_study_fit_one_by_one():
    X, y = _data()
    assert _estimator()._batch_fit_supported()

    def simulator(rng):
        return np.zeros(4), X[rng.permutation(len(X))], y

    kw = dict(n_simulations=3, n_draws=20, random_state=0, n_jobs=1, alpha_grid=[0.5, 0.9])
    study = run_tarp_study(_estimator(), simulator, **kw)
    assert study.samples.shape == (3, 20, 4) and np.all(np.isfinite(study.samples))
    one_by_one = run_tarp_study(_estimator(), simulator, batch_size=1, **kw)
    np.testing.assert_allclose(one_by_one.samples, study.samples, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("params, shape, family", [
    ({}, (600, 3), "full_rank"),                          # the default, small and cheap
    ({}, (600, 13), "mean_field"),                        # 14 parameters
    ({}, (50_000, 10), "mean_field"),                     # 0.1 * 5e4 * 11^2 > 5e5
    ({}, (20_000, 12), "full_rank"),                      # 0.1 * 2e4 * 13^2 <= 5e5
    ({}, (40_000, 12), "mean_field"),                     # 0.1 * 4e4 * 13^2 > 5e5
    ({"fit_intercept": False}, (600, 13), "full_rank"),   # 13 parameters
    ({"error_model": "dense"}, (600, 3), "mean_field"),   # mean-field options set
    ({"inference": "emcee"}, (600, 3), "mean_field"),
    ({"decorrelation": 0.1}, (600, 3), "mean_field"),
    ({"elbo_gradients": "closed_form"}, (600, 3), "full_rank"),  # both families have it
    ({"variational_family": "mean_field"}, (600, 3), "mean_field"),
    ({"variational_family": "full_rank"}, (600, 30), "full_rank"),
    # too short for the scales: 2 x 0.1 x sqrt(T) relaxations, "auto" needs 16
    ({"max_iter": 6000}, (600, 3), "mean_field"),          # 15.5
    ({"max_iter": 6500}, (600, 3), "full_rank"),           # 16.1
    ({"max_iter": 300, "sampling_rate": 0.5}, (600, 3), "full_rank"),   # 17.3
    ({"sampling_rate": 0.05}, (600, 3), "mean_field"),     # 10
    ({"max_iter": 300, "sampling_rate": 0.5, "learning_rate": 1e-3,
      "scale_preconditioning": 10.0}, (600, 3), "mean_field"),         # 3
    ({"max_iter": 300, "scale_preconditioning": 10.0}, (600, 3), "full_rank"),  # unknown
    # few rows at a small budget: the preconditioner's cap slows the scales (2.6,
    # 15.8 and 20 relaxations)
    ({"epsilon": 0.1}, (500, 5), "mean_field"),
    ({"epsilon": 0.3}, (1000, 4), "mean_field"),
    ({"epsilon": 1.0}, (500, 5), "full_rank"),
    # a prior wider than 1: measured too narrow there
    ({"prior_scale": 1.5}, (600, 3), "mean_field"),
    ({"prior_scale": 1.0}, (600, 3), "full_rank"),
    ({"prior_scale": 0.5}, (600, 3), "full_rank"),
    ({"prior_scale": -1.0}, (600, 3), "mean_field"),  # the fit names it
])
def test_auto_family_follows_the_public_shape_and_options(params, shape, family):
    est = DPBayesianLogisticRegression(**params)
    assert est.variational_family == params.get("variational_family", "auto")
    assert est._family_for(np.zeros(shape)) == family


def test_closed_form_gradients_reach_the_full_rank_engine(monkeypatch):
    from skdpvi.linear_model import _logistic_full_rank
    seen = []
    engine = _logistic_full_rank.run_dpvi_full_rank

    def spy(*args, **kwargs):
        seen.append(kwargs["elbo_gradients"])
        return engine(*args, **kwargs)

    monkeypatch.setattr(_logistic_full_rank, "run_dpvi_full_rank", spy)
    X, y = _data()
    # explicit (300 steps are too few for "auto"'s full rank, which the family test
    # checks with elbo_gradients="closed_form"); the short run's warning is not the point
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fits = [_estimator(elbo_gradients=kind).fit(X, y)
                for kind in ("closed_form", "monte_carlo")]
    assert seen == ["closed_form", "monte_carlo"]
    assert all(est.variational_family_ == "full_rank" for est in fits)
    # the same subsamples and noise, different gradients: close, not equal
    assert not np.array_equal(fits[0].coef_, fits[1].coef_)
    np.testing.assert_allclose(fits[0].coef_, fits[1].coef_, atol=0.5)


def test_auto_fits_record_the_family_and_equal_the_explicit_one():
    X, y = _data()
    kw = dict(max_iter=200, sampling_rate=0.6, random_state=0)  # 17 scale relaxations
    auto = DPBayesianLogisticRegression(**kw).fit(X, y)
    assert auto.variational_family_ == "full_rank"
    np.testing.assert_array_equal(
        auto.sample_posterior(5, random_state=1),
        _estimator(max_iter=200, sampling_rate=0.6).fit(X, y).sample_posterior(5, random_state=1))
    emcee = DPBayesianLogisticRegression(inference="emcee", **kw).fit(X, y)
    assert emcee.variational_family_ == "mean_field"
    assert not isinstance(emcee.dpvi_result_, FullRankRelease)


def test_auto_batch_fits_equal_their_own_fits_whichever_family():
    # "auto" sends each data set to its family's lockstep engine (full-rank runs of
    # one shape together, the rest through the mean-field one); either way each fit
    # equals its own fit, posterior draws included
    X, y = _data()
    rng = np.random.default_rng(2)
    wide = rng.standard_normal((600, 14))
    y_wide = (wide[:, 0] > 0).astype(int)
    X2 = rng.standard_normal(X.shape)
    y2 = (X2[:, 0] + rng.standard_normal(len(X2)) > 0).astype(int)
    auto = DPBayesianLogisticRegression(max_iter=200, sampling_rate=0.6, random_state=0)
    assert auto._batch_fit_supported()
    for datasets in ([(wide, y_wide), (wide[::-1], y_wide[::-1])],
                     [(X, y), (wide, y_wide), (X2, y2), (X[::-1], y[::-1])]):
        seeds = list(range(3, 3 + len(datasets)))
        batch = auto._fit_batch(datasets, seeds)
        for est, (Xk, yk), seed in zip(batch, datasets, seeds):
            own = clone(auto).set_params(random_state=seed).fit(Xk, yk)
            assert est.variational_family_ == own.variational_family_
            assert est.dpvi_result_.clip_norm == own.dpvi_result_.clip_norm
            np.testing.assert_allclose(est.coef_, own.coef_, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(est.sample_posterior(20, random_state=1),
                                       own.sample_posterior(20, random_state=1),
                                       rtol=1e-5, atol=1e-6)


def test_tarp_study_of_the_full_rank_default_runs_in_lockstep(monkeypatch):
    # run_tarp_study hands a task's simulations to _fit_batch, which runs their
    # full-rank DP-SGD together (one engine call for the four data sets)
    from skdpvi.linear_model import _logistic_full_rank
    from skdpvi.metrics import run_tarp_study

    calls = []
    engine = _logistic_full_rank.run_dpvi_full_rank_batched

    def counted(datasets, **kw):
        calls.append(len(datasets))
        return engine(datasets, **kw)

    monkeypatch.setattr(_logistic_full_rank, "run_dpvi_full_rank_batched", counted)

    def simulate(rng):
        theta = rng.standard_normal(3)
        X = rng.standard_normal((400, 2))
        p = 1 / (1 + np.exp(-(X @ theta[:2] + theta[2])))
        return theta, X, (rng.random(400) < p).astype(int)

    est = DPBayesianLogisticRegression(max_iter=200, sampling_rate=0.6, n_posterior_samples=50)
    res = run_tarp_study(est, simulate, n_simulations=4, n_draws=50, random_state=0,
                         batch_size=4, alpha_grid=[0.5, 0.9])
    assert calls == [4]
    assert res.samples.shape == (4, 50, 3)


def test_full_rank_fit_runs_the_split_window_check_and_the_scale_check():
    X, y = _data()
    est = _estimator(max_iter=4000).fit(X, y)  # (300 steps read the scales up to 2.2)
    stats = est.dpvi_result_.mean_stats
    assert stats.count == est.dpvi_result_.count == sum(h.count for h in stats.halves)
    np.testing.assert_allclose(stats.shift + stats.sum_x / stats.count,
                               est.dpvi_result_.mean_phi[:4])
    np.testing.assert_allclose(stats.sum_g / stats.count, est.dpvi_result_.mean_gradient)
    np.testing.assert_allclose(stats.wander_covariance() * (stats.count - 1) / stats.count,
                               est.dpvi_result_.wander_covariance, atol=1e-12)
    assert 0 <= est.inference_diagnostics_["split_p_value"] <= 1
    assert np.all(np.abs(est.inference_diagnostics_["feature_scales"] - 1) < 0.5)


def test_scale_relaxations_are_two_kappa_sqrt_t_at_the_default_preconditioning():
    from skdpvi.linear_model._logistic_release_checks import (planned_scale_relaxations,
                                                              scale_relaxations)
    X, _ = _data()
    for max_iter, rate in ((300, 0.1), (2_000, 0.3), (10_000, 0.1)):
        est = DPBayesianLogisticRegression(max_iter=max_iter, sampling_rate=rate)
        engine = est._engine_settings(*X.shape, X=X, seed=0).engine
        expected = 2 * rate * np.sqrt(max_iter)
        assert scale_relaxations(engine) == pytest.approx(expected, rel=1e-9)
        assert planned_scale_relaxations(rate, max_iter, "auto", "auto") == pytest.approx(expected)
    assert planned_scale_relaxations(0.1, 100, "auto", 5.0) is None
    assert planned_scale_relaxations(0.1, 100, 0.01, 5.0) == pytest.approx(2 * 0.1 * 100 * 0.05)


@pytest.mark.parametrize("clip_norm", ["auto", 3.0])
def test_the_planned_count_with_the_cap_is_the_runs_whatever_the_clipping_norm(clip_norm):
    # 500 rows at epsilon 0.1: the preconditioner's cap binds; the capped step is
    # known before the (private) clipping norm, and is the run's
    from skdpvi.linear_model._logistic_release_checks import (planned_scale_relaxations,
                                                              scale_relaxations)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 5))
    est = DPBayesianLogisticRegression(epsilon=0.1, clip_norm=clip_norm)
    engine = est._engine_settings(*X.shape, X=X, seed=0).engine
    planned = planned_scale_relaxations(0.1, 10_000, "auto", "auto",
                                        est._capped_scale_step(*X.shape))
    assert scale_relaxations(engine) == pytest.approx(planned, rel=1e-9)
    assert planned == pytest.approx(2.6, abs=0.1)


def test_runs_too_short_for_the_scales_warn_and_record_the_count():
    X, y = _data()
    with pytest.warns(ConvergenceWarning, match="below the 16 the full-rank posterior"):
        est = _estimator(max_iter=300).fit(X, y)  # 3.5 relaxations
    assert est.inference_diagnostics_["scale_relaxations"] == pytest.approx(0.2 * np.sqrt(300))
    with pytest.warns(ConvergenceWarning, match="below the 1.5 the mean-field posterior"):
        DPBayesianLogisticRegression(max_iter=20, random_state=0).fit(X, y)  # 0.9
    # long enough for either: no such warning
    for est in (_estimator(max_iter=200, sampling_rate=0.6),
                DPBayesianLogisticRegression(max_iter=300, variational_family="mean_field")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.set_params(random_state=0).fit(X, y)
        assert not [w for w in caught if "relax" in str(w.message)]


def test_explicit_full_rank_with_a_wide_prior_warns():
    X, y = _data()
    est = _estimator(max_iter=200, sampling_rate=0.6, prior_scale=2.0)
    with pytest.warns(ConvergenceWarning, match="prior_scale=2: with coefficients drawn from"):
        est.fit(X, y)
    for prior_scale in (0.5, 1.0):  # where "auto" fits the full rank itself: no warning
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.set_params(prior_scale=prior_scale, random_state=0).fit(X, y)
        assert not [w for w in caught if "prior_scale=" in str(w.message)]
