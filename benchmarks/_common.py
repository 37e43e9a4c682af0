"""Shared machinery of the reproduction benchmarks.

One simulation = draw theta from the prior, simulate a data set, run DP-SGD once, and
post-process that single run with every backend, so the backends are compared on the
very same privatised traces. Simulations run in parallel with joblib and are seeded
from one master seed (identical results whatever n_jobs is). The TARP studies run
their simulations in batches through the lockstep engine (skdpvi.dpvi.run_dpvi_batched), which
gives every simulation the run it would get alone, several times faster.
"""

import json
import os
import platform
import sys
import time

import numpy as np
from joblib import Parallel, delayed

from skdpvi import DPBayesianLinearRegression
from skdpvi.accounting import noise_multiplier
from skdpvi.dpvi import heuristic_learning_rate, run_dpvi, run_dpvi_batched
from skdpvi.dpvi.schedule import _default_preconditioning
from skdpvi.metrics import coverage_rmse_floor, tarp_coverage
from skdpvi.noise_aware import (coupled_means, linear_response_posterior, mean_field_curvature,
                                logistic_wander_width, remove_wander_bias, sample_phi_star,
                                statistics_posterior)
from skdpvi.models import LinearRegressionModel
from skdpvi.noise_aware.statistics_sampling import NoValidDraws
from skdpvi.posterior import NoiseAwarePosterior

METHODS = ("emcee", "exact", "exact_kendall", "laplace", "last_iterate")
# "statistics": the default post-processing of models with data statistics
# (skdpvi.noise_aware.statistics_posterior). The others are the paper's gradient
# model of phi*: "exact_kendall" is exact inference with
# curvature_bias_correction=True, measured on the same traces to show what it changes.
RESULTS_DIR = os.path.join(os.path.dirname(__file__), "results")


def _engine_settings(model, *, epsilon, clip_norm, n_steps, sampling_rate, delta, burn_in,
                     preconditioner, learning_rate_scale, n_examples=None, record_trace=False,
                     mean_preconditioning=True):
    """The run_dpvi keyword arguments the estimators' defaults would use (with the
    recorded trace of a linear model, the linear estimator's correlation step matrix,
    unless ``mean_preconditioning=False``)."""
    sigma, _ = noise_multiplier(epsilon, delta, sampling_rate, n_steps)
    # exactly the estimators' defaults, so the tables measure what users get
    lam = heuristic_learning_rate(sigma, clip_norm, n_steps, 2 * model.n_params,
                                  learning_rate_scale)
    beta = (_default_preconditioning(lam, n_steps, model, clip_norm, n_examples)
            if preconditioner is None else preconditioner)
    settings = dict(noise_multiplier=sigma, clip_norm=clip_norm, learning_rate=lam,
                    sampling_rate=sampling_rate, n_steps=n_steps,
                    burn_in=int(burn_in * n_steps), preconditioner=beta,
                    return_diagnostics=True, record_trace=record_trace)
    if record_trace and mean_preconditioning and isinstance(model, LinearRegressionModel):
        # the linear estimator's default (mean_preconditioning="auto" with its trace)
        step_matrix = DPBayesianLinearRegression()._step_matrix(dict(settings, model=model),
                                                                n_examples)
        if step_matrix is not None:
            settings["step_matrix"] = step_matrix
    return settings


def _needs_trace(methods):
    """The statistics posterior and the least-squares curvature read the recorded trace."""
    return any(m == "statistics" or m.endswith("+ls") for m in methods)


