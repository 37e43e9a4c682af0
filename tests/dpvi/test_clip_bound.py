"""The private row-norm bound that chooses the logistic estimator's clipping norm."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from skdpvi.accounting import compose_epsilon, noise_multiplier
from skdpvi.dpvi.clip_bound import (BUDGET_SHARE, HEADROOM, TAIL, Z, bound_is_informative,
                                    histogram_noise_std, norm_grid, private_norm_bound,
                                    row_norms_with_intercept)
from skdpvi.linear_model._settings import histogram_mechanism


def test_grid_halves_every_two_edges_from_the_top():
    edges = norm_grid(8.0)
    assert edges[0] == 8.0 and edges[2] == 4.0 and edges[-1] == pytest.approx(8.0 / 64)
    np.testing.assert_allclose(edges[:-1] / edges[1:], math.sqrt(2))


def test_histogram_counts_every_row_in_one_bin_and_adds_noise_of_the_stated_sd():
    rng = np.random.default_rng(0)
    norms = rng.uniform(0.01, 20.0, 5000)
    edges = norm_grid(10.0)
    # the noiseless histogram: bins [top, inf), [e_k, e_{k-1}), ..., [0, e_last)
    _, exact = private_norm_bound(norms, 10.0, 0.0, rng)
    assert exact.sum() == len(norms) and exact[0] == np.sum(norms >= 10.0)
    assert exact[1] == np.sum((norms >= edges[1]) & (norms < edges[0]))
    assert exact[-1] == np.sum(norms < edges[-1])
    # one more row changes one count by one: sensitivity 1
    _, more = private_norm_bound(np.r_[norms, 3.0], 10.0, 0.0, rng)
    assert np.abs(more - exact).sum() == 1
    # the noise: sd noise_std in every bin, independent of the counts
    noise = np.stack([private_norm_bound(norms, 10.0, 7.0, np.random.default_rng(s))[1]
                      for s in range(400)]) - exact
    assert abs(noise.mean()) < 0.4 and noise.std() == pytest.approx(7.0, rel=0.03)


def test_bound_is_one_step_above_the_lowest_edge_with_few_enough_rows_above():
    rng = np.random.default_rng(1)
    step = math.sqrt(2) ** HEADROOM
    norms = np.full(10_000, 2.9)
    # the lowest edge with no row above is 15 / 4 = 3.75
    assert private_norm_bound(norms, 15.0, 0.0, rng)[0] == pytest.approx(15.0 / 4 * step)
    # 10 % of the rows at 10: more than TAIL of them, so the edge stays above them
    norms[:1000] = 10.0
    assert private_norm_bound(norms, 15.0, 0.0, rng)[0] == pytest.approx(
        min(15.0, 15.0 / math.sqrt(2) * step))
    # 2 % at 10: below TAIL, the edge may leave them above it
    norms[200:1000] = 2.9
    assert private_norm_bound(norms, 15.0, 0.0, rng)[0] == pytest.approx(15.0 / 4 * step)


def test_bound_never_exceeds_the_top_and_stays_there_when_the_noise_hides_the_counts():
    rng = np.random.default_rng(2)
    assert private_norm_bound(np.full(1000, 100.0), 5.0, 0.0, rng)[0] == 5.0
    # noise far above TAIL * n: nothing can be trusted, the fixed default stays
    assert private_norm_bound(np.full(1000, 1.0), 5.0, 1000.0, rng)[0] == 5.0
    # the public check says the same before any budget is spent
    assert not bound_is_informative(1000, 1000.0)
    assert bound_is_informative(10_000, 20.0)
    noise = TAIL * 10_000 / (Z * math.sqrt(HEADROOM + 2))
    assert bound_is_informative(10_000, noise) and not bound_is_informative(10_000, noise * 1.01)


def test_histogram_spends_its_share_and_the_dp_sgd_the_rest_of_the_budget():
    epsilon, delta = 1.0, 1e-5
    sigma_all, _ = noise_multiplier(epsilon, delta, 1.0, 1)
    noise = histogram_noise_std(sigma_all)
    # Gaussian-DP: mu^2 of the histogram is BUDGET_SHARE of the whole budget's
    assert (1 / noise) ** 2 == pytest.approx(BUDGET_SHARE / sigma_all**2, rel=1e-6)
    hist = histogram_mechanism(noise)
    assert (hist.noise_multiplier, hist.sampling_rate, hist.steps) == (noise, 1.0, 1)
    alone, _ = noise_multiplier(epsilon, delta, 0.1, 2000)
    sigma, achieved = noise_multiplier(epsilon, delta, 0.1, 2000, composed_with=[hist])
    assert sigma > alone
    assert sigma / alone == pytest.approx(1 / math.sqrt(1 - BUDGET_SHARE), rel=0.02)
    total = compose_epsilon([(sigma, 0.1, 2000), hist], delta)
    assert 0.995 * epsilon <= achieved <= epsilon and total == pytest.approx(achieved, rel=1e-3)


def test_row_norms_count_the_intercept_and_take_every_input_kind():
    X = np.array([[3.0, 0.0], [0.0, 0.0], [1.0, 2.0]])
    expected = np.sqrt([10.0, 1.0, 6.0])
    np.testing.assert_allclose(row_norms_with_intercept(X, True), expected)
    np.testing.assert_allclose(row_norms_with_intercept(X, False), np.sqrt([9.0, 0.0, 5.0]))
    np.testing.assert_allclose(row_norms_with_intercept(sp.csr_matrix(X), True), expected)
    np.testing.assert_allclose(row_norms_with_intercept(torch.tensor(X), True), expected)
    np.testing.assert_allclose(row_norms_with_intercept(X.astype(np.float32), True), expected,
                               rtol=1e-6)
