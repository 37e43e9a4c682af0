"""Cross-check of skdpvi.metrics.tarp_coverage against the reference TARP package.

``tarp`` (Lemos, Coogan et al. 2023; ``pip install tarp``, a test dependency) computes
the same statistic f_i (the fraction of draws closer to the reference than the truth,
strict ``<``) and the coverage as the fraction of f_i below each level, but on its own
grid: the edges of a histogram of the f_i between their minimum and maximum, with
the last bin closed. Given the same samples, truths and references, with its
normalisation off and our levels set to its edges, the curves must agree, except at
the top edge, where tarp counts f_i <= max and we count f_i < level (see the Notes of
tarp_coverage).
"""

import numpy as np
import pytest

from skdpvi.metrics import tarp_coverage

tarp = pytest.importorskip("tarp")


def _problem(seed, n_sim=200, n_draws=301, n_params=3, sd_scale=0.7):
    """Posteriors of a conjugate Gaussian model, over-confident by ``sd_scale``.

    301 draws make every f_i a multiple of 1/301, which no interior edge k/20 of
    tarp's grid hits, so rounding in the edges cannot flip a comparison. Simulation
    0 has its truth at the reference (f = 0) and simulation 1 far from it (f = 1):
    tarp's grid then runs exactly from 0 to 1.
    """
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(n_sim, n_params))
    x = theta + rng.normal(size=theta.shape)
    samples = x[:, None, :] / 2 + sd_scale * np.sqrt(0.5) * rng.normal(
        size=(n_sim, n_draws, n_params))
    refs = rng.uniform(-3, 3, size=(n_sim, n_params))
    theta[0] = refs[0]
    theta[1] = refs[1] + 100.0
    return samples, theta, refs


def _reference_curve(samples, theta, refs, metric, n_bins):
    state = np.random.get_state()  # tarp seeds NumPy's global generator
    try:
        ecp, credibility = tarp.get_tarp_coverage(
            np.swapaxes(samples, 0, 1).copy(), theta.copy(), references=refs.copy(),
            metric=metric, num_alpha_bins=n_bins, norm=False, bootstrap=False, seed=0)
    finally:
        np.random.set_state(state)
    return ecp, credibility


@pytest.mark.parametrize("metric", ["euclidean", "manhattan"])
@pytest.mark.parametrize("n_bins", [None, 10])
def test_same_coverage_curve_as_the_reference_implementation(metric, n_bins):
    samples, theta, refs = _problem(seed=0)
    ecp, credibility = _reference_curve(samples, theta, refs, metric, n_bins)
    assert len(credibility) == (n_bins or len(theta) // 10) + 1  # tarp: K // 10 bins
    np.testing.assert_allclose(credibility[[0, -1]], [0.0, 1.0])
    ours = tarp_coverage(samples, theta, references=refs, distance=metric,
                         alpha_grid=1.0 - credibility)
    np.testing.assert_allclose(ours.credibility, credibility, atol=1e-12)
    np.testing.assert_allclose(ours.coverage[:-1], ecp[:-1], atol=1e-12)
    # The top edge: tarp's last bin is closed (f <= 1), our levels are strict.
    at_one = np.mean(ours.frequencies == 1.0)
    assert at_one > 0
    assert ecp[-1] == pytest.approx(1.0)
    assert ours.coverage[-1] == pytest.approx(1.0 - at_one)
    # The curve is far from the diagonal (over-confident), so agreement is not trivial.
    assert ours.rmse > 0.05


def test_same_frequencies_on_a_fine_grid():
    """On 200 bins, tarp's empirical CDF of the f_i is that of our frequencies."""
    samples, theta, refs = _problem(seed=1, sd_scale=1.0)
    ecp, credibility = _reference_curve(samples, theta, refs, "euclidean", 200)
    ours = tarp_coverage(samples, theta, references=refs)
    f = np.sort(ours.frequencies)
    # tarp's empirical CDF of f_i at its 201 edges equals ours, edge by edge
    mine = (f[None, :] < credibility[:-1, None]).mean(1)
    np.testing.assert_allclose(mine, ecp[:-1], atol=1e-12)
