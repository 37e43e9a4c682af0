"""Export a fit to ArviZ (:func:`to_inference_data`); needs ``pip install skdpvi[arviz]``.

Everything exported is already released by the fit and covered by its privacy
guarantee: draws from ``posterior_``, the post-processing sampler's chain and
diagnostics (``inference_diagnostics_``) and the DP-SGD release (``dpvi_result_``:
its running statistics, and its trace if recorded). The data are never exported,
and neither are the engine's private diagnostics (``DPVIResult.diagnostics``).

ArviZ and xarray are imported only when :func:`to_inference_data` is called. ArviZ
0.x (what installs on Python 3.11) gets an :class:`arviz.InferenceData`; ArviZ 1.x
(Python >= 3.12) keeps its data in an :class:`xarray.DataTree` of the same groups.
"""

import re

import numpy as np

__all__ = ["to_inference_data"]

_INDEXED = re.compile(r"^(?P<var>[A-Za-z_][A-Za-z0-9_]*)\[(?P<label>.+)\]$")
# The scalar attributes of a DPVIResult that describe the release.
_RELEASE_ATTRS = ("noise_multiplier", "clip_norm", "sampling_rate", "n_steps", "burn_in")


def _import_xarray_arviz():
    try:
        import arviz
        import xarray
    except ImportError as exc:
        raise ImportError(
            "to_inference_data needs ArviZ: pip install 'skdpvi[arviz]' "
            "(or pip install arviz)."
        ) from exc
    return xarray, arviz


def _softplus(x):
    return np.logaddexp(0.0, x)


def _dim_name(var):
    return "feature" if var == "coef" else f"{var}_dim_0"


def _posterior_dataset(xr, draws, names, attrs):
    """theta draws (chain, draw, n_params) as variables: ``coef[age]`` -> coef[feature=age]."""
    columns = {}  # variable -> list of (label or None, column)
    for j, name in enumerate(names):
        match = _INDEXED.match(name)
        var, label = (match["var"], match["label"]) if match else (name, None)
        if var in columns and (label is None) != (columns[var][0][0] is None):
            var, label = name, None  # "coef" next to "coef[x]": keep the full name
        columns.setdefault(var, []).append((label, j))
    data_vars, coords = {}, {}
    for var, cols in columns.items():
        if cols[0][0] is None:
            data_vars[var] = (("chain", "draw"), draws[:, :, cols[0][1]])
        else:
            dim = _dim_name(var)
            data_vars[var] = (("chain", "draw", dim), draws[:, :, [j for _, j in cols]])
            coords[dim] = [label for label, _ in cols]
    coords["chain"] = np.arange(draws.shape[0])
    coords["draw"] = np.arange(draws.shape[1])
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


def _phi_layout(d, names):
    """Dims and coords of a vector of the d variational parameters phi.

    Mean-field phi = (mu, rho), d = 2 * n_params: dims ("component", "param"), so
    that ``v.sel(component="mu", param="coef[age]")`` reads naturally. Any other
    layout: one dim "phi" of length d.
    """
    if d == 2 * len(names):
        return ("component", "param"), {"component": ["mu", "rho"], "param": list(names)}
    return ("phi",), {"phi": np.arange(d)}