def _post_process(res, model, seed, n_draws, methods, n_examples=None):
    posteriors = {}
    diagnostics = dict(res.diagnostics)
    for k, method in enumerate(methods):
        if method == "statistics":
            import warnings

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    components, diag = statistics_posterior(
                        res, model.data_statistics(n_examples), n_draws, random_state=seed + k)
                except NoValidDraws:
                    # as the estimator does: the paper's gradient model for this run
                    phi, _ = sample_phi_star(res, "exact", n_draws, random_state=seed + k)
                    posteriors[method] = NoiseAwarePosterior(phi, model, "exact")
                    diagnostics["fallback"] = True
                    continue
            diagnostics["convergence_warning"] = any(
                "do not follow" in str(w.message) for w in caught)
            diagnostics["split_p_value"] = diag["split_p_value"]
            diagnostics["clipping_correction"] = diag.get("clipping_correction")
            diagnostics["scale_relative_sd"] = diag.get("scale_relative_sd")
            posteriors[method] = NoiseAwarePosterior.from_components(components, model, method)
            continue
        backend = "exact" if method.startswith("exact") else method.split("+")[0]
        phi, _ = sample_phi_star(res, backend, n_draws, random_state=seed + k,
                                 curvature_bias_correction=method == "exact_kendall")
        if method.endswith("+coupled"):
            phi, _ = coupled_means(phi, res.stats, n_means=model.n_params,
                                   learning_rate=res.learning_rate, noise_std=res.noise_std,
                                   random_state=seed + k)
        if method.endswith("+ls"):
            # the dense model with the least-squares curvature (an ablation of
            # ablation_logistic/curvature_sources.py; draws of theta, not components)
            ablations = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "ablation_logistic")
            if ablations not in sys.path:
                sys.path.insert(0, ablations)
            from curvature_sources import draws as curvature_draws

            theta = curvature_draws(res, model, "ls", None, len(phi))
            # components of (numerically) zero width at the draws
            phi_ls = np.column_stack([theta, np.full_like(theta, -40.0)])
            posteriors[method] = NoiseAwarePosterior(phi_ls, model, "ls")
            continue
        probit = method.endswith("+probit")  # the wander's Jensen bias removed
        width = (logistic_wander_width(res.stats, n_means=model.n_params,
                                       sampling_rate=res.sampling_rate,
                                       prior_scale=model.prior_scale) if probit else 0.0)
        if "+dense" in method:
            # "+shrunk": the wander's noise bulk shrunk (nineteenth session); "+kunclog[c]":
            # the extrapolation's curvature uncertainty (twentieth); plain "+dense": the
            # estimator's dense error model
            diagonal = (mean_field_curvature(res.stats, model.n_params, res.sampling_rate)
                        if "+shrunk" in method else None)
            # "+shrunk<m>": m looks per relaxation time (default 2), as in designs.py
            shrunk = [part for part in method.split("+") if part.startswith("shrunk")]
            looks = float(shrunk[0][6:] or 2.0) if shrunk else 2.0
            components, info = linear_response_posterior(
                res.stats, n_means=model.n_params, learning_rate=res.learning_rate,
                noise_std=res.noise_std, sampling_rate=res.sampling_rate,
                prior_scale=getattr(model, "prior_scale", 1.0), n_components=len(phi),
                diagonal_curvature=diagonal, effective_relaxations=looks,
                **kunc_options(method),
                random_state=seed + k)
            if probit:
                components.mean = remove_wander_bias(
                    components.mean, width, prior_scale=model.prior_scale,
                    covariance=info["component_covariance"])
            posteriors[method] = NoiseAwarePosterior.from_components(components, model, method)
            continue
        if probit:
            p = model.n_params
            phi = phi.copy()
            phi[:, :p] = remove_wander_bias(phi[:, :p], width, prior_scale=model.prior_scale,
                                            variances=np.logaddexp(0, phi[:, p:]) ** 2)
        posteriors[method] = NoiseAwarePosterior(phi, model, backend)
    return posteriors, diagnostics


def kunc_options(method):
    """Keyword arguments of ``linear_response_posterior`` for a method's ``+kunclog<c>``.

    ``kunclog2``: ``curvature_uncertainty=2`` in mode "shift" with the default bound 1
    on the log-normal sd; ``kunclog2cap0.5`` another bound; ``kunclog2uncapped`` none;
    ``kuncpost2`` mode "posterior". No such part: the point estimate.
    """
    parts = [part for part in method.split("+") if part.startswith(("kunclog", "kuncpost"))]
    if not parts:
        return {}
    mode = "posterior" if parts[0].startswith("kuncpost") else "shift"
    spec, options = parts[0][8 if mode == "posterior" else 7:], {"curvature_mode": mode}
    if spec.endswith("uncapped"):
        spec, options["max_log_sd"] = spec[:-8], None
    elif "cap" in spec:
        spec, cap = spec.split("cap")
        options["max_log_sd"] = float(cap)
    return {"curvature_uncertainty": float(spec or 2.0), **options}


def fit_all_backends(model, data, *, epsilon, clip_norm, n_steps=10_000, sampling_rate=0.1,
                     delta=1e-5, burn_in=0.2, preconditioner=None, seed=0, n_draws=1000,
                     methods=METHODS, learning_rate_scale=1.0):
    """Run DP-SGD once; return {method: NoiseAwarePosterior} and the run's diagnostics.

    ``learning_rate_scale`` should be the default of the estimator the benchmark
    stands for (``Estimator._default_learning_rate_scale(2 * n_params)``).
    """
    settings = _engine_settings(model, epsilon=epsilon, clip_norm=clip_norm, n_steps=n_steps,
                                sampling_rate=sampling_rate, delta=delta, burn_in=burn_in,
                                preconditioner=preconditioner,
                                learning_rate_scale=learning_rate_scale,
                                n_examples=len(data[0]), record_trace=_needs_trace(methods))
    res = run_dpvi(model, data, random_state=seed, **settings)
    return _post_process(res, model, seed, n_draws, methods, n_examples=len(data[0]))


