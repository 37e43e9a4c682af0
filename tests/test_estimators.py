import math
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdpvi import DPBayesianLinearRegression, DPBayesianLogisticRegression
from skdpvi.exceptions import IdentifiabilityWarning
from skdpvi.linear_model._logistic_dense import DENSE_MODELS

FAST = dict(max_iter=150, n_posterior_samples=50, inference="exact", sampling_rate=0.5,
            epsilon=5.0, random_state=0)


@parametrize_with_checks([DPBayesianLinearRegression(**FAST),
                          DPBayesianLogisticRegression(**FAST),
                          DPBayesianLogisticRegression(**FAST, decorrelation=0.2)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def clf_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = (X @ [1.5, -1.0, 0.5] + rng.logistic(size=600) > 0).astype(int)
    return X, y


@pytest.fixture(scope="module")
def reg_data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 3))
    y = X @ [0.4, -0.3, 0.2] + 0.1 + rng.normal(0, 0.15, 600)
    return X, y


QUICK = dict(max_iter=300, n_posterior_samples=200, inference="exact", epsilon=2.0)


def test_fitted_attributes(clf_data, reg_data):
    clf = DPBayesianLogisticRegression(**QUICK, random_state=0).fit(*clf_data)
    assert clf.coef_.shape == (3,) and isinstance(clf.intercept_, float)
    assert clf.epsilon_ <= 2.0 and clf.epsilon_ >= 0.995 * 2.0 and clf.delta_ == 1e-5
    assert clf.noise_multiplier_ > 0 and clf.n_iter_ == 300 and clf.burn_in_ == 60
    assert list(clf.param_names_) == ["coef[0]", "coef[1]", "coef[2]", "intercept"]
    np.testing.assert_array_equal(clf.classes_, [0, 1])
    assert np.sign(clf.coef_[0]) == 1 and np.sign(clf.coef_[1]) == -1
    reg = DPBayesianLinearRegression(**QUICK, random_state=0).fit(*reg_data)
    assert list(reg.param_names_)[-2:] == ["intercept", "noise_variance"]
    assert reg.sample_posterior(7).shape == (7, 5)
    assert np.all(reg.sample_posterior(100)[:, -1] > 0)
    assert reg.sample_posterior(5, unconstrained=True).shape == (5, 5)
    assert reg.noise_variance_ > 0


def test_predictions(clf_data, reg_data):
    X, y = clf_data
    clf = DPBayesianLogisticRegression(**QUICK, random_state=0).fit(X, np.where(y, "yes", "no"))
    proba = clf.predict_proba(X)
    assert proba.shape == (600, 2)
    np.testing.assert_allclose(proba.sum(1), 1)
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X)), proba, rtol=1e-10)
    assert set(clf.predict(X)) <= {"yes", "no"}
    np.testing.assert_array_equal(clf.predict(X) == "yes", clf.decision_function(X) > 0)
    assert clf.score(X, np.where(y, "yes", "no")) > 0.7

    X, y = reg_data
    reg = DPBayesianLinearRegression(**QUICK, random_state=0).fit(X, y)
    mean, std = reg.predict(X, return_std=True)
    np.testing.assert_array_equal(mean, reg.predict(X))
    assert np.all(std > 0)
    draws = reg.sample_y(X[:5], n_samples=4000, random_state=0)
    assert draws.shape == (5, 4000)
    np.testing.assert_allclose(draws.mean(1), mean[:5], atol=4 * std.max() / np.sqrt(4000) + 0.01)
    np.testing.assert_allclose(draws.std(1), std[:5], rtol=0.1)
    assert reg.sample_y(X[:2]).shape == (2, 1)


def test_random_state_reproducibility(clf_data):
    a = DPBayesianLogisticRegression(**QUICK, random_state=5).fit(*clf_data)
    b = DPBayesianLogisticRegression(**QUICK, random_state=5).fit(*clf_data)
    c = DPBayesianLogisticRegression(**QUICK, random_state=6).fit(*clf_data)
    np.testing.assert_array_equal(a.predict_proba(clf_data[0]), b.predict_proba(clf_data[0]))
    np.testing.assert_array_equal(a.sample_posterior(10, random_state=0),
                                  b.sample_posterior(10, random_state=0))
    assert not np.array_equal(a.coef_, c.coef_)


def test_clone_pipeline_cross_validation(clf_data):
    est = DPBayesianLogisticRegression(**QUICK, random_state=0)
    cloned = clone(est)
    assert cloned.get_params() == est.get_params()
    pipe = make_pipeline(StandardScaler(), est)
    scores = cross_val_score(pipe, *clf_data, cv=3)
    assert scores.shape == (3,) and np.all(scores > 0.6)


def test_grid_search_serial_and_parallel_agree(reg_data):
    grid = {"epsilon": [1.0, 3.0], "clip_norm": [5.0, 20.0]}
    est = DPBayesianLinearRegression(**{**QUICK, "max_iter": 200}, random_state=0)
    serial = GridSearchCV(est, grid, cv=2, n_jobs=1).fit(*reg_data)
    parallel = GridSearchCV(est, grid, cv=2, n_jobs=2).fit(*reg_data)
    # equal up to float32 reduction order (workers run torch with fewer threads)
    np.testing.assert_allclose(serial.cv_results_["mean_test_score"],
                               parallel.cv_results_["mean_test_score"], rtol=1e-5)
    assert serial.best_params_ == parallel.best_params_
    # the whole search is accounted: 4 candidates x 2 folds + the refit
    from skdpvi.accounting import compose_epsilon, noise_multiplier, total_privacy_spent

    eps_total, delta_total = total_privacy_spent(serial)
    best = serial.best_estimator_
    assert delta_total == pytest.approx(9e-5)
    assert eps_total > 2 * best.epsilon_
    fits = [(noise_multiplier(p["epsilon"], 1e-5, 0.1, 200)[0], 0.1, 200)
            for p in serial.cv_results_["params"]]
    assert eps_total == pytest.approx(
        compose_epsilon(fits * 2 + [(best.noise_multiplier_, 0.1, 200)], 9e-5), rel=1e-6)


