"""Tests of skdpvi/integrations/arviz.py: real ArviZ calls on exported fits."""

import warnings

import numpy as np
import pytest

from skdpvi import DPBayesianLinearRegression
from skdpvi.integrations import to_inference_data

pd = pytest.importorskip("pandas")
with warnings.catch_warnings():  # ArviZ 0.x announces its 1.0 refactor on import
    warnings.simplefilter("ignore", FutureWarning)
    az = pytest.importorskip("arviz")

QUICK = dict(max_iter=400, n_posterior_samples=400, epsilon=2.0, random_state=0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.uniform(size=(800, 2)), columns=["age", "hours"])
    y = X.to_numpy() @ [0.4, -0.3] + 0.1 + rng.normal(0, 0.15, 800)
    return X, y


@pytest.fixture(scope="module")
def emcee_fit(data):
    return DPBayesianLinearRegression(**QUICK, inference="emcee").fit(*data)


def test_posterior_group_has_named_coordinates(emcee_fit):
    idata = to_inference_data(emcee_fit, n_samples=800, n_chains=4, random_state=3)
    assert isinstance(idata, az.InferenceData)
    post = idata.posterior
    assert list(post["coef"].coords["feature"].values) == ["age", "hours"]
    assert post["coef"].dims == ("chain", "draw", "feature")
    assert post["intercept"].shape == (4, 200) and post["noise_variance"].shape == (4, 200)
    draws = emcee_fit.posterior_.sample(800, random_state=3).reshape(4, 200, -1)
    np.testing.assert_array_equal(post["coef"].sel(feature="hours"), draws[:, :, 1])
    np.testing.assert_array_equal(post["noise_variance"], draws[:, :, 3])
    assert post.attrs["epsilon"] == emcee_fit.epsilon_ and post.attrs["inference"] == "emcee"
    table = az.summary(idata)  # ArviZ's own summary, labelled by the features
    assert list(table.index) == ["coef[age]", "coef[hours]", "intercept", "noise_variance"]
    assert np.all(table["ess_bulk"] > 400) and np.all(table["r_hat"] < 1.05)
    np.testing.assert_allclose(table["mean"], draws.reshape(800, -1).mean(0), atol=1e-3)


def test_emcee_chain_gives_arviz_ess_and_rhat(emcee_fit):
    idata = to_inference_data(emcee_fit)
    chain = emcee_fit.inference_diagnostics_["chain"]  # (steps, walkers, d)
    pp = idata.post_processing
    assert pp["v"].dims == ("chain", "draw", "component", "param")
    assert pp["v"].shape == (chain.shape[1], chain.shape[0], 2, 4)
    np.testing.assert_array_equal(pp["v"].sel(component="rho", param="coef[age]"),
                                  chain[:, :, 4].T)  # phi = (mu, rho): rho[0] is 4
    np.testing.assert_allclose(pp["curvature"], np.logaddexp(0, pp["v"]))
    table = az.summary(idata, group="post_processing", var_names=["v"])
    assert len(table) == 8 and table.index[0] == "v[mu, coef[age]]"
    # ArviZ's ESS of the chain is of the order of the backend's own estimate
    ess = az.ess(pp)["v"].values.ravel()
    own = idata.post_processing_stats["effective_sample_size"].values.ravel()
    assert np.all(ess > 0.3 * own) and np.all(ess < 3 * own)
    assert np.all(az.rhat(pp)["v"].values < 1.1)
    assert idata.post_processing_stats.attrs["n_steps"] == emcee_fit.inference_diagnostics_[
        "n_steps"]


def test_dpvi_release_is_exported_and_nothing_private(emcee_fit, data, tmp_path):
    idata = to_inference_data(emcee_fit)
    dpvi = idata.dpvi
    result = emcee_fit.dpvi_result_
    np.testing.assert_array_equal(dpvi["last_iterate"].values.ravel(), result.phi)
    np.testing.assert_allclose(dpvi["trace_mean"].values.ravel(),
                               result.stats.shift + result.stats.sum_x / result.stats.count)
    assert dpvi.attrs["noise_multiplier"] == emcee_fit.noise_multiplier_
    assert "dpvi_trace" not in idata.groups()  # the estimators do not record the trace
    assert "observed_data" not in idata.groups() and "constant_data" not in idata.groups()
    path = tmp_path / "fit.nc"  # every group and attribute can be written to netCDF
    idata.to_netcdf(str(path))
    assert az.from_netcdf(str(path)).groups() == idata.groups()


def test_recorded_dpvi_trace_and_no_private_diagnostics(data):
    from skdpvi.dpvi import run_dpvi
    from skdpvi.models import LinearRegressionModel

    X, y = data
    result = run_dpvi(LinearRegressionModel(2), (X.to_numpy(), y), noise_multiplier=1.0,
                      clip_norm=5.0, sampling_rate=0.1, n_steps=300, burn_in=60,
                      record_trace=True, return_diagnostics=True, random_state=0)
    assert "clipped_fraction" in result.diagnostics  # private, for simulations only
    idata = to_inference_data(result, param_names=["coef[0]", "coef[1]", "intercept",
                                                   "noise_variance"])
    assert set(idata.groups()) == {"dpvi", "dpvi_trace"}
    trace = idata.dpvi_trace
    assert trace["phi"].shape == (1, 300, 2, 4) and trace["gradient"].shape == (1, 300, 2, 4)
    np.testing.assert_array_equal(trace["phi"].values[0].reshape(300, 8), result.trace_phi[:-1])
    np.testing.assert_array_equal(trace["gradient"].values[0].reshape(300, 8), result.trace_grad)
    text = repr(idata.dpvi) + repr(idata.dpvi.attrs) + repr(trace.attrs)
    assert "clipped" not in text and "batch_size" not in text
    assert az.ess(trace)["phi"].shape == (2, 4)  # ArviZ reads it as a chain


def test_exact_backend_exports_its_draws_of_v(data):
    reg = DPBayesianLinearRegression(**QUICK, inference="exact").fit(*data)
    idata = to_inference_data(reg)
    assert idata.post_processing["v"].shape == (1, 400, 2, 4)
    assert "post_processing_stats" not in idata.groups()


def test_bad_arguments():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="not fitted"):
        to_inference_data(DPBayesianLinearRegression())


def test_bad_draw_counts(emcee_fit):
    with pytest.raises(ValueError, match="multiple of n_chains"):
        to_inference_data(emcee_fit, n_samples=10, n_chains=4)
    with pytest.raises(ValueError, match="n_chains"):
        to_inference_data(emcee_fit, n_chains=0)


def test_without_arviz_the_error_says_what_to_install(emcee_fit, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "arviz", None)
    with pytest.raises(ImportError, match=r"skdpvi\[arviz\]"):
        to_inference_data(emcee_fit)


def test_datatree_for_arviz_1(emcee_fit, monkeypatch):
    """ArviZ 1.x keeps its data in an xarray DataTree: the same groups."""
    import xarray as xr

    from skdpvi.integrations import arviz as module

    class Arviz1:
        __version__ = "1.3.0"

    groups = {"posterior": xr.Dataset({"a": (("chain", "draw"), np.zeros((1, 3)))})}
    tree = module._wrap(xr, Arviz1, groups)
    assert isinstance(tree, xr.DataTree) and "posterior" in tree.children
