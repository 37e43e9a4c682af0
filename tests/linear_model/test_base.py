"""The estimators' shared machinery (skdpvi/linear_model/_base.py) at scale.

A fit is (a) ``_engine_settings`` + (b) the engine + (c) ``_fit_from_result``;
``_fit_batch`` runs (a) once, (b) in lockstep and (c) per data set, and must give the
fits of ``fit``. Also: the study paths, sparse input, and the thread policy.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from skdpvi import DPBayesianLinearRegression, DPBayesianLogisticRegression
from skdpvi.datasets import make_nig_linear_regression
from skdpvi.dpvi import DPVIResult
from skdpvi.metrics import run_tarp_study

QUICK = dict(max_iter=300, n_posterior_samples=100, inference="exact", epsilon=2.0)


def _regression(seed, n=400, d=2):
    X, y, theta = make_nig_linear_regression(n, n_features=d, random_state=seed)
    return theta, X, y


def _classification(seed, n=400):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(X @ [1.5, -1.0, 0.5] + rng.logistic(size=n) > 0, "yes", "no")
    return X, y


def _assert_same_fit(got, want, rtol=1e-6):
    np.testing.assert_allclose(got.dpvi_result_.phi, want.dpvi_result_.phi, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got.coef_, want.coef_, rtol=rtol, atol=1e-4)
    np.testing.assert_allclose(got.sample_posterior(50, random_state=1),
                               want.sample_posterior(50, random_state=1), rtol=rtol, atol=1e-4)
    assert got.epsilon_ == want.epsilon_ and got.noise_multiplier_ == want.noise_multiplier_
    assert got.n_features_in_ == want.n_features_in_


@pytest.mark.parametrize("Est, make", [(DPBayesianLinearRegression, lambda k: _regression(k)[1:]),
                                        (DPBayesianLogisticRegression, _classification)],
                         ids=["linear", "logistic"])
def test_fit_batch_gives_every_data_set_its_own_fit(Est, make):
    est = Est(**QUICK)
    data = [make(k) for k in range(3)]
    data.append(tuple(a[:300] for a in make(9)))  # another shape: its own lockstep group
    seeds = [5, 6, 5, 7]
    fitted = est._fit_batch(data, seeds)
    assert est._batch_fit_supported() and len(fitted) == 4
    for got, (X, y), seed in zip(fitted, data, seeds):
        _assert_same_fit(got, clone(est).set_params(random_state=seed).fit(X, y))
    if Est is DPBayesianLogisticRegression:
        assert list(fitted[0].classes_) == ["no", "yes"]
    else:
        assert fitted[0].noise_variance_ > 0
    assert not hasattr(est, "coef_")  # the template stays unfitted


def test_fit_is_engine_settings_engine_and_fit_from_result():
    """(c) receives the full DPVIResult and (a) one dict that goes to the engine."""
    _, X, y = _regression(0)
    est = DPBayesianLinearRegression(**QUICK, random_state=3)
    settings = est._engine_settings(*X.shape)
    assert set(settings.engine) >= {"model", "noise_multiplier", "clip_norm", "learning_rate",
                                    "preconditioner", "n_steps", "burn_in"}
    seen = {}
    original = DPBayesianLinearRegression._fit_from_result

    def spy(self, result, settings, n_samples, seeds):
        seen["result"] = result
        return original(self, result, settings, n_samples, seeds)

    DPBayesianLinearRegression._fit_from_result = spy
    try:
        est.fit(X, y)
    finally:
        DPBayesianLinearRegression._fit_from_result = original
    assert isinstance(seen["result"], DPVIResult) and seen["result"] is est.dpvi_result_


def test_subclasses_outside_skdpvi_that_override_fit_are_not_batched():
    class Custom(DPBayesianLinearRegression):
        def fit(self, X, y):
            return super().fit(X, 2 * y)

    assert DPBayesianLinearRegression()._batch_fit_supported()
    assert not Custom()._batch_fit_supported()


def simulator(rng):
    return _regression(rng, n=300)


def test_study_gives_the_same_results_batched_and_one_fit_per_job():
    est = DPBayesianLinearRegression(**QUICK)
    kwargs = dict(n_simulations=12, n_draws=100, unconstrained=True, random_state=0,
                  alpha_grid=np.linspace(0, 1, 6))
    one_by_one = run_tarp_study(est, simulator, batch_size=1, **kwargs)
    batched = run_tarp_study(est, simulator, batch_size=5, **kwargs)
    np.testing.assert_array_equal(batched.theta_true, one_by_one.theta_true)
    np.testing.assert_allclose(batched.samples, one_by_one.samples, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(batched.frequencies, one_by_one.frequencies, atol=0.02)
    assert batched.rmse == pytest.approx(one_by_one.rmse, abs=0.02)


# ---------------------------------------------------------------------------- sparse


def _categorical(seed, n=500):
    """Two categorical columns (10 and 8 levels) and a numeric one, as a DataFrame."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"a": rng.choice(list("abcdefghij"), n), "b": rng.choice(list("stuvwxyz"), n),
                      "num": rng.normal(size=n)})
    score = (X["a"] == "a") * 1.5 - (X["b"] == "z") + 0.5 * X["num"]
    return X, score.to_numpy()