def test_predictions_follow_the_fitted_intercept_not_a_later_set_params(clf_data, reg_data):
    X, y = reg_data
    reg = DPBayesianLinearRegression(**QUICK, random_state=0).fit(X, y + 1.0)
    before = reg.predict(X[:5])
    reg.set_params(fit_intercept=False)
    np.testing.assert_array_equal(reg.predict(X[:5]), before)
    clf = DPBayesianLogisticRegression(**QUICK, fit_intercept=False, random_state=0).fit(*clf_data)
    before = clf.predict_proba(clf_data[0][:5])
    clf.set_params(fit_intercept=True)  # was an IndexError
    np.testing.assert_array_equal(clf.predict_proba(clf_data[0][:5]), before)


def test_sampling_takes_a_numpy_generator(reg_data):
    reg = DPBayesianLinearRegression(**QUICK, random_state=0).fit(*reg_data)
    draws = reg.sample_posterior(5, random_state=np.random.default_rng(3))
    np.testing.assert_array_equal(draws, reg.sample_posterior(5, random_state=np.random.default_rng(3)))
    assert reg.sample_y(reg_data[0][:4], 2, random_state=np.random.default_rng(3)).shape == (4, 2)


def test_a_diverged_linear_run_says_so(reg_data):
    # was scipy's "array must not contain infs or NaNs" from the step matrix inside the loop
    with pytest.raises(ValueError, match="diverged"):
        DPBayesianLinearRegression(max_iter=300, learning_rate=1.0, random_state=0).fit(*reg_data)


def test_pickle_round_trip(reg_data):
    reg = DPBayesianLinearRegression(**QUICK, random_state=0).fit(*reg_data)
    restored = pickle.loads(pickle.dumps(reg))
    np.testing.assert_array_equal(restored.predict(reg_data[0]), reg.predict(reg_data[0]))
    np.testing.assert_array_equal(restored.sample_posterior(5, random_state=1),
                                  reg.sample_posterior(5, random_state=1))


def test_no_training_data_in_the_fitted_model(clf_data, reg_data):
    """Neither raw rows nor unnoised statistics may end up in the fitted object."""
    X, y = reg_data
    reg = DPBayesianLinearRegression(**QUICK, random_state=0).fit(X, y)
    blob = pickle.dumps(reg)
    # 8-byte signatures: a float64 value, or two neighbouring float32 values as a
    # stored float32 copy (the engine's working precision) would hold them. A lone
    # float32 (4 bytes) would match high words of unrelated float64s by chance.
    for value in list(X[:50].ravel()) + list(y[:50]):
        assert np.float64(value).tobytes() not in blob
    for row in X[:50]:
        assert row[:2].astype(np.float32).tobytes() not in blob
        assert row[1:3].astype(np.float32).tobytes() not in blob
    for i in range(49):
        assert y[i:i + 2].astype(np.float32).tobytes() not in blob
    for stat in (X.mean(0), X.std(0), [y.mean(), y.std()]):
        for value in stat:
            assert np.float64(value).tobytes() not in blob
    assert reg.dpvi_result_.diagnostics == {}  # no clipped fraction or batch sizes
    assert not any(isinstance(v, np.ndarray) and v.shape[:1] == (len(X),)
                   for v in vars(reg).values())


@pytest.mark.parametrize("Est", [DPBayesianLinearRegression, DPBayesianLogisticRegression])
@pytest.mark.parametrize(
    "params, match",
    [
        (dict(epsilon=0), "epsilon"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(sampling_rate=0.0), "sampling_rate"),
        (dict(sampling_rate=1.2), "sampling_rate"),
        (dict(sampling_rate=0.001), "expected batch"),
        (dict(burn_in=300), "burn_in"),
        (dict(burn_in=1.5), "burn_in"),
        (dict(clip_norm=0.0), "clip_norm"),
        (dict(clip_norm=-2.0), "clip_norm"),
        (dict(inference="nuts"), "inference"),
        (dict(max_iter=0), "max_iter"),
        (dict(n_mc_samples=0), "n_mc_samples"),
        (dict(learning_rate=-1.0), "learning_rate"),
        (dict(device="foo"), "device"),
        (dict(device=3.5), "device"),
        (dict(epsilon=None), "epsilon"),
        (dict(delta=None), "delta"),
        (dict(sampling_rate=None), "sampling_rate"),
        (dict(verbose=-1), "verbose"),
        (dict(verbose="x"), "verbose"),
    ],
)
def test_bad_parameters_name_the_problem(Est, params, match, reg_data):
    X, y = reg_data
    y = (y > 0).astype(int) if Est is DPBayesianLogisticRegression else y
    with pytest.raises(ValueError, match=match):
        Est(**{**QUICK, **params}).fit(X, y)


