"""Tests of skdpvi.noise_aware.gradient_model: likelihood, collapsed density, priors."""

import numpy as np
import pytest
from scipy import stats

from skdpvi.noise_aware import GradientModel

from ._traces import A_TRUE, KAPPA, PHI_STAR, TAU, simulate_traces


def test_sufficient_statistics_likelihood_equals_full_trace_likelihood(traces):
    res, phi, grads = traces[0][0], traces[1][0], traces[2][0]
    gm = GradientModel.from_stats(res.stats, KAPPA, res.noise_std)
    m = np.array([0.01, -0.02, 0.0, 0.03]) + PHI_STAR - res.stats.shift
    v = A_TRUE * 1.1 + np.log(-np.expm1(-A_TRUE * 1.1))  # softplus^-1, stable
    x = phi[1200:-1] - (res.stats.shift)
    g = grads[1200:]
    mean = KAPPA * A_TRUE * 1.1 * (x - m)
    full = stats.norm.logpdf(g, mean, TAU).sum(0)
    np.testing.assert_allclose(gm.log_likelihood(m, v), full, rtol=1e-9)


def test_collapsed_density_matches_numerical_integration_over_phi_star(traces):
    from scipy.integrate import quad

    res = traces[0][0]
    gm = GradientModel.from_stats(res.stats, KAPPA, res.noise_std)
    v1, v2 = gm.prior_v_mean * 0.9, gm.prior_v_mean * 1.1
    mean, sd = gm.conditional_m(v1)
    i = 1
    def integral(v):
        m0, s0 = gm.conditional_m(v)
        f = lambda m: np.exp(gm.log_joint(np.full(4, m), v)[i] - gm.log_joint(m0, v)[i])
        val, _ = quad(f, m0[i] - 12 * s0[i], m0[i] + 12 * s0[i])
        return np.log(val) + gm.log_joint(m0, v)[i]
    diff_numeric = integral(v1) - integral(v2)
    diff_closed = gm.log_marginal_v(v1)[i] - gm.log_marginal_v(v2)[i]
    assert diff_closed == pytest.approx(diff_numeric, rel=1e-6, abs=1e-6)


def test_bias_corrected_curvature_prior_is_closer_to_the_truth():
    results, _, _ = simulate_traces(40, a=np.array([3e3, 1e4]), phi_star=np.zeros(2), seed=3)
    raw, corrected = [], []
    for res in results:
        raw.append(GradientModel.from_stats(res.stats, KAPPA, res.noise_std).prior_v_mean)
        corrected.append(GradientModel.from_stats(res.stats, KAPPA, res.noise_std,
                                                  res.learning_rate).prior_v_mean)
    err_raw = np.abs(np.mean(raw, 0) / [3e3, 1e4] - 1)
    err_corrected = np.abs(np.mean(corrected, 0) / [3e3, 1e4] - 1)
    assert np.all(err_corrected < err_raw)
