"""Tests of skdpvi.plotting."""

import numpy as np
import pytest

from skdpvi.metrics import (
    calibration_curve_quantile,
    marginal_tarp_coverage,
    predictive_coverage,
    tarp_coverage,
)

from .metrics._posteriors import gaussian_posteriors, predictive_draws


@pytest.fixture
def plt():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def test_plot_coverage(plt):
    from skdpvi.plotting import plot_coverage

    samples, theta = gaussian_posteriors(n_sim=60, n_draws=50)
    res = tarp_coverage(samples, theta, n_bootstrap=20, random_state=0)
    ax = plot_coverage(res, label="toy")
    curve = ax.lines[0]
    np.testing.assert_allclose(curve.get_xdata(), res.credibility)
    np.testing.assert_allclose(curve.get_ydata(), res.coverage)
    np.testing.assert_allclose(ax.lines[1].get_xdata(), [0, 1])  # diagonal
    assert len(ax.collections) == 1  # bootstrap band
    marg = marginal_tarp_coverage(samples, theta, random_state=0, param_names=["a", "b", "c"])
    ax = plot_coverage(marg)
    assert [line.get_label() for line in ax.lines[:3]] == ["a", "b", "c"]
    assert len(ax.collections) == 0
    ax = plot_coverage(predictive_coverage(*predictive_draws(n=100, n_draws=50)))
    assert len(ax.lines) == 2
    with pytest.raises(ValueError, match="result"):
        plot_coverage(np.zeros(3))


def test_plot_calibration(plt):
    from skdpvi.plotting import plot_calibration

    rng = np.random.default_rng(0)
    p = rng.uniform(size=(4, 300))
    y = (rng.uniform(size=(4, 300)) < p).astype(int)
    ax = plot_calibration(y[0], p[0], n_bins=5, labels="one")
    prob_true, prob_pred, _ = calibration_curve_quantile(y[0], p[0], n_bins=5)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), prob_true)
    np.testing.assert_allclose(ax.lines[0].get_xdata(), prob_pred)
    ax = plot_calibration(list(y), list(p), n_bins=5)
    assert len(ax.collections) == 1  # +- sd band
    curves = [calibration_curve_quantile(y[r], p[r], n_bins=5)[0] for r in range(4)]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), np.mean(curves, axis=0))
    ax = plot_calibration(y[0], {"a": p[0], "b": [p[0], p[0] ** 2]}, n_bins=5)
    assert [line.get_label() for line in ax.lines[:2]] == ["a", "b"]
    with pytest.raises(ValueError, match="labels"):
        plot_calibration(y[0], p[0], labels=["a", "b"])


def test_plot_intervals_names_rows_after_the_parameters(plt):
    from skdpvi import NoiseAwarePosterior
    from skdpvi.models import LinearRegressionModel
    from skdpvi.plotting import plot_intervals

    rng = np.random.default_rng(0)
    phi = np.column_stack([rng.normal([0.5, -1.0, 0.1], 0.05, (40, 3)), np.full((40, 3), -2.0)])
    post = NoiseAwarePosterior(phi, LinearRegressionModel(1), "exact",
                               param_names=["coef[age]", "intercept", "noise_variance"])
    ax = plot_intervals(post, truth=[0.5, -1.0], params=["coef[age]", 1], label="noise-aware")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["coef[age]", "intercept"]
    table = post.summary(as_frame=False)
    dots = ax.lines[0]
    np.testing.assert_allclose(dots.get_xdata(), table["mean"][:2])
    np.testing.assert_allclose(dots.get_ydata(), [0, -1])  # first parameter on top
    segments = ax.collections[0].get_segments()
    np.testing.assert_allclose([s[:, 0] for s in segments],
                               np.column_stack([table["5%"][:2], table["95%"][:2]]))
    np.testing.assert_allclose(ax.lines[1].get_xdata(), [0.5, -1.0])  # the truth
    assert ax.get_legend().get_texts()[0].get_text() == "noise-aware"
    # a second posterior on the same axes, shifted; an estimator-like object works
    class Fitted:
        posterior_ = post

    plot_intervals(Fitted(), ax=ax, offset=0.2, truth={"intercept": -1.0})
    np.testing.assert_allclose(ax.lines[3].get_ydata(), [0.2, -0.8, -1.8])
    with pytest.raises(ValueError, match="unknown parameter"):
        plot_intervals(post, params=["coef[0]"])
    with pytest.raises(ValueError, match="truth has 1 values"):
        plot_intervals(post, truth=[0.5])
    with pytest.raises(ValueError, match="NoiseAwarePosterior"):
        plot_intervals(object())