@pytest.mark.parametrize("Est", [DPBayesianLinearRegression, DPBayesianLogisticRegression])
def test_bad_data_is_rejected(Est, reg_data):
    X, y = reg_data
    y = (y > 0).astype(int) if Est is DPBayesianLogisticRegression else y
    est = Est(**QUICK)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(bad, y)
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        est.fit(bad, y)
    y_bad = y.astype(float).copy()
    y_bad[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(X, y_bad)
    with pytest.raises(ValueError, match="0 sample"):
        est.fit(X[:0], y[:0])
    with pytest.raises(ValueError, match="one sample|n_samples=1"):
        est.fit(X[:1], y[:1])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        est.fit(X, y[:-1])
    with pytest.raises(ValueError, match="could not convert|dtype"):
        est.fit(np.array([["a", "b", "c"]] * len(y), dtype=object), y)
    fitted = Est(**QUICK, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        fitted.predict(X[:, :2])


@pytest.mark.parametrize("Est", [DPBayesianLinearRegression, DPBayesianLogisticRegression])
def test_closed_form_elbo_gradients(Est, reg_data):
    X, y = reg_data
    y = (y > 0).astype(int) if Est is DPBayesianLogisticRegression else y
    with pytest.raises(ValueError, match="elbo_gradients"):
        Est(**QUICK, elbo_gradients="exact").fit(X, y)
    # the closed form is a mean-field option ("auto" would fit the full rank below)
    family = {"variational_family": "mean_field"} if Est is DPBayesianLogisticRegression else {}
    est = Est(**QUICK, **family, elbo_gradients="closed_form", random_state=3)
    assert est._engine_settings(*X.shape, X, 0).engine["model"].exact_expectations
    a = est.fit(X, y).sample_posterior(50, random_state=0)
    b = clone(est).fit(X, y).sample_posterior(50, random_state=0)
    np.testing.assert_array_equal(a, b)
    mc = clone(est).set_params(elbo_gradients="monte_carlo").fit(X, y)
    assert not np.array_equal(mc.sample_posterior(50, random_state=0), a)
    # the same subsamples and DP noise (one random stream): close, not equal
    assert np.abs(mc.coef_ - est.coef_).max() < 0.5 * a.std(0).max()
    assert not mc._engine_settings(*X.shape, X, 0).engine["model"].exact_expectations


def test_classifier_rejects_non_binary_targets(clf_data):
    X, y = clf_data
    est = DPBayesianLogisticRegression(**QUICK)
    with pytest.raises(ValueError, match="binary"):
        est.fit(X, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match="Unknown label type|continuous"):
        est.fit(X, np.linspace(0, 1, len(y)))
    with pytest.raises(ValueError, match="class"):
        est.fit(X, np.ones(len(y)))


def test_sample_weight_is_not_accepted(clf_data):
    with pytest.raises(TypeError):
        DPBayesianLogisticRegression(**QUICK).fit(*clf_data, sample_weight=np.ones(600))


def test_verbose_shows_progress_and_silent_by_default(clf_data, capsys):
    DPBayesianLogisticRegression(**QUICK, random_state=0).fit(*clf_data)
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    DPBayesianLogisticRegression(**QUICK, random_state=0, verbose=1).fit(*clf_data)
    assert "DP-SGD" in capsys.readouterr().err


def test_feature_names_are_recorded(clf_data):
    pd = pytest.importorskip("pandas")
    X, y = clf_data
    frame = pd.DataFrame(X, columns=["age", "hours", "gain"])
    clf = DPBayesianLogisticRegression(**QUICK, random_state=0).fit(frame, y)
    np.testing.assert_array_equal(clf.feature_names_in_, ["age", "hours", "gain"])


@pytest.mark.parametrize("inference", ["emcee", "laplace", "last_iterate"])
def test_every_inference_backend_fits(inference, reg_data):
    reg = DPBayesianLinearRegression(**{**QUICK, "inference": inference}, random_state=0)
    reg.fit(*reg_data)
    assert reg.posterior_.method == inference
    assert np.all(np.isfinite(reg.predict(reg_data[0])))


def test_tarp_study_with_the_real_estimator():
    from skdpvi.datasets import make_nig_linear_regression
    from skdpvi.metrics import run_tarp_study

    def simulator(rng):
        X, y, theta = make_nig_linear_regression(400, n_features=2, random_state=rng)
        return theta, X, y

    est = DPBayesianLinearRegression(epsilon=3.0, max_iter=300, inference="exact",
                                     n_posterior_samples=200)
    result = run_tarp_study(est, simulator, n_simulations=22, n_draws=200,
                            unconstrained=True, random_state=0, n_jobs=1)
    assert result.samples.shape == (22, 200, 4)
    assert np.all(result.epsilons <= 3.0)
    assert 0 <= result.rmse < 0.5


@pytest.mark.parametrize("Est", [DPBayesianLinearRegression, DPBayesianLogisticRegression])
def test_delta_of_one_over_n_or_more_warns(Est, clf_data, reg_data):
    from skdpvi.exceptions import PrivacyWarning

    X, y = clf_data if Est is DPBayesianLogisticRegression else reg_data
    with pytest.warns(PrivacyWarning, match=r"delta=0.5 >= 1 / n_samples = 1/600") as record:
        est = Est(**{**QUICK, "delta": 0.5}, random_state=0).fit(X, y)
    assert issubclass(PrivacyWarning, UserWarning)
    assert "about 300 of these 600 rows" in str(record[0].message)
    assert record[0].filename == __file__  # points at the caller's fit
    assert est.delta_ == 0.5  # a warning, not an error
    # The threshold, checked before the run starts (max_iter=0 then stops the fit,
    # so that no accountant search is spent on these budgets).
    with pytest.warns(PrivacyWarning), pytest.raises(ValueError, match="max_iter"):
        Est(**{**QUICK, "delta": 1 / 600, "max_iter": 0}).fit(X, y)
    with warnings.catch_warnings(), pytest.raises(ValueError, match="max_iter"):
        warnings.simplefilter("error", PrivacyWarning)
        Est(**{**QUICK, "delta": 0.99 / 600, "max_iter": 0}).fit(X, y)


def test_parameters_are_named_after_the_features(clf_data, reg_data):
    pd = pytest.importorskip("pandas")
    X, y = reg_data
    frame = pd.DataFrame(X, columns=["age", "hours", "gain"])
    reg = DPBayesianLinearRegression(**QUICK, random_state=0).fit(frame, y)
    names = ["coef[age]", "coef[hours]", "coef[gain]", "intercept", "noise_variance"]
    assert list(reg.param_names_) == names
    assert list(reg.posterior_.param_names) == names
    table = reg.posterior_.summary()
    assert list(table.index) == names and list(table.columns) == ["mean", "sd", "5%", "95%"]
    lo, hi = reg.posterior_.interval(0.9)
    np.testing.assert_array_equal(table["5%"], lo)
    np.testing.assert_array_equal(table["95%"], hi)
    # refitting on an array forgets the names
    reg.fit(X, y)
    assert list(reg.param_names_)[:3] == ["coef[0]", "coef[1]", "coef[2]"]
    assert reg.posterior_.param_names[0] == "coef[0]"
    clf = DPBayesianLogisticRegression(**QUICK, random_state=0, fit_intercept=False)
    clf.fit(pd.DataFrame(clf_data[0], columns=["a", "b", "c"]), clf_data[1])
    assert list(clf.param_names_) == ["coef[a]", "coef[b]", "coef[c]"]


def test_verbose_levels_print_accounting_and_post_processing(reg_data, capsys):
    DPBayesianLinearRegression(**{**QUICK, "inference": "emcee"}, random_state=0,
                               verbose=1).fit(*reg_data)
    out = capsys.readouterr().out
    assert "[skdpvi] accounting: noise multiplier sigma=" in out
    assert "certified epsilon=" in out
    assert "[skdpvi] post-processing: inference='emcee'" in out
    assert "effective_sample_size" not in out
    DPBayesianLinearRegression(**{**QUICK, "inference": "emcee"}, random_state=0,
                               verbose=2).fit(*reg_data)
    out = capsys.readouterr().out
    assert "[skdpvi] DP-SGD: 300 steps" in out and "clip norm" in out
    assert "effective_sample_size: min" in out and "acceptance_fraction" in out


def test_convergence_warning_fires_on_a_run_stopped_too_early_and_not_on_a_converged_one():
    """The split-window check of the default post-processing (released trace only): a
    run whose recording window is still in the clipped transient warns; a long run
    of the same problem does not."""
    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3))
    y = X @ [1.5, -1.2, 1.0] + rng.normal(0, 0.2, 2000)
    for seed in range(2):
        with pytest.warns(ConvergenceWarning, match="do not follow"):
            DPBayesianLinearRegression(epsilon=2.0, max_iter=200, burn_in=0,
                                       random_state=seed).fit(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            reg = DPBayesianLinearRegression(epsilon=2.0, max_iter=4000,
                                             random_state=seed).fit(X, y)
        assert reg.inference_diagnostics_["split_p_value"] > 1e-3


def test_identifiability_warning_fires_on_small_data_at_small_epsilon_and_not_otherwise():
    """150 rows at epsilon 0.03 leave the diagonal of X^T X to its prior (its relative
    sd measured 0.55-0.75 over four seeds); 5,000 rows at epsilon 1 identify it
    (0.05)."""
    from skdpvi.exceptions import IdentifiabilityWarning

    rng = np.random.default_rng(1)
    X = rng.normal(size=(5000, 5))
    y = X @ [0.3, -0.2, 0.1, 0.0, 0.2] + rng.normal(0, 0.16, 5000)
    with pytest.warns(IdentifiabilityWarning, match="identify the data's scale"):
        reg = DPBayesianLinearRegression(epsilon=0.03, max_iter=2000,
                                         random_state=1).fit(X[:150], y[:150])
    assert reg.inference_diagnostics_["scale_relative_sd"] > 0.5
    assert reg.inference_diagnostics_["smc_stages"] > 0  # and the weights were degenerate
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentifiabilityWarning)
        reg = DPBayesianLinearRegression(epsilon=1.0, max_iter=3000, random_state=0).fit(X, y)
    assert reg.inference_diagnostics_["scale_relative_sd"] < 0.2


