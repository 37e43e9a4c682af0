import time

import pytest

from skdpvi.accounting import (
    compose_epsilon,
    epsilon_spent,
    noise_multiplier,
    total_privacy_spent,
)

# delta=1e-5, q=0.1, T=10,000: tight PRV values, and what Opacus' default
# get_noise_multiplier returns (over-noised).
REFERENCE = [(0.1, 309.96, 360.0), (0.3, 112.52, 117.5), (1.0, 37.33, 37.8)]


@pytest.mark.parametrize("epsilon, tight, opacus_default", REFERENCE)
def test_noise_multiplier_is_tight_and_certified(epsilon, tight, opacus_default):
    sigma, achieved = noise_multiplier(epsilon, 1e-5, 0.1, 10_000)
    assert achieved <= epsilon
    assert achieved >= 0.995 * epsilon
    assert abs(sigma - tight) / tight < 0.006
    assert sigma < opacus_default
    # the inverse agrees with the certified value
    assert epsilon_spent(sigma, 1e-5, 0.1, 10_000) == pytest.approx(achieved, rel=2e-3)


def test_noise_multiplier_is_cached():
    noise_multiplier(2.0, 1e-5, 0.1, 1000)
    start = time.perf_counter()
    for _ in range(100):
        noise_multiplier(2.0, 1e-5, 0.1, 1000)
    assert time.perf_counter() - start < 0.05


def test_epsilon_decreases_with_noise_and_grows_with_steps():
    assert epsilon_spent(5.0, 1e-5, 0.1, 1000) > epsilon_spent(10.0, 1e-5, 0.1, 1000)
    assert epsilon_spent(5.0, 1e-5, 0.1, 2000) > epsilon_spent(5.0, 1e-5, 0.1, 1000)


def test_full_batch_sampling_rate_one_works():
    sigma, achieved = noise_multiplier(1.0, 1e-5, 1.0, 100)
    assert 0.995 <= achieved <= 1.0
    assert sigma > 1


def test_composition_of_two_runs():
    one = compose_epsilon([(10.0, 0.1, 1000)], 1e-5)
    two = compose_epsilon([(10.0, 0.1, 1000), (10.0, 0.1, 1000)], 1e-5)
    assert two == pytest.approx(compose_epsilon([(10.0, 0.1, 2000)], 1e-5), rel=1e-9)
    assert one < two < 2 * one


def test_total_privacy_spent_of_fitted_estimators():
    class Fit:
        noise_multiplier_, sampling_rate, n_iter_, delta_ = 10.0, 0.1, 1000, 1e-5

    eps, delta = total_privacy_spent([Fit(), Fit()])
    assert delta == pytest.approx(2e-5)
    assert eps == pytest.approx(compose_epsilon([(10.0, 0.1, 2000)], 2e-5))
    with pytest.raises(ValueError, match="not a fitted"):
        total_privacy_spent([object()])


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(epsilon=float("inf")), "epsilon"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(sampling_rate=0.0), "sampling_rate"),
        (dict(sampling_rate=1.5), "sampling_rate"),
        (dict(steps=0), "steps"),
        (dict(steps=2.5), "steps"),
    ],
)
def test_invalid_budget_names_the_parameter(kwargs, name):
    args = dict(epsilon=1.0, delta=1e-5, sampling_rate=0.1, steps=100)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        noise_multiplier(**args)


def test_unreachable_budget_is_an_error():
    with pytest.raises(ValueError, match="cannot be reached"):
        noise_multiplier(1e-6, 1e-5, 1.0, 1_000_000)
