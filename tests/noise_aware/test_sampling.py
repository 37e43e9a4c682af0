"""Tests of skdpvi.noise_aware.sampling: sample_phi_star's options and input checks."""

import numpy as np
import pytest

from skdpvi.dpvi import TraceStatistics
from skdpvi.noise_aware import GradientModel, sample_phi_star

from ._traces import A_TRUE, KAPPA, _coverage, simulate_traces


def test_curvature_bias_correction_is_opt_in_and_widens_slow_coordinates():
    (res,), _, _ = simulate_traces(1, a=np.array([3e3, 1e6]), phi_star=np.zeros(2), seed=5)
    default, _ = sample_phi_star(res, "exact", 4000, random_state=0)
    off, _ = sample_phi_star(res, "exact", 4000, random_state=0,
                             curvature_bias_correction=False)
    on, _ = sample_phi_star(res, "exact", 4000, random_state=0,
                            curvature_bias_correction=True)
    np.testing.assert_array_equal(default, off)
    # the slow coordinate's curvature prior moves down, so phi* gets less certain
    assert on[:, 0].std() > 1.05 * off[:, 0].std()
    # a fast coordinate is barely affected
    assert on[:, 1].std() == pytest.approx(off[:, 1].std(), rel=0.05)


def test_bad_inputs_give_clear_errors(traces):
    res, phi, grads = traces[0][0], traces[1][0], traces[2][0]
    with pytest.raises(ValueError, match="Unknown inference method"):
        sample_phi_star(res, "nuts")
    with pytest.raises(ValueError, match="burn_in"):
        TraceStatistics.from_trace(phi[:100], grads[:99], burn_in=200)
    bad = grads.copy()
    bad[500, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        TraceStatistics.from_trace(phi, bad, burn_in=100)
    with pytest.raises(ValueError, match="shape"):
        TraceStatistics.from_trace(phi, grads[:-5], burn_in=100)
    with pytest.raises(ValueError, match="n_samples"):
        sample_phi_star(res, "exact", n_samples=0)
    diverged = TraceStatistics(**{**res.stats.__dict__, "sum_xx": np.full(4, np.inf)})
    with pytest.raises(ValueError, match="diverged"):
        GradientModel.from_stats(diverged, KAPPA, res.noise_std)


def test_shifted_statistics_equal_statistics_of_the_shifted_trace(traces):
    results, phi, grads = traces
    offset = np.array([3.0, -1.0, 0.0, 250.0])
    shifted = results[0].stats.with_gradients_shifted(offset)
    direct = TraceStatistics.from_trace(phi[0], grads[0] - offset, 1200)
    for name in ("count", "shift", "sum_x", "sum_xx", "sum_g", "sum_gg", "sum_gx"):
        np.testing.assert_allclose(getattr(shifted, name), getattr(direct, name),
                                   rtol=1e-9, atol=1e-6)


def test_a_known_gradient_offset_is_removed():
    """Traces whose gradients carry an offset settle at phi* - b / (kappa a); given b,
    the posterior covers phi* again, though below the nominal rate: it extrapolates
    from the trace to phi* with an estimated curvature (0.80 here, 0.85-1.0 for the
    same traces without offset)."""
    offset = KAPPA * A_TRUE * 0.05  # moves the trace by 0.05, about 10 posterior sd
    results, _, _ = simulate_traces(60, offset=offset, seed=3)
    assert _coverage(results, "exact") < 0.1
    assert _coverage(results, "exact", gradient_offset=offset) > 0.72
    with pytest.raises(ValueError, match="gradient_offset"):
        sample_phi_star(results[0], "exact", 10, gradient_offset=np.zeros(3))