def test_logistic_default_clip_norm_leaves_unit_scale_rows_unclipped():
    # the default C bounds the mean gradient of nearly every row of unit-scale
    # features; C = sqrt(n_params), the previous default, clipped 1.5 % of the rows
    # (the misclassified high-leverage ones), which biased |theta| outward
    from skdpvi.dpvi import run_dpvi

    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 5))
    theta = rng.standard_normal(6)
    y = (rng.random(4000) < 1 / (1 + np.exp(-(X @ theta[:-1] + theta[-1])))).astype(float)
    fractions = {}
    for clip_norm in ("auto", np.sqrt(6)):
        est = DPBayesianLogisticRegression(epsilon=1.0, max_iter=1000, clip_norm=clip_norm,
                                           random_state=0)
        settings = est._engine_settings(*X.shape, X, 0)
        result = run_dpvi(data=(X, y.astype(np.float32)), random_state=0,
                          return_diagnostics=True, **settings.engine)
        fractions[clip_norm == "auto"] = result.diagnostics["clipped_fraction"]
        if clip_norm == "auto":
            assert settings.engine["clip_norm"] == pytest.approx(2 * np.sqrt(6))
    assert fractions[True] < 1e-3 < 5e-3 < fractions[False]


@pytest.mark.parametrize("family", ["mean_field", "full_rank"])
def test_logistic_convergence_warning_fires_on_a_run_stopped_too_early(family):
    # a run stopped while the means still travel through changing curvature (no
    # burn-in, a slow step) fails the split-window test; the default run does not
    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.default_rng(0)
    X = rng.standard_normal((5000, 2))
    logits = X @ np.array([3.0, -3.0]) + 1.0
    y = (rng.random(5000) < 1 / (1 + np.exp(-logits))).astype(int)
    early = DPBayesianLogisticRegression(epsilon=10.0, max_iter=2000, burn_in=0.0,
                                         learning_rate_scale=0.3, inference="exact",
                                         variational_family=family, random_state=0)
    with pytest.warns(ConvergenceWarning, match="split-window"):
        early.fit(X, y)
    assert early.inference_diagnostics_["split_p_value"] < 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        settled = DPBayesianLogisticRegression(epsilon=10.0, inference="exact",
                                               variational_family=family,
                                               random_state=0).fit(X, y)
    assert settled.inference_diagnostics_["split_p_value"] > 1e-3


