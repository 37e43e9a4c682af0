"""The accountant is right, or says no, across budgets: a property test against an
independent accountant (Google's dp_accounting PLD, a test-only dependency).

A fast subset of the 108-point grid of ``benchmarks/accounting_grid.py`` (whose
results are in doc/performance.rst): every point that failed before issue 16 in a
different way (complex noise multipliers, "cannot be reached" for a reachable budget,
errors from the PRV internals), and a few that did not.
"""

import math
import warnings

import pytest

from skdpvi.accounting import epsilon_spent, noise_multiplier

dp_accounting = pytest.importorskip("dp_accounting")


def reference_epsilon(sigma, q, steps, delta, grid):
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=grid)
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, steps))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return accountant.get_epsilon(delta)


def reference_grid(epsilon, sigma, q):
    """Fine against epsilon and against one step's privacy loss (see the benchmark)."""
    step_scale = min(q * math.sqrt(math.expm1(min(1 / sigma**2, 50.0))), 1 / sigma)
    return min(1e-4, epsilon / 1000, step_scale / 100)


SERVED = [
    (0.05, 0.2, 1.0, 100),    # complex sigma, negative epsilon
    (8.0, 0.2, 1.0, 1),       # complex sigma
    (8.0, 0.01, 0.1, 1),      # "cannot be reached", plainly reachable
    (1.0, 0.2, 0.1, 100),     # "Cannot compute epsilon" from the PRV internals
    (8.0, 0.2, 0.1, 100),     # idem
    (1.0, 0.5, 0.1, 200),     # the (-0.672+0.218j, -0.41)
    (1.0, 1e-5, 0.1, 100),    # passed before: still right
    (8.0, 1e-9, 0.001, 100),
]


@pytest.mark.parametrize("epsilon, delta, q, steps", SERVED)
def test_certified_epsilon_is_real_tight_and_an_upper_bound(epsilon, delta, q, steps):
    sigma, achieved = noise_multiplier(epsilon, delta, q, steps)
    assert isinstance(sigma, float) and isinstance(achieved, float)
    assert math.isfinite(sigma) and sigma > 0
    assert 0.995 * epsilon <= achieved <= epsilon
    reference = reference_epsilon(sigma, q, steps, delta, reference_grid(epsilon, sigma, q))
    # dp_accounting's connect-the-dots epsilon is itself a (tight) upper bound
    assert achieved >= reference * (1 - 5e-4)
    assert epsilon_spent(sigma, delta, q, steps) >= reference * (1 - 5e-4)


@pytest.mark.parametrize("epsilon, delta, q, steps", [
    (1.0, 0.01, 0.001, 1), (8.0, 0.2, 0.1, 1), (0.05, 0.2, 0.001, 100),
])
def test_budgets_met_without_noise_are_refused_with_the_reason(epsilon, delta, q, steps):
    with pytest.raises(ValueError, match="without noise.*delta well below 1 / n_samples"):
        noise_multiplier(epsilon, delta, q, steps)
    # indeed: even a tiny noise multiplier spends no epsilon at that delta
    assert reference_epsilon(0.3, q, steps, delta, 1e-3) == 0.0
    assert epsilon_spent(0.3, delta, q, steps) == 0.0


def test_noise_multiplier_is_monotone():
    # one step along each axis from (1, 1e-5, q=0.1, 10 steps); the benchmark checks
    # every pair of grid neighbours
    base = noise_multiplier(1.0, 1e-5, 0.1, 10)[0]
    assert noise_multiplier(8.0, 1e-5, 0.1, 10)[0] < base
    assert noise_multiplier(1.0, 0.2, 0.1, 10)[0] < base
    assert noise_multiplier(1.0, 1e-5, 0.1, 100)[0] > base


def test_returned_bound_belongs_to_the_returned_sigma():
    # before: a fit with delta=0.5 and 10^4 steps reported epsilon_=0.079 for a target
    # of 1, the bound of a previous, larger sigma; dp_accounting gave 2.5 for its sigma
    sigma, achieved = noise_multiplier(1.0, 0.5, 0.1, 10_000)
    assert 0.995 <= achieved <= 1.0
    reference = reference_epsilon(sigma, 0.1, 10_000, 0.5, reference_grid(1.0, sigma, 0.1))
    assert reference <= achieved
    assert reference == pytest.approx(achieved, rel=0.01)
