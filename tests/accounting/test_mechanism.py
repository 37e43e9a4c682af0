"""Mechanism descriptions and their composition (skdpvi.accounting.mechanism)."""

import pytest

from skdpvi.accounting import DPSGDMechanism, compose_epsilon
from skdpvi.accounting.mechanism import merge_repeats


def test_composition_of_two_runs():
    one = compose_epsilon([(10.0, 0.1, 1000)], 1e-5)
    two = compose_epsilon([(10.0, 0.1, 1000), (10.0, 0.1, 1000)], 1e-5)
    assert two == pytest.approx(compose_epsilon([(10.0, 0.1, 2000)], 1e-5), rel=1e-9)
    assert one < two < 2 * one


def test_mechanisms_and_triples_are_accounted_alike():
    run = DPSGDMechanism(noise_multiplier=10.0, sampling_rate=0.1, steps=1000)
    assert compose_epsilon([run, (10.0, 0.1, 1000)], 1e-5) == compose_epsilon(
        [(10.0, 0.1, 2000)], 1e-5)
    with pytest.raises(ValueError, match="noise_multiplier"):
        compose_epsilon([DPSGDMechanism(-1.0, 0.1, 1000)], 1e-5)
    with pytest.raises(ValueError, match="steps"):
        compose_epsilon([DPSGDMechanism(10.0, 0.1, 0)], 1e-5)


def test_repeated_mechanisms_merge_into_one():
    merged = merge_repeats([DPSGDMechanism(10.0, 0.1, 1000), DPSGDMechanism(5.0, 0.2, 10),
                            DPSGDMechanism(10.0, 0.1, 500)])
    assert merged == (DPSGDMechanism(5.0, 0.2, 10), DPSGDMechanism(10.0, 0.1, 1500))


def test_a_mechanism_is_validated_when_built():
    # DPSGDMechanism(-1, 5, 0) was accepted, and a pair instead of a triple ended in
    # "not enough values to unpack" (second review)
    import pytest

    from skdpvi.accounting import DPSGDMechanism, compose_epsilon

    with pytest.raises(ValueError, match="noise_multiplier"):
        DPSGDMechanism(-1, 0.1, 10)
    with pytest.raises(ValueError, match="sampling_rate"):
        DPSGDMechanism(1.0, 5, 10)
    with pytest.raises(ValueError, match="triple"):
        compose_epsilon([(1.0, 0.1)], 1e-5)