def test_logistic_coupled_error_model_changes_only_the_means_and_is_validated():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=2000, n_features=3, n_informative=3, n_redundant=0,
                               random_state=0)
    kw = dict(max_iter=800, inference="exact", n_posterior_samples=300, random_state=0)
    diag = DPBayesianLogisticRegression(error_model="diagonal", **kw).fit(X, y)
    coupled = DPBayesianLogisticRegression(error_model="coupled", **kw).fit(X, y)
    # same DP-SGD run (same release), different draws of the means only
    np.testing.assert_array_equal(diag.dpvi_result_.phi, coupled.dpvi_result_.phi)
    d, c = diag.posterior_.phi_star, coupled.posterior_.phi_star
    np.testing.assert_array_equal(d[:, 4:], c[:, 4:])
    assert not np.allclose(d[:, :4], c[:, :4])
    again = DPBayesianLogisticRegression(error_model="coupled", **kw).fit(X, y)
    np.testing.assert_array_equal(again.posterior_.phi_star, c)
    with pytest.raises(ValueError, match="error_model"):
        DPBayesianLogisticRegression(error_model="full", max_iter=50).fit(X, y)


def test_logistic_dense_error_model_gives_linear_response_components():
    from sklearn.datasets import make_classification

    from skdpvi.models.components import GaussianComponents

    # two strongly correlated features: the posterior of their coefficients is
    # negatively correlated, which mean-field components cannot show
    X, y = make_classification(n_samples=3000, n_features=2, n_informative=2, n_redundant=0,
                               random_state=0)
    X = np.c_[X[:, 0], X[:, 0] + 0.3 * X[:, 1]]
    kw = dict(max_iter=2000, n_posterior_samples=400, random_state=0,
              variational_family="mean_field")
    diag = DPBayesianLogisticRegression(error_model="diagonal", **kw).fit(X, y)
    dense = DPBayesianLogisticRegression(error_model="dense", **kw).fit(X, y)
    np.testing.assert_array_equal(diag.dpvi_result_.phi, dense.dpvi_result_.phi)
    assert isinstance(dense.posterior_.components, GaussianComponents)
    draws = dense.sample_posterior(4000, random_state=0)
    assert np.corrcoef(draws[:, 0], draws[:, 1])[0, 1] < -0.5
    assert len(dense.inference_diagnostics_["relaxation_times"]) == 3
    assert abs(np.corrcoef(*diag.sample_posterior(4000, random_state=0)[:, :2].T)[0, 1]) < \
        abs(np.corrcoef(draws[:, 0], draws[:, 1])[0, 1])
    again = DPBayesianLogisticRegression(error_model="dense", **kw).fit(X, y)
    np.testing.assert_array_equal(again.sample_posterior(10, random_state=1),
                                  dense.sample_posterior(10, random_state=1))
    batch = DPBayesianLogisticRegression(error_model="dense", **kw)._fit_batch(
        [(X, y)], [0])[0]
    np.testing.assert_allclose(batch.coef_, dense.coef_, rtol=1e-5, atol=1e-6)
    # the mean-field default is one of the dense models, computed exactly, with the
    # wander correction that goes with it
    default = DPBayesianLogisticRegression(**kw).fit(X, y)
    assert default.inference == "exact" and default.error_model_ in DENSE_MODELS
    same = DPBayesianLogisticRegression(error_model=default.error_model_,
                                        wander_correction=default.wander_correction_,
                                        **kw).fit(X, y)
    np.testing.assert_array_equal(default.sample_posterior(10, random_state=1),
                                  same.sample_posterior(10, random_state=1))


