"""Tests of skdpvi.noise_aware.backends.registry: sample_phi_star looks backends up by name."""

import numpy as np
import pytest

import skdpvi.noise_aware as noise_aware
from skdpvi.noise_aware import INFERENCE_METHODS, register_backend, sample_phi_star
from skdpvi.noise_aware.backends import registry

from ._traces import simulate_traces


@pytest.fixture
def scratch_registry(monkeypatch):
    """The registry as it is, on a copy that the test may change."""
    monkeypatch.setattr(registry, "_BACKENDS", dict(registry._BACKENDS))


def test_a_registered_backend_is_used_by_name(scratch_registry):
    (res,), _, _ = simulate_traces(1, n_steps=300, burn_in=100)
    calls = []

    def toy(model, n_samples, rng, scale=1.0):
        calls.append((model.dim, n_samples, scale))
        return np.full((n_samples, model.dim), scale), {"toy": True}

    assert register_backend("toy", toy) is toy
    assert noise_aware.INFERENCE_METHODS == INFERENCE_METHODS + ("toy",)
    draws, diagnostics = sample_phi_star(res, "toy", 5, random_state=0,
                                         backend_options=dict(scale=2.0))
    assert calls == [(4, 5, 2.0)]
    assert diagnostics["toy"] is True and set(diagnostics) == {"toy", "split_p_value"}
    np.testing.assert_array_equal(draws, np.tile(res.stats.shift + 2.0, (5, 1)))

    with pytest.raises(ValueError, match="already registered"):
        register_backend("toy", toy)
    register_backend("toy", lambda model, n, rng: (np.zeros((n, model.dim)), {}), replace=True)
    np.testing.assert_array_equal(sample_phi_star(res, "toy", 2)[0],
                                  np.tile(res.stats.shift, (2, 1)))
    # a model-free backend gets the run itself and returns phi* draws
    register_backend("first", lambda result, n, rng: (np.tile(result.phi, (n, 1)), {}),
                     needs_model=False)
    np.testing.assert_array_equal(sample_phi_star(res, "first", 3)[0], np.tile(res.phi, (3, 1)))


def test_unknown_names_raise_naming_the_registered_ones(scratch_registry):
    assert INFERENCE_METHODS == ("emcee", "exact", "laplace", "last_iterate")
    (res,), _, _ = simulate_traces(1, n_steps=300, burn_in=100)
    register_backend("toy", lambda model, n, rng: (np.zeros((n, model.dim)), {}))
    with pytest.raises(ValueError, match="Unknown inference method") as info:
        sample_phi_star(res, "nuts")
    for name in INFERENCE_METHODS + ("toy",):
        assert repr(name) in str(info.value)
    with pytest.raises(ValueError, match="Unknown inference method"):
        sample_phi_star(res, ["exact"])
    with pytest.raises(ValueError, match="non-empty string"):
        register_backend("", lambda model, n, rng: None)
    with pytest.raises(ValueError, match="callable"):
        register_backend("bad", "not a function")
