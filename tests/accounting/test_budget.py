"""Budget validation names the offending parameter (skdpvi.accounting.budget)."""

import pytest

from skdpvi.accounting import noise_multiplier


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