@pytest.mark.parametrize("inference, expected", [("exact", DENSE_MODELS),
                                                 ("emcee", ("diagonal",)),
                                                 ("laplace", ("diagonal",)),
                                                 ("last_iterate", (None,))])
def test_logistic_auto_error_model_follows_the_backend(inference, expected):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(int)
    est = DPBayesianLogisticRegression(max_iter=200, inference=inference,
                                       variational_family="mean_field",
                                       n_posterior_samples=100, random_state=0).fit(X, y)
    assert est.error_model_ in expected
    assert est.posterior_.method == (est.error_model_ if inference == "exact" else inference)
    # the wander correction follows the error model: only "dense_matched" takes it
    assert est.wander_correction_ == ("probit" if est.error_model_ == "dense_matched"
                                      else "none")
    with pytest.raises(ValueError, match="error_model='dense' needs inference"):
        DPBayesianLogisticRegression(error_model="dense", inference="statistics",
                                     max_iter=50).fit(X, y)


def _logistic_data(X, theta, seed):
    rng = np.random.default_rng(seed)
    logits = X @ theta[:-1] + theta[-1]
    return (rng.random(len(X)) < 1 / (1 + np.exp(-logits))).astype(int)


def test_logistic_auto_takes_the_matched_curvature_on_centred_features():
    from skdpvi.linear_model._logistic_dense import AUTO_MATCHED_RELAXATIONS

    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 5))
    y = _logistic_data(X, np.array([1.0, -0.5, 0.3, 0.0, 0.8, 0.2]), 1)
    kw = dict(max_iter=3000, n_posterior_samples=300, random_state=0,
              variational_family="mean_field")
    est = DPBayesianLogisticRegression(**kw).fit(X, y)
    choice = est.inference_diagnostics_["auto_error_model"]
    assert est.error_model_ == "dense_matched" and est.wander_correction_ == "probit"
    assert choice["window_relaxations"] >= AUTO_MATCHED_RELAXATIONS
    explicit = DPBayesianLogisticRegression(error_model="dense_matched",
                                            wander_correction="probit", **kw).fit(X, y)
    np.testing.assert_array_equal(est.sample_posterior(20, random_state=3),
                                  explicit.sample_posterior(20, random_state=3))
    assert "wander_width" in est.inference_diagnostics_
    # with a wide prior (coefficients stated large) the same data get the fallback
    wide = DPBayesianLogisticRegression(prior_scale=3.0, **kw).fit(X, y)
    assert wide.error_model_ == "dense_shrunk" and wide.wander_correction_ == "none"
    assert wide.inference_diagnostics_["auto_error_model"]["prior_scale"] == 3.0
    # the correction can be switched off, and an explicit model is never overridden
    plain = DPBayesianLogisticRegression(wander_correction="none", **kw).fit(X, y)
    assert plain.error_model_ == "dense_matched" and plain.wander_correction_ == "none"
    assert "wander_width" not in plain.inference_diagnostics_
    dense = DPBayesianLogisticRegression(error_model="dense", **kw).fit(X, y)
    assert dense.error_model_ == "dense" and dense.wander_correction_ == "none"
    assert "auto_error_model" not in dense.inference_diagnostics_
    # without an intercept there is no correction and no centring check
    no_icpt = DPBayesianLogisticRegression(fit_intercept=False, **kw).fit(X, y)
    assert no_icpt.error_model_ == "dense_matched" and no_icpt.wander_correction_ == "none"
    assert "intercept_inflation" not in no_icpt.inference_diagnostics_["auto_error_model"]


def test_logistic_default_step_does_not_follow_the_prior_scale():
    # measured both ways (results page, "Large coefficients"): a step x prior_scale
    # helps with coefficients that large and hurts with a prior that overstates them
    X = np.random.default_rng(0).standard_normal((500, 3))
    rates = []
    for scale in (0.5, 1.0, 2.0, 3.0):
        est = DPBayesianLogisticRegression(prior_scale=scale, clip_norm=2.0, max_iter=100)
        engine = est._engine_settings(*X.shape, X, 0).engine
        rates.append(engine["learning_rate"])
        assert np.isclose(engine["learning_rate"] * engine["preconditioner"], 0.1)
    assert len(set(rates)) == 1
    # the larger step is one parameter away: sqrt(d / 2) = 2 for the 4 parameters
    wide = DPBayesianLogisticRegression(prior_scale=3.0, clip_norm=2.0, max_iter=100,
                                        learning_rate_scale=3.0 * 2.0)
    assert np.isclose(wide._engine_settings(*X.shape, X, 0).engine["learning_rate"],
                      3 * rates[0])


