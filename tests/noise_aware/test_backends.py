"""Tests of skdpvi.noise_aware.backends: each backend's draws of phi*."""

import warnings

import numpy as np
import pytest
from scipy import stats

from skdpvi.noise_aware import sample_phi_star

from ._traces import _coverage


@pytest.mark.parametrize("level", [0.5, 0.9])
def test_exact_intervals_cover_at_nominal_rate(traces, level):
    results, _, _ = traces
    coverage = _coverage(results, "exact", level)  # 600 intervals: sd ~0.012-0.02
    assert abs(coverage - level) < 0.06


def test_emcee_intervals_cover_at_nominal_rate(traces):
    results, _, _ = traces
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        coverage = _coverage(results[:40], "emcee", 0.9,
                             backend_options=dict(min_ess=200, max_steps=2000))
    assert 0.84 <= coverage <= 0.96


def test_last_iterate_ignores_the_noise_and_undercovers(traces):
    results, _, _ = traces
    assert _coverage(results[:20], "last_iterate") < 0.05


def test_exact_and_emcee_agree_on_the_same_trace(traces):
    res = traces[0][0]
    exact, _ = sample_phi_star(res, "exact", 4000, random_state=0)
    mcmc, diag = sample_phi_star(res, "emcee", 4000, random_state=1)
    assert np.all(diag["effective_sample_size"] >= 1000)
    assert np.all((diag["acceptance_fraction"] > 0.2) & (diag["acceptance_fraction"] < 0.95))
    for i in range(exact.shape[1]):
        # emcee draws are autocorrelated: compare with a generous threshold
        assert stats.ks_2samp(exact[:, i], mcmc[:, i]).pvalue > 1e-3


def test_laplace_is_close_where_the_posterior_is_near_gaussian(traces):
    res = traces[0][0]
    exact, _ = sample_phi_star(res, "exact", 20000, random_state=0)
    lap, _ = sample_phi_star(res, "laplace", 20000, random_state=0)
    q = [0.05, 0.5, 0.95]
    qe, ql = np.quantile(exact, q, axis=0), np.quantile(lap, q, axis=0)
    width = qe[2] - qe[0]
    # fast-relaxing coordinates (large curvature): near-Gaussian, Laplace is close
    np.testing.assert_allclose(ql[:, 1:], qe[:, 1:], atol=0.1 * width[1:].max())
    # the slowest coordinate has a heavy tail towards small curvature that the
    # Gaussian approximation cuts (design-notes 3.5)
    assert exact[:, 0].std() > 3 * lap[:, 0].std()


def test_emcee_warns_when_draws_are_unreliable(traces):
    with pytest.warns(RuntimeWarning, match="unreliable"):
        sample_phi_star(traces[0][0], "emcee", 100, random_state=0,
                        backend_options=dict(min_ess=10_000, max_steps=400))


@pytest.mark.parametrize("bad, name", [
    (dict(n_samples=0), "n_samples"), (dict(hessian_prior_scale=-1.0), "hessian_prior_scale"),
    (dict(hessian_prior_scale=float("nan")), "hessian_prior_scale"),
    (dict(subsampling_variance=-1.0), "subsampling_variance"),
    (dict(subsampling_variance=float("nan")), "subsampling_variance"),
])
def test_bad_settings_name_the_parameter_instead_of_nan_draws(traces, bad, name):
    # a negative or NaN prior scale gave all-NaN draws, a negative subsampling
    # variance silently changed them
    with pytest.raises(ValueError, match=name):
        sample_phi_star(traces[0][0], "exact", **{"n_samples": 100, **bad})


@pytest.mark.parametrize("method, options, message", [
    ("exact", dict(n_gird=5), r"the 'exact' backend takes \['n_grid'\], got unknown \['n_gird'\]"),
    ("emcee", dict(nwalkers=4), r"got unknown \['nwalkers'\]"),
    ("laplace", dict(n_grid=5), "the 'laplace' backend takes no options"),
    ("exact", [("n_grid", 5)], "backend_options must be a dict"),
])
def test_unknown_backend_options_are_named(traces, method, options, message):
    # before: the backend's own TypeError ("unexpected keyword argument")
    with pytest.raises(ValueError, match=message):
        sample_phi_star(traces[0][0], method, 10, random_state=0, backend_options=options)
    # a backend taking **kwargs takes any
    sample_phi_star(traces[0][0], "last_iterate", 10, backend_options=dict(anything=1))
