"""The audit has teeth, and the real mechanism passes (skdpvi.privacy_audit).

Fast versions of ``benchmarks/privacy_audit.py`` (results in doc/results.rst). The
broken variants and the real mechanism are audited at epsilon = 1 with delta = 1e-3,
q = 0.5 and 8 steps: with a larger delta the same number of trials buys a bound
closer to the claim, which the sampling-rate variant (true epsilon about twice the
claim) needs to be caught with ten thousand trials rather than a hundred thousand.
"""

import numpy as np
import pytest

from skdpvi.privacy_audit import BROKEN_VARIANTS, audit_dpvi, make_canary_data
from skdpvi.privacy_audit.canaries import canary_clipped_gradients
from skdpvi.privacy_audit.mechanisms import run_mechanism

FAST = dict(epsilon=1.0, delta=1e-3, sampling_rate=0.5, n_steps=8)
#: trials per hypothesis each variant needs to be caught with a wide margin
TRIALS = {"weak_noise": 3000, "no_clipping": 1000, "reused_noise": 1000,
          "double_rate": 20_000}


def test_canary_gradient_is_minus_c_along_its_own_coordinate():
    data = make_canary_data(n_samples=20, n_canaries=8)
    grads = canary_clipped_gradients(data, clip_norm=2.0)
    for k, coordinate in enumerate(data.coordinates):
        assert grads[k, coordinate] == pytest.approx(-2.0, rel=1e-6)
        others = np.delete(grads[k], coordinate)
        assert np.linalg.norm(others) < 0.01 * 2.0  # only the 1/N prior share


def test_reference_mechanism_reproduces_the_engine():
    # the broken variants run on a re-implementation; unbroken, it draws its random
    # numbers in the engine's order and releases the same gradients
    data = make_canary_data(n_samples=20, n_canaries=4)
    settings = dict(noise_multiplier=2.0, clip_norm=1.0, sampling_rate=0.3, n_steps=5,
                    learning_rate=0.05, n_mc_samples=10, preconditioner=None,
                    init_mean=data.init_mean)
    real, _ = run_mechanism("real", data.model, data.with_canaries, [3, 4], **settings)
    ref, _ = run_mechanism("reference", data.model, data.with_canaries, [3, 4], **settings)
    np.testing.assert_allclose(ref, real, rtol=1e-5, atol=1e-6)


def test_real_mechanism_passes_and_the_canary_acts_only_through_the_mechanism():
    result = audit_dpvi(**FAST, n_trials=4000)
    assert result.passed and result.mechanism == "real"
    # the canary adds C when sampled (q of the steps) and nothing else; the noise
    # along its coordinate is sigma C
    se = result.noise_multiplier * np.sqrt(2 / (result.n_trials * result.n_steps))
    assert abs(result.signal_per_step - 0.5) < 4 * se
    assert result.noise_per_step == pytest.approx(1.0, abs=0.02)


def test_null_canary_is_invisible():
    # a row of zeros changes the run only through the number of rows N, which the
    # accounting treats as public: no measurable signal, no lower bound
    result = audit_dpvi(**FAST, n_trials=4000, canary="null")
    se = result.noise_multiplier * np.sqrt(2 / (result.n_trials * result.n_steps))
    assert abs(result.signal_per_step) < 4 * se
    assert result.epsilon_lower < 0.2


@pytest.mark.parametrize("variant", sorted(BROKEN_VARIANTS))
def test_every_broken_variant_is_caught(variant):
    result = audit_dpvi(**FAST, mechanism=variant, n_trials=TRIALS[variant])
    assert result.epsilon_lower > FAST["epsilon"], result.summary()


def test_gaussian_mechanism_audit_reaches_half_the_claim():
    # one full-batch step is the Gaussian mechanism: the optimal test is a threshold
    # on the projection, and the audit must get within a factor 2 of the claim
    result = audit_dpvi(3.0, 1e-5, 1.0, 1, n_trials=100_000)
    assert result.passed
    assert result.epsilon_lower >= 1.5, result.summary()