def test_logistic_auto_keeps_the_window_curvature_where_matching_fails():
    from skdpvi.linear_model._logistic_dense import (AUTO_MATCHED_INFLATION,
                                                      AUTO_MATCHED_RELAXATIONS)

    # features on [0, 1]: far from centred, where the matched curvature's intervals
    # are far too narrow; "auto" does not take it but the window curvature with its
    # noise bulk shrunk, and says why (without the warning an explicit
    # error_model="dense_matched" gives)
    rng = np.random.default_rng(0)
    U = rng.random((5000, 10))
    y = _logistic_data(U, rng.standard_normal(11), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentifiabilityWarning)
        est = DPBayesianLogisticRegression(max_iter=3000, n_posterior_samples=200,
                                           variational_family="mean_field",
                                           random_state=0).fit(U, y)
    choice = est.inference_diagnostics_["auto_error_model"]
    assert est.error_model_ == "dense_shrunk" and est.wander_correction_ == "none"
    assert "wander_shrinkage" in est.inference_diagnostics_
    assert choice["window_relaxations"] >= AUTO_MATCHED_RELAXATIONS
    assert choice["inflation_over_sampling"] > AUTO_MATCHED_INFLATION
    # the same posterior as the explicit setting on the same run
    explicit = clone(est).set_params(error_model="dense_shrunk")
    X_checked, _ = explicit._fit_inputs(U, y)
    seeds = explicit._fit_seeds()
    settings = explicit._engine_settings(*U.shape, X_checked, seeds.engine)
    explicit._fit_from_result(est.dpvi_result_, settings, len(U), seeds)
    np.testing.assert_array_equal(est.sample_posterior(20, random_state=3),
                                  explicit.sample_posterior(20, random_state=3))
    # rare binary features at a small budget: the window holds about one relaxation
    rng = np.random.default_rng(0)
    B = (rng.random((2000, 6)) < 0.02).astype(float)
    y = (rng.random(2000) < 0.4).astype(int)
    est = DPBayesianLogisticRegression(epsilon=0.3, max_iter=2000, n_posterior_samples=200,
                                       variational_family="mean_field",
                                       random_state=0).fit(B, y)
    choice = est.inference_diagnostics_["auto_error_model"]
    assert est.error_model_ == "dense"
    assert choice["window_relaxations"] < AUTO_MATCHED_RELAXATIONS
    assert "intercept_inflation" not in choice


def test_logistic_wander_correction_shrinks_the_means_by_the_measured_width():
    from sklearn.datasets import make_classification

    from skdpvi.noise_aware import linear_response_posterior, logistic_wander_width

    X, y = make_classification(n_samples=2000, n_features=3, n_informative=3, n_redundant=0,
                               random_state=0)
    kw = dict(max_iter=800, inference="exact", n_posterior_samples=300, random_state=0)
    for error_model in ("diagonal", "coupled", "dense"):
        plain = DPBayesianLogisticRegression(error_model=error_model, **kw).fit(X, y)
        fixed = DPBayesianLogisticRegression(error_model=error_model,
                                             wander_correction="probit", **kw).fit(X, y)
        # the same release, post-processed differently
        np.testing.assert_array_equal(plain.dpvi_result_.phi, fixed.dpvi_result_.phi)
        result = fixed.dpvi_result_
        width = logistic_wander_width(result.stats, n_means=4,
                                      sampling_rate=result.sampling_rate)
        if error_model == "dense":  # read through the dense posterior's own curvature
            K = linear_response_posterior(
                result.stats, n_means=4, learning_rate=result.learning_rate,
                noise_std=result.noise_std, sampling_rate=result.sampling_rate,
                n_components=2)[1]["curvature"]
            through_k = logistic_wander_width(result.stats, n_means=4, curvature=K,
                                              sampling_rate=result.sampling_rate)
            assert fixed.inference_diagnostics_["wander_width"] == through_k > 0
            assert through_k != width
        else:  # the release's stationary reading
            assert fixed.inference_diagnostics_["wander_width"] == width > 0
        if error_model != "dense":  # the scales are untouched; the means shrink
            a, b = plain.posterior_.phi_star, fixed.posterior_.phi_star
            np.testing.assert_array_equal(a[:, 4:], b[:, 4:])
            ratio = b[:, :4] / a[:, :4]
            assert np.all(ratio < 1) and np.all(ratio > 1 - math.pi / 16 * width - 1e-12)
        else:
            assert np.linalg.norm(fixed.coef_) < np.linalg.norm(plain.coef_)
    assert "wander_width" not in plain.inference_diagnostics_
    batch = DPBayesianLogisticRegression(error_model="dense", wander_correction="probit",
                                         **kw)._fit_batch([(X, y)], [0])[0]
    np.testing.assert_allclose(batch.coef_, fixed.coef_, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("params, match", [
    (dict(wander_correction="jensen"), "wander_correction must be one of"),
    (dict(wander_correction="probit", fit_intercept=False), "needs fit_intercept=True"),
    (dict(wander_correction="probit", inference="last_iterate"), "needs inference"),
    (dict(wander_correction="probit", inference="statistics"), "needs inference"),
    (dict(error_model="dense", inference="last_iterate"), "error_model='dense' needs"),
    (dict(error_model="coupled", inference="statistics"), "error_model='coupled' needs"),
])
def test_logistic_wander_correction_is_validated(params, match):
    X = np.random.default_rng(0).normal(size=(200, 2))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match=match):
        DPBayesianLogisticRegression(max_iter=50, **params).fit(X, y)


@pytest.mark.parametrize("Est, name", [(DPBayesianLinearRegression, "prior_weight_scale"),
                                       (DPBayesianLinearRegression, "prior_noise_shape"),
                                       (DPBayesianLinearRegression, "prior_noise_scale"),
                                       (DPBayesianLogisticRegression, "prior_scale")])
def test_prior_hyper_parameters_take_numpy_numbers_and_refuse_non_finite_ones(Est, name,
                                                                              reg_data):
    # a grid search over np.arange(1, 3) passes NumPy integers (rejected before); inf
    # ended in a ZeroDivisionError
    X, y = reg_data
    y = (y > 0).astype(int) if Est is DPBayesianLogisticRegression else y
    Est(**{**QUICK, name: np.int64(2)}).fit(X, y)
    for bad in (np.inf, 0, -1.0, "2", True):
        with pytest.raises(ValueError, match=name):
            Est(**{**QUICK, name: bad}).fit(X, y)


