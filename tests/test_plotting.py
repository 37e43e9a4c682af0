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