@pytest.mark.parametrize("Est", [DPBayesianLinearRegression, DPBayesianLogisticRegression])
def test_sparse_input_through_a_one_hot_pipeline_equals_dense(Est):
    X, score = _categorical(0)
    rng = np.random.default_rng(1)
    y = (score + rng.normal(0, 0.3, len(score)) if Est is DPBayesianLinearRegression
         else (score + rng.logistic(size=len(score)) > 0).astype(int))
    encode = ColumnTransformer([("cat", OneHotEncoder(), ["a", "b"])], remainder="passthrough")
    pipe = make_pipeline(encode, Est(**QUICK, random_state=0)).fit(X, y)
    Xt = encode.fit_transform(X)
    assert sp.issparse(Xt)  # the default OneHotEncoder gives CSR
    dense = Est(**QUICK, random_state=0).fit(Xt.toarray(), y)
    sparse = pipe[-1]
    np.testing.assert_array_equal(sparse.dpvi_result_.phi, dense.dpvi_result_.phi)
    np.testing.assert_array_equal(sparse.coef_, dense.coef_)
    np.testing.assert_allclose(pipe.predict(X[:20]), dense.predict(Xt[:20].toarray()))
    if Est is DPBayesianLogisticRegression:
        np.testing.assert_allclose(pipe.predict_proba(X[:20]),
                                   dense.predict_proba(Xt[:20].toarray()))
    else:
        mean, std = sparse.predict(Xt[:5], return_std=True)
        assert mean.shape == std.shape == (5,)


def test_sparse_glm_path_equals_dense(monkeypatch):
    """The factored GLM path reads the row norms of the sparse rows."""
    import skdpvi.dpvi.loop as loop

    monkeypatch.setattr(loop, "_GLM_PATH_MIN_BLOCK", 0)
    X, score = _categorical(2)
    X = OneHotEncoder().fit_transform(X[["a", "b"]])
    y = score > 0
    kw = dict(QUICK, random_state=0, variational_family="mean_field")
    dense = DPBayesianLogisticRegression(**kw).fit(X.toarray(), y)
    sparse = DPBayesianLogisticRegression(**kw).fit(X, y)
    np.testing.assert_array_equal(sparse.dpvi_result_.phi, dense.dpvi_result_.phi)


def test_fit_batch_equals_fit_with_the_correlation_step_matrix():
    # the default linear fit steps its means through a matrix estimated from each
    # run's own released pairs: the lockstep runs must not share it
    est = DPBayesianLinearRegression(max_iter=300, n_posterior_samples=100, epsilon=2.0)
    assert est.get_params()["mean_preconditioning"] == "auto"
    data = [_regression(k)[1:] for k in range(2)]
    fitted = est._fit_batch(data, [5, 6])
    for got, (X, y), seed in zip(fitted, data, [5, 6]):
        _assert_same_fit(got, clone(est).set_params(random_state=seed).fit(X, y), rtol=1e-5)


def test_statistics_fit_falls_back_to_the_gradient_model_when_no_draw_is_possible(monkeypatch):
    # measured once in 200 strong-signal simulations (benchmarks' d10_ws5, epsilon 1):
    # no draw of the data statistics inside the model's support. The fit warns and
    # uses the paper's gradient model instead of ending a study with an exception.
    import skdpvi.linear_model._base as base
    from sklearn.exceptions import ConvergenceWarning

    from skdpvi.noise_aware.statistics_sampling import NoValidDraws

    def impossible(*args, **kwargs):
        raise NoValidDraws("No draw of the data statistics is possible.")

    monkeypatch.setattr(base, "statistics_posterior", impossible)
    _, X, y = _regression(0)
    with pytest.warns(ConvergenceWarning, match="falls back to the paper's gradient model"):
        est = DPBayesianLinearRegression(max_iter=300, n_posterior_samples=100,
                                         random_state=0).fit(X, y)
    assert est.inference_diagnostics_["fallback"] == "exact"
    assert est.posterior_.method == "exact" and np.all(np.isfinite(est.coef_))
