"""The exact accountant of full-batch runs (skdpvi.accounting.gaussian)."""

import math

import pytest
from scipy.stats import norm

from skdpvi.accounting import DPSGDMechanism, compose_epsilon, noise_multiplier
from skdpvi.accounting.gaussian import GaussianAccountant, gaussian_delta, gaussian_epsilon


@pytest.mark.parametrize("eps, mu", [(0.0, 0.3), (1.0, 0.27), (5.0, 2.0), (30.0, 3.0)])
def test_delta_is_balle_wang_formula(eps, mu):
    direct = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    assert gaussian_delta(eps, mu) == pytest.approx(direct, rel=1e-9, abs=1e-300)


def test_epsilon_inverts_delta_and_is_zero_above_the_curve():
    for mu in (0.05, 0.5, 3.0):
        for delta in (1e-12, 1e-5, 0.3):
            eps = gaussian_epsilon(mu, delta)
            if eps > 0:
                assert gaussian_delta(eps, mu) <= delta * (1 + 1e-6)
                assert gaussian_delta(eps * 0.999, mu) > delta
            else:
                assert gaussian_delta(0.0, mu) <= delta


def test_steps_compose_into_one_gaussian_mechanism():
    # T steps with sigma are one step with sigma / sqrt(T), and mixed sigmas add up
    assert compose_epsilon([(30.0, 1.0, 100)], 1e-5) == pytest.approx(
        compose_epsilon([(3.0, 1.0, 1)], 1e-5), rel=1e-9)
    mixed = GaussianAccountant().epsilon(
        [DPSGDMechanism(2.0, 1.0, 3), DPSGDMechanism(4.0, 1.0, 4)], 1e-5)
    mu = math.sqrt(3 / 4 + 4 / 16)
    assert mixed == pytest.approx(gaussian_epsilon(mu, 1e-5), rel=1e-12)


@pytest.mark.parametrize("delta", [1e-9, 0.01, 0.2, 0.5])
@pytest.mark.parametrize("epsilon", [0.05, 8.0])
def test_full_batch_calibration_is_exact_where_prv_returned_complex_numbers(epsilon, delta):
    sigma, achieved = noise_multiplier(epsilon, delta, 1.0, 100)
    assert isinstance(sigma, float) and isinstance(achieved, float)
    assert 0.995 * epsilon <= achieved <= epsilon
    assert gaussian_epsilon(10 / sigma, delta) == pytest.approx(achieved, rel=1e-9)


def test_only_full_batch():
    with pytest.raises(ValueError, match="sampling_rate == 1"):
        GaussianAccountant().epsilon([DPSGDMechanism(1.0, 0.5, 1)], 1e-5)


def test_the_central_limit_guess_lands_near_the_certified_noise_multiplier():
    from skdpvi.accounting.gaussian import clt_noise_multiplier

    for epsilon, rate, steps in ((1.0, 0.1, 10_000), (0.3, 0.05, 2_000)):
        certified, _ = noise_multiplier(epsilon, 1e-5, rate, steps)
        guess = clt_noise_multiplier(epsilon, 1e-5, rate, steps)
        assert abs(guess / certified - 1) < 0.1
    # a fixed mechanism that spends the budget alone leaves nothing to calibrate
    assert clt_noise_multiplier(1.0, 1e-5, 0.1, 100, [DPSGDMechanism(0.2, 1.0, 1)]) is None
