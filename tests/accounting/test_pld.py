"""The PLD fallback accountant (skdpvi.accounting.pld)."""

import numpy as np
import pytest

from skdpvi.accounting import DPSGDMechanism
from skdpvi.accounting.gaussian import gaussian_epsilon
from skdpvi.accounting.pld import (PLDAccountant, _add_curve, _one_step, _range,
                                   _remove_curve, pld_epsilon)
from skdpvi.accounting.prv import _prv_epsilon


@pytest.mark.parametrize("curve", [_remove_curve, _add_curve])
def test_curve_and_its_complement_agree(curve):
    eps = np.linspace(-3, 3, 25)
    delta, h = curve(eps, 0.8, 0.1)
    np.testing.assert_allclose(delta, h + 1 - np.exp(eps), atol=1e-13)
    assert np.all(np.diff(delta) <= 1e-15) and np.all(delta >= 1 - np.exp(eps) - 1e-15)


@pytest.mark.parametrize("sigma, q", [(1.0, 0.1), (0.3, 0.001), (2.0, 1.0), (37.0, 0.1)])
@pytest.mark.parametrize("direction, curve", [("remove", _remove_curve), ("add", _add_curve)])
def test_one_step_is_a_valid_dominating_pld(sigma, q, direction, curve):
    lowest, highest = _range(sigma, q, direction)
    pld = _one_step(curve, sigma, q, 1e-3, 1e-15, lowest, highest)
    losses = (pld.offset + np.arange(len(pld.pmf))) * pld.grid
    assert pld.pmf.sum() + pld.inf == pytest.approx(1.0, abs=1e-12)
    assert (pld.pmf * np.exp(-losses)).sum() <= 1 + 1e-9  # realisable by some pair
    # its curve lies on or above the exact one
    eps = np.linspace(0, 3, 31)
    exact, _ = curve(eps, sigma, q)
    mine = [pld.inf + np.sum(pld.pmf[losses > e] * -np.expm1(e - losses[losses > e]))
            for e in eps]
    assert np.all(np.array(mine) >= exact - 1e-12)


def test_full_batch_matches_the_exact_gaussian():
    eps = pld_epsilon(((3.0, 1.0, 4),), 1e-5)
    exact = gaussian_epsilon(2 / 3.0, 1e-5)
    assert exact <= eps <= exact * 1.001


def test_agrees_with_prv_where_both_serve():
    history = ((2.0, 0.1, 100),)
    estimate, upper = _prv_epsilon(history, 1e-5, 0.01)
    assert pld_epsilon(history, 1e-5) == pytest.approx(estimate, rel=2e-3)


def test_calibrates_where_prv_grid_is_too_large():
    # epsilon 0.05 with delta 0.2 over 10^4 steps at q=0.001: the PRV grid would have
    # 81 million points
    sigma, achieved = PLDAccountant().noise_multiplier(0.05, 0.2, 0.001, 10_000)
    assert 0.995 * 0.05 <= achieved <= 0.05
    assert PLDAccountant().epsilon([DPSGDMechanism(sigma, 0.001, 10_000)], 0.2) == \
        pytest.approx(achieved, rel=0.01)