def test_statistics_posterior_refuses_wide_data_before_the_private_run():
    # its post-processing grows as p^4 or faster: 1,000 features ended in a 1.9 TiB
    # allocation after the budget was spent
    X = np.random.default_rng(0).normal(size=(200, 61))
    est = DPBayesianLinearRegression(max_iter=50)
    with pytest.raises(ValueError, match="at most 60 features.*X has 61.*public projection"
                                         ".*inference='exact'"):
        est.fit(X, X[:, 0])
    assert not hasattr(est, "epsilon_")  # nothing ran
    DPBayesianLinearRegression(max_iter=50, inference="exact").fit(X, X[:, 0])


def _dense_and(error_model):
    """"dense" and another dense error model fitted on the same DP-SGD run (8 Gaussian
    features, 3,000 rows), with the smallest eigenvalues of their draws' covariance."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 8))
    theta = rng.standard_normal(9)
    y = (rng.random(3000) < 1 / (1 + np.exp(-(X @ theta[:-1] + theta[-1])))).astype(int)
    fits = {m: DPBayesianLogisticRegression(error_model=m, max_iter=2000, random_state=0)
            .fit(X, y) for m in ("dense", error_model)}
    np.testing.assert_array_equal(fits["dense"].dpvi_result_.phi,
                                  fits[error_model].dpvi_result_.phi)
    eig = {m: np.linalg.eigvalsh(np.cov(f.sample_posterior(2000, random_state=0), rowvar=False))
           for m, f in fits.items()}
    return fits, eig


def test_dense_shrunk_widens_the_dense_posterior_along_its_narrowest_direction():
    # the wander's eigenvalue spread reads some combinations of the coefficients as far
    # too stiff; shrinking the wander towards the mean-field diagonal widens exactly those
    # (results page, "The joint check that TARP misses"): same DP-SGD run, post-processing only
    fits, eig = _dense_and("dense_shrunk")
    assert eig["dense_shrunk"][0] > 2 * eig["dense"][0]
    shrunk = fits["dense_shrunk"]
    assert shrunk.posterior_.method == "dense_shrunk" and shrunk.error_model_ == "dense_shrunk"
    assert 0 < shrunk.inference_diagnostics_["wander_shrinkage"]["intensity"] <= 1
    assert "wander_shrinkage" not in fits["dense"].inference_diagnostics_


def test_dense_matched_keeps_the_mean_field_diagonal_and_widens_the_narrowest_direction():
    # the same DP-SGD run as "dense", post-processing only: the curvature matched to the
    # mean-field scales' diagonal compresses the wander's eigen-spread
    fits, eig = _dense_and("dense_matched")
    assert eig["dense_matched"][0] > 1.5 * eig["dense"][0]
    matched = fits["dense_matched"]
    assert matched.posterior_.method == "dense_matched"
    info = matched.inference_diagnostics_["curvature_matching"]
    assert info["converged"] and info["constraint_error"] < 1e-6
    assert "curvature_matching" not in fits["dense"].inference_diagnostics_


def test_dense_matched_warns_on_uncentred_features():
    # features uniform on [0, 1]: the intercept and the coefficients are nearly
    # collinear, which the matched curvature reads far too stiff; the window curvature
    # of the same release flags it (results page, "A curvature matched to the
    # mean-field diagonal"); the same features centred pass silently
    from skdpvi.exceptions import IdentifiabilityWarning

    rng = np.random.default_rng(0)
    U = rng.random((5000, 10))
    theta = rng.standard_normal(11)

    def labels(X):
        return (rng.random(5000) < 1 / (1 + np.exp(-(X @ theta[:-1] + theta[-1])))).astype(int)

    est = DPBayesianLogisticRegression(error_model="dense_matched", random_state=0)
    with pytest.warns(IdentifiabilityWarning, match="far from centred.*dense_matched"):
        est.fit(U, labels(U))
    assert est.inference_diagnostics_["intercept_inflation"] > 20
    centred = U - 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentifiabilityWarning)
        est.fit(centred, labels(centred))
    assert est.inference_diagnostics_["intercept_inflation"] < 6


def test_dense_matched_takes_the_prior_along_a_onehot_block():
    # a one-hot block of three beside the intercept: the likelihood is flat along
    # "every category up, the intercept down", so the posterior's spread along it is the
    # prior's (sd prior_scale), whatever the trace read
    rng = np.random.default_rng(1)
    n = 3000
    onehot = np.eye(3)[rng.integers(3, size=n)]
    X = np.c_[rng.standard_normal((n, 2)), onehot]
    logits = X @ np.array([1.0, -0.5, 0.3, -0.2, 0.1]) + 0.2
    y = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(int)
    est = DPBayesianLogisticRegression(error_model="dense_matched", onehot_blocks=[[2, 3, 4]],
                                       max_iter=2000, random_state=0).fit(X, y)
    v = np.array([0, 0, 1, 1, 1, -1.0]) / 2.0
    draws = est.sample_posterior(4000, random_state=0)
    assert np.std(draws @ v) == pytest.approx(1.0, rel=0.1)
    assert est.inference_diagnostics_["curvature_matching"]["converged"]
    # the block's flat direction is no sign of uncentred features
    assert est.inference_diagnostics_["intercept_inflation"] < 6
