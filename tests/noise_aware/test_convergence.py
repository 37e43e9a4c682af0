"""Tests of skdpvi.noise_aware.convergence: the split-window test on known traces."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skdpvi.dpvi import DPVIResult, TraceStatistics
from skdpvi.noise_aware import sample_phi_star, split_window_test

from ._traces import KAPPA, LAM, TAU, simulate_traces


def _trace(a_first, a_second, phi_star_second=0.0, n_steps=6000, seed=0):
    """One settled linear-Gaussian coordinate whose relation may change half-way."""
    rng = np.random.default_rng(seed)
    phi, grads = np.zeros(n_steps + 1), np.zeros(n_steps)
    for t in range(n_steps):
        a, star = (a_first, 0.0) if t < n_steps // 2 else (a_second, phi_star_second)
        grads[t] = KAPPA * a * (phi[t] - star) + TAU * rng.standard_normal()
        phi[t + 1] = phi[t] - LAM * grads[t]
    return phi[:, None], grads[:, None]


def test_p_values_are_uniform_when_one_relation_holds():
    # settled traces (burn-in of 3,000 steps, 9 relaxation times of the slowest
    # coordinate): the p-values of the coordinates that relax within a few hundred
    # steps are uniform; the slowest (4.5 relaxation times per half window) rejects
    # too often, as least squares on a near-unit-root regressor does, but the
    # run's Bonferroni p-value stays below the warning level in under 1 % of the runs
    results, _, _ = simulate_traces(300, n_steps=6000, burn_in=3000, seed=3)
    p = np.array([split_window_test(r.stats)[1] for r in results])
    fast = p[:, 1:].ravel()
    assert 0.035 < np.mean(fast < 0.05) < 0.075
    assert 0.07 < np.mean(fast < 0.1) < 0.14
    assert np.mean(p[:, 0] < 0.05) < 0.2
    runs = np.array([split_window_test(r.stats)[0] for r in results])
    assert np.mean(runs < 1e-3) < 0.01


@pytest.mark.parametrize("change", [dict(a_second=6e5), dict(a_second=3e5, phi_star_second=0.05)])
def test_a_changed_relation_is_detected(change):
    # curvature doubled, or the optimum moved by about 1.5 posterior sds of the
    # window's phi*, half-way through: each fails the test
    phi, grads = _trace(3e5, **change)
    p_value, p_values = split_window_test(TraceStatistics.from_trace(phi, grads, 0))
    assert p_value < 1e-3
    assert p_value == pytest.approx(min(1.0, p_values.min()))


def test_sample_phi_star_warns_only_when_the_halves_disagree():
    def result(phi, grads):
        return DPVIResult(phi=phi[-1], stats=TraceStatistics.from_trace(phi, grads, 0),
                          noise_multiplier=TAU, clip_norm=1.0, sampling_rate=KAPPA,
                          preconditioner=np.ones(1), learning_rate=np.full(1, LAM),
                          n_steps=len(grads), burn_in=0)

    settled = result(*_trace(3e5, 3e5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        _, diagnostics = sample_phi_star(settled, "exact", 100, random_state=0)
    assert diagnostics["split_p_value"] > 1e-3
    moved = result(*_trace(3e5, 6e5))
    with pytest.warns(ConvergenceWarning, match="split-window"):
        _, diagnostics = sample_phi_star(moved, "exact", 100, random_state=0)
    assert diagnostics["split_p_value"] < 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        sample_phi_star(moved, "exact", 100, random_state=0, check=False)
        # the naive backend is checked too
    with pytest.warns(ConvergenceWarning):
        sample_phi_star(moved, "last_iterate", 10, random_state=0)


def test_statistics_without_halves_skip_the_test():
    (res,), _, _ = simulate_traces(1, seed=1)
    bare = TraceStatistics(**{**res.stats.__dict__, "halves": None})
    p_value, p_values = split_window_test(bare)
    assert np.isnan(p_value) and np.all(np.isnan(p_values))