def fit_all_backends_batched(model, datasets, seeds, *, epsilon, clip_norm, n_steps=10_000,
                             sampling_rate=0.1, delta=1e-5, burn_in=0.2, preconditioner=None,
                             n_draws=1000, methods=METHODS, learning_rate_scale=1.0):
    """:func:`fit_all_backends` for several data sets, their DP-SGD runs in lockstep.

    Returns one ``(posteriors, diagnostics)`` pair per data set; each equals
    ``fit_all_backends(model, datasets[r], seed=seeds[r], ...)`` up to rounding.
    """
    settings = _engine_settings(model, epsilon=epsilon, clip_norm=clip_norm, n_steps=n_steps,
                                sampling_rate=sampling_rate, delta=delta, burn_in=burn_in,
                                preconditioner=preconditioner,
                                learning_rate_scale=learning_rate_scale,
                                n_examples=len(datasets[0][0]),
                                record_trace=_needs_trace(methods))
    runs = run_dpvi_batched(model, datasets, random_states=seeds, **settings)
    return [_post_process(res, model, seed, n_draws, methods, n_examples=len(datasets[0][0]))
            for res, seed in zip(runs, seeds)]


def _study_seeds(seed, n_simulations):
    return [int(s.generate_state(1)[0])
            for s in np.random.SeedSequence(seed).spawn(n_simulations)]


def run_study(one_simulation, n_simulations, seed, n_jobs=2, verbose=True):
    """Run ``one_simulation(seed_k)`` for K independent seeds in parallel."""
    start = time.perf_counter()
    out = Parallel(n_jobs=n_jobs, verbose=5 if verbose else 0)(
        delayed(one_simulation)(s) for s in _study_seeds(seed, n_simulations)
    )
    return out, time.perf_counter() - start


def run_batched_study(one_batch, n_simulations, seed, n_jobs=2, batch_size=64, verbose=True):
    """Like :func:`run_study`, with ``one_batch(seeds)`` returning a list of outputs.

    The K seeds are the same as run_study's and are cut into batches of at most
    ``batch_size`` (at least 2 batches per job, for load balance), so the results do
    not depend on ``batch_size`` or ``n_jobs``.
    """
    seeds = _study_seeds(seed, n_simulations)
    size = max(1, min(batch_size, -(-n_simulations // (2 * n_jobs))))
    chunks = [seeds[i:i + size] for i in range(0, n_simulations, size)]
    start = time.perf_counter()
    out = Parallel(n_jobs=n_jobs, verbose=5 if verbose else 0)(
        delayed(one_batch)(chunk) for chunk in chunks
    )
    return [o for part in out for o in part], time.perf_counter() - start


def tarp_table(samples, theta_true, prior_sampler, n_bootstrap=200, seed=0):
    """TARP RMSE (and bootstrap-over-simulations sd) per method and reference scheme."""
    rows = {}
    for method, draws in samples.items():
        row = {}
        for scheme in ("posterior", "prior"):
            res = tarp_coverage(draws, theta_true, references=scheme,
                                prior_sampler=prior_sampler, n_bootstrap=n_bootstrap,
                                random_state=seed)
            row[scheme] = {"rmse": float(res.rmse), "se": float(res.rmse_se),
                           "coverage": res.coverage.tolist(),
                           "credibility": res.credibility.tolist()}
        rows[method] = row
    return rows


def machine():
    import torch

    return {"machine": platform.machine(), "processor": platform.processor(),
            "cpus": os.cpu_count(), "torch": torch.__version__,
            "python": platform.python_version()}


def save(name, payload):
    os.makedirs(RESULTS_DIR, exist_ok=True)
    path = os.path.join(RESULTS_DIR, name + ".json")
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
    return path


def load_cells(name, **settings):
    """Cells of an earlier run saved under ``name`` if it used the same settings, else ``{}``.

    Lets a study be rerun one cell at a time (say one epsilon) without losing the others.
    """
    path = os.path.join(RESULTS_DIR, name + ".json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        old = json.load(f)
    if any(old.get(key) != value for key, value in settings.items()):
        return {}
    return old.get("cells", {})


def rmse_floor(n_simulations):
    """RMSE a perfectly calibrated method gets with this many simulations (mean, 5 %, 95 %)."""
    mean, (lo, hi) = coverage_rmse_floor(n_simulations, random_state=0)
    return {"mean": mean, "q05": float(lo), "q95": float(hi)}


def print_tarp(rows, label, n_simulations=None):
    print(f"\n{label}: TARP coverage RMSE (+- bootstrap sd over simulations)")
    if n_simulations:
        f = rmse_floor(n_simulations)
        print(f"(a calibrated method gets {f['mean']:.3f}, 90 % range {f['q05']:.3f}-"
              f"{f['q95']:.3f}, with K={n_simulations})")
    print(f"{'method':<20}{'ref=posterior':>20}{'ref=prior':>20}")
    for method, row in rows.items():
        cells = [f"{row[s]['rmse']:.3f} +- {row[s]['se']:.3f}" for s in ("posterior", "prior")]
        print(f"{method:<20}{cells[0]:>20}{cells[1]:>20}")