def _as_phi(values, d, dims):
    """Reshape the last axis (d) of ``values`` to ``dims``."""
    values = np.asarray(values)
    if dims == ("phi",):
        return values
    return values.reshape(*values.shape[:-1], 2, d // 2)


def _dpvi_datasets(xr, result, names):
    """The released DP-SGD statistics, and the trace if the run recorded it."""
    stats = result.stats
    d = stats.dim
    dims, coords = _phi_layout(d, names)
    vectors = {
        "last_iterate": result.phi,
        "trace_mean": stats.shift + stats.sum_x / stats.count,
        "gradient_mean": stats.sum_g / stats.count,
        "noise_std": result.noise_std,
        "learning_rate": result.learning_rate,
        "preconditioner": result.preconditioner,
        "shift": stats.shift,
        "sum_x": stats.sum_x,
        "sum_xx": stats.sum_xx,
        "sum_g": stats.sum_g,
        "sum_gg": stats.sum_gg,
        "sum_gx": stats.sum_gx,
    }
    data_vars = {
        key: (dims, _as_phi(np.broadcast_to(np.asarray(v, dtype=float), (d,)), d, dims))
        for key, v in vectors.items()
    }
    attrs = {key: getattr(result, key) for key in _RELEASE_ATTRS}
    attrs["count"] = int(stats.count)
    groups = {"dpvi": xr.Dataset(data_vars, coords=coords, attrs=attrs)}
    if result.trace_phi is not None and result.trace_grad is not None:
        # The engine releases g_{t+1}, evaluated at phi_t: pair them on step t.
        n_steps = len(result.trace_grad)
        trace_dims = ("chain", "draw", *dims)
        groups["dpvi_trace"] = xr.Dataset(
            {
                "phi": (trace_dims, _as_phi(result.trace_phi[None, :n_steps], d, dims)),
                "gradient": (trace_dims, _as_phi(result.trace_grad[None], d, dims)),
            },
            coords={"chain": [0], "draw": np.arange(n_steps), **coords},
            attrs={"burn_in": int(result.burn_in),
                   "note": "draw = DP-SGD step t; gradient = the noisy gradient "
                           "released at phi_t"},
        )
    return groups


def _post_processing_datasets(xr, diagnostics, d, names):
    """The backend's chain of v (emcee; or its independent draws, exact) and diagnostics."""
    dims, coords = _phi_layout(d, names)
    groups = {}
    chain = diagnostics.get("chain")
    if chain is not None:  # emcee: (steps, walkers, d); a walker is an ArviZ chain
        v = np.swapaxes(np.asarray(chain, dtype=float), 0, 1)
        note = ("emcee ensemble, one walker per chain (the walkers of an ensemble "
                "are not independent chains)")
    elif np.ndim(diagnostics.get("v")) == 2 and np.shape(diagnostics["v"])[0] == d:
        v = np.asarray(diagnostics["v"], dtype=float).T[None]  # exact: (d, M) draws
        note = "independent draws of the backend, one chain"
    else:
        v = None
    if v is not None:
        groups["post_processing"] = xr.Dataset(
            {
                "v": (("chain", "draw", *dims), _as_phi(v, d, dims)),
                "curvature": (("chain", "draw", *dims), _as_phi(_softplus(v), d, dims)),
            },
            coords={"chain": np.arange(v.shape[0]), "draw": np.arange(v.shape[1]),
                    **coords},
            attrs={"note": note + "; curvature = softplus(v), the gradient model's "
                                  "curvature a of each coordinate of phi"},
        )
    data_vars, attrs = {}, {}
    for key, value in diagnostics.items():
        arr = np.asarray(value)
        if key in ("chain", "v") or arr.dtype.kind not in "biuf":
            continue
        if arr.shape == (d,):
            data_vars[key] = (dims, _as_phi(arr.astype(float), d, dims))
        elif arr.size == 1:
            attrs[key] = arr.item()
    if data_vars or attrs:
        groups["post_processing_stats"] = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    return groups


def _check_draws(n_samples, n_chains):
    for name, value in (("n_samples", n_samples), ("n_chains", n_chains)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if n_samples % n_chains:
        raise ValueError(
            f"n_samples={n_samples} must be a multiple of n_chains={n_chains}."
        )


def _wrap(xr, arviz, groups):
    """InferenceData (ArviZ 0.x) or DataTree (ArviZ 1.x) of the groups."""
    major = int(str(arviz.__version__).split(".")[0])
    if major >= 1 or not hasattr(arviz, "InferenceData"):
        return xr.DataTree.from_dict(groups)
    return arviz.InferenceData(**groups)


def to_inference_data(fitted, *, n_samples=1000, n_chains=4, random_state=0,
                      unconstrained=False, param_names=None):
    """Export a fitted estimator (or a DPVI run) to ArviZ.

    Groups of the result:

    ``posterior``
        ``n_samples`` draws from ``posterior_``, as ``n_chains`` chains. Parameters
        named ``name[label]`` become one variable with a dimension
        (``coef[age]`` is ``coef`` at ``feature="age"``); ``intercept`` and
        ``noise_variance`` are scalar variables. The draws are independent, so the
        chains are an arbitrary split: ESS is about ``n_samples`` and R-hat about 1.
        The attributes hold the privacy (epsilon, delta, noise multiplier, ...).
    ``post_processing``
        Only for ``inference="emcee"`` (and ``"exact"``): the sampler's chain of
        ``v``, one walker per chain, and ``curvature = softplus(v)``, with dims
        ``component`` ("mu", "rho": the variational mean and scale parameter) and
        ``param``. :func:`arviz.summary` with ``group="post_processing"`` gives their
        ESS and R-hat, ``arviz.plot_trace(idata.post_processing)`` their traces.
    ``post_processing_stats``
        The backend's per-coordinate diagnostics (emcee: acceptance fraction,
        autocorrelation time, effective sample size; the number of steps as an
        attribute).
    ``dpvi``
        What DP-SGD released: the last iterate, the per-coordinate running sums
        after burn-in (and the means they give), the noise standard deviation,
        learning rate and preconditioner; the mechanism as attributes.
    ``dpvi_trace``
        Only when the run recorded its trace (``run_dpvi(..., record_trace=True)``,
        as ``DPBayesianLinearRegression`` and the logistic model with
        ``inference="statistics"`` do for their post-processing): ``phi`` and the
        noisy ``gradient`` at every step, one chain; released like the rest.

    Nothing else is exported: not the data, and not the engine's diagnostics
    (``DPVIResult.diagnostics``, statistics of the private data without noise).

    Parameters
    ----------
    fitted : fitted DPBayesianLinearRegression or DPBayesianLogisticRegression, or DPVIResult
        A fitted estimator (anything with ``posterior_``, ``param_names_``,
        ``dpvi_result_`` and ``inference_diagnostics_``), or the result of
        :func:`skdpvi.dpvi.run_dpvi`, which gives only the ``dpvi`` groups.
    n_samples : int, default=1000
        Posterior draws, a multiple of ``n_chains``.
    n_chains : int, default=4
        Chains the posterior draws are split into.
    random_state : int, numpy Generator or None, default=0
        Seeds the posterior draws.
    unconstrained : bool, default=False
        Export the posterior draws in the unconstrained space of the inference
        (e.g. the softplus-inverse of the noise variance).
    param_names : sequence of str, optional
        For a DPVIResult: names of its parameters (default ``"0"``, ``"1"``, ...).
        Ignored for an estimator, whose ``param_names_`` are used.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        InferenceData with ArviZ 0.x, a DataTree of the same groups with ArviZ 1.x.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> import arviz as az
    >>> from skdpvi import DPBayesianLinearRegression
    >>> from skdpvi.integrations import to_inference_data
    >>> rng = np.random.default_rng(0)
    >>> X = pd.DataFrame(rng.uniform(size=(2000, 2)), columns=["age", "hours"])
    >>> y = X @ [0.3, -0.2] + rng.normal(0, 0.15, 2000)
    >>> reg = DPBayesianLinearRegression(max_iter=500, inference="emcee",
    ...                                  random_state=0).fit(X, y)
    >>> idata = to_inference_data(reg)
    >>> idata.posterior["coef"].sel(feature="age").shape
    (4, 250)
    >>> table = az.summary(idata, group="post_processing", var_names=["v"])
    >>> "r_hat" in table.columns
    True
    """
    xr, arviz = _import_xarray_arviz()
    if hasattr(fitted, "stats") and hasattr(fitted, "phi"):  # a DPVIResult
        d = fitted.stats.dim
        names = ([str(n) for n in param_names] if param_names is not None
                 else [str(j) for j in range(d // 2)])
        return _wrap(xr, arviz, _dpvi_datasets(xr, fitted, names))
    if not hasattr(fitted, "posterior_"):
        from sklearn.exceptions import NotFittedError

        raise NotFittedError(
            f"{type(fitted).__name__} is not fitted (it has no posterior_): call fit "
            "first, or pass the DPVIResult of run_dpvi."
        )
    _check_draws(n_samples, n_chains)
    names = [str(n) for n in fitted.param_names_]
    draws = fitted.posterior_.sample(n_samples, random_state=random_state,
                                     unconstrained=unconstrained)
    draws = draws.reshape(n_chains, n_samples // n_chains, -1)
    attrs = {
        "created_by": "skdpvi",
        "estimator": type(fitted).__name__,
        "inference": str(fitted.posterior_.method),
        "epsilon": float(fitted.epsilon_),
        "delta": float(fitted.delta_),
        "noise_multiplier": float(fitted.noise_multiplier_),
        "clip_norm": float(fitted.clip_norm_),
        "sampling_rate": float(fitted.sampling_rate),
        "n_iter": int(fitted.n_iter_),
        "burn_in": int(fitted.burn_in_),
        "unconstrained": int(bool(unconstrained)),
        "note": "independent draws of the noise-aware mixture posterior; the "
                "chains are an arbitrary split",
    }
    groups = {"posterior": _posterior_dataset(xr, draws, names, attrs)}
    d = fitted.dpvi_result_.stats.dim
    groups.update(_post_processing_datasets(xr, fitted.inference_diagnostics_, d, names))
    groups.update(_dpvi_datasets(xr, fitted.dpvi_result_, names))
    return _wrap(xr, arviz, groups)
