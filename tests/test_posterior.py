"""Tests of skdpvi/posterior.py: names and the summary table of NoiseAwarePosterior."""

import pickle
import sys

import numpy as np
import pytest

from skdpvi import NoiseAwarePosterior
from skdpvi.models import LinearRegressionModel, LogisticRegressionModel


@pytest.fixture
def post():
    rng = np.random.default_rng(0)
    phi = np.column_stack([rng.normal([0.5, -1.0, 0.1], 0.05, (40, 3)),
                           np.full((40, 3), -2.0)])
    return NoiseAwarePosterior(phi, LinearRegressionModel(1), "exact")


def test_names_default_to_the_model_and_can_be_given(post):
    assert post.param_names == ("coef[0]", "intercept", "noise_variance")
    post.param_names = np.array(["coef[age]", "intercept", "noise_variance"], dtype=object)
    assert post.param_names == ("coef[age]", "intercept", "noise_variance")
    with pytest.raises(ValueError, match="3 parameters"):
        post.param_names = ["a", "b"]
    post.param_names = None
    assert post.param_names[0] == "coef[0]"
    named = NoiseAwarePosterior(post.phi_star, post.model, "exact", param_names=["a", "b", "c"])
    assert pickle.loads(pickle.dumps(named)).param_names == ("a", "b", "c")


def test_posteriors_pickled_before_names_existed_still_load(post):
    state = dict(vars(post))
    del state["_param_names"]
    old = NoiseAwarePosterior.__new__(NoiseAwarePosterior)
    old.__dict__.update(state)
    assert old.param_names == ("coef[0]", "intercept", "noise_variance")


def test_summary_matches_mean_std_and_interval(post):
    pytest.importorskip("pandas")
    table = post.summary()
    assert list(table.index) == list(post.param_names) and table.index.name == "param"
    np.testing.assert_array_equal(table["mean"], post.mean())
    np.testing.assert_array_equal(table["sd"], post.std())
    lo, hi = post.interval(0.9)
    np.testing.assert_array_equal(table["5%"], lo)
    np.testing.assert_array_equal(table["95%"], hi)
    wide = post.summary(0.95, unconstrained=True)
    assert list(wide.columns) == ["mean", "sd", "2.5%", "97.5%"]
    # mu = 0.1 unconstrained; the noise variance softplus(0.1 + 0.13 z) is about 0.75
    assert wide.loc["noise_variance", "mean"] == pytest.approx(0.1, abs=0.02)
    assert table.loc["noise_variance", "mean"] == pytest.approx(0.75, abs=0.02)


def test_summary_without_pandas(post, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="as_frame=False"):
        post.summary()
    rec = post.summary(as_frame=False)
    assert rec.dtype.names == ("param", "mean", "sd", "5%", "95%")
    assert rec["param"].tolist() == list(post.param_names)
    np.testing.assert_array_equal(rec["mean"], post.mean())


@pytest.mark.parametrize("credibility", [0, 1, 1.5, "0.9"])
def test_summary_and_interval_reject_bad_credibility(post, credibility):
    with pytest.raises(ValueError, match="credibility"):
        post.summary(credibility, as_frame=False)
    with pytest.raises(ValueError, match="credibility"):
        post.interval(credibility)


def test_logistic_posterior_summary_as_records():
    phi = np.array([[0.5, -1.0, -2.0, -2.0]])
    post = NoiseAwarePosterior(phi, LogisticRegressionModel(1), "last_iterate",
                               param_names=["coef[age]", "intercept"])
    rec = post.summary(as_frame=False, n_samples=5000)
    assert rec["mean"][0] == pytest.approx(0.5, abs=0.01)
    assert rec["5%"][1] < -1.0 < rec["95%"][1]


@pytest.mark.parametrize("phi_star, message", [
    (np.zeros((3, 3)), r"phi_star must have shape \(M, 4\)"),
    (np.zeros(4), r"phi_star must have shape \(M, 4\)"),
    (np.zeros((0, 4)), r"phi_star must have shape \(M, 4\)"),
    (np.array([[np.nan, 0.0, 0.0, 0.0]]), "phi_star contains NaN"),
])
def test_bad_phi_star_is_refused_by_name(phi_star, message):
    # before: a (3, 3) array for 2 parameters sampled silently, NaN gave NaN draws
    with pytest.raises(ValueError, match=message):
        NoiseAwarePosterior(phi_star, LogisticRegressionModel(1), "last_iterate")


@pytest.mark.parametrize("theta", [np.zeros(3), np.zeros((2, 5)), 1.0])
def test_transforms_refuse_theta_of_the_wrong_length(theta):
    post = NoiseAwarePosterior(np.zeros((2, 4)), LogisticRegressionModel(1), "last_iterate")
    for transform in (post.to_constrained, post.to_unconstrained):
        with pytest.raises(ValueError, match=r"theta must have shape \(\.\.\., 2\)"):
            transform(theta)
    assert post.to_unconstrained(np.zeros((3, 2))).shape == (3, 2)


@pytest.mark.parametrize("q", ["0.5", 1.5, -0.1, [0.1, 2.0], np.nan, []])
def test_quantile_refuses_bad_q_by_name(q):
    post = NoiseAwarePosterior(np.zeros((2, 4)), LogisticRegressionModel(1), "last_iterate")
    with pytest.raises(ValueError, match="q must be a number or array of numbers in"):
        post.quantile(q, n_samples=10)
    assert post.quantile([0, 0.5, 1], n_samples=10).shape == (3, 2)
