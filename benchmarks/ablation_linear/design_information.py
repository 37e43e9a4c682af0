"""Why the linear default errs wide where the trace is weakly informative: X^T X.

The results page's section "What makes the low-information intervals too wide"
quotes these numbers. DP-SGD runs of ``table2_linear.py``'s configurations (same
simulations and seeds as its K = 200 cells, the estimator's defaults) are cached once
(``run``), with an optional multiplier of the means' step from burn-in on
(``--recording-step``: more wander, so more information on X^T X in the trace), and
the statistics posterior is then computed on the same runs (``post``) with:

- ``default``: the package's default (X^T X from the trace, flat prior, the
  off-diagonal's shrinkage grid);
- ``oracle_diag`` / ``oracle_off`` / ``oracle_xtx``: the diagonal, the off-diagonal or
  all of X^T X fixed at the private data's values (a yardstick, not private);
- ``clip_noise_variance``: the default with the noise variance's clip group
  corrected for clipping (``LinearRegressionStatistics.correct_clipping =
  "noise_variance"``: a one-dimensional integral over the residual);
- ``clip_residual`` / ``clip_residual_1024``: every clip group corrected, exact in the
  residual (``correct_clipping = True``, ``clipping_quadrature = "residual"``), with
  256 / 1,024 nodes for x;
- ``oracle_colsums``: the intercept's column sums ``X^T 1`` fixed at the private
  values (a yardstick);
- ``one_shrinkage``: one shrinkage scale for every off-diagonal statistic, the
  intercept's column sums included (the default before 2026-11-25's twelfth session;
  ``LinearRegressionStatistics.separate_intercept_shrinkage = False``);
- ``no_pooling``: the features' diagonal of X^T X not pooled towards its common
  level (``LinearRegressionStatistics.pool_diagonal = False``, the default before
  2026-11-25's twelfth session);
- ``no_design_priors``: neither of the two (the default before the twelfth session);
- ``no_scale_rows``: the default without the coefficients' scale gradients in the
  regression (``LinearRegressionStatistics.use_scale_gradients = False``);
- ``--design-prior-power a``: the default with the scale-invariant prior
  ``|X^T X|^(-a (p+1)/2)`` added to the prior predictive (``a = 1``: the marginal of a
  Wishart design under a Jeffreys prior on its covariance).

Without ``--dense-recording`` the runs take the plain step (the estimator's
``mean_preconditioning="none"``, the default before 2026-11-25); ``run
--dense-recording`` caches runs whose coefficient means step, from burn-in on, through
the correlation step matrix estimated from the release (the estimator's default
``mean_preconditioning="auto"``; ``--dense-recording oracle``: the matrix of the
private X^T X, a yardstick); ``post --dense-recording`` reads them.

``bias`` prints the trace's estimate of the diagonal of X^T X (the Gaussian fit's
mean) over the truth, on the first ``--n-sim`` cached runs; ``run --no-clipping``
caches runs with a clip norm 100 times larger and the noise multiplier 100 times
smaller (the same noise std, nothing clipped; not private at the nominal epsilon);
``--exact`` runs (and reads) DP-SGD with the linear model's exact expectations over q
(``LinearRegressionModel(exact_expectations=True)``) instead of Monte Carlo draws.

Usage (from ``benchmarks/``)::

    python ablation_linear/design_information.py run d5_n1000 0.3 --n-sim 200 [--recording-step 10]
    python ablation_linear/design_information.py post d5_n1000 0.3 default oracle_xtx [--recording-step 10]
    python ablation_linear/design_information.py post d5_n1000 0.3 --design-prior-power 1
    python ablation_linear/design_information.py run d5_n1000 0.3 --n-sim 40 --no-clipping
    python ablation_linear/design_information.py bias d5_n1000 0.3 --n-sim 40 [--no-clipping]
    python ablation_linear/design_information.py run paper 0.3 --exact   # then post ... --exact
    python ablation_linear/design_information.py run d10_rho0.9 1 --dense-recording  # then post ...

The cache (about 4 MB per simulation) goes to ``$SKDPVI_ABLATION_CACHE`` (default
``/tmp/skdpvi_ablation``); ``post`` prints TARP (authors' / prior references) and the
per-coordinate z-scores and saves them to
``results/ablation_linear_design_information.json``.
"""

import argparse
import os
import pickle
import sys
import time
import warnings

import numpy as np
import torch
from joblib import Parallel, delayed

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import table2_linear as T2  # noqa: E402
from _common import (_engine_settings, _study_seeds, load_cells, machine, save,  # noqa: E402
                     tarp_table)

from skdpvi import DPBayesianLinearRegression  # noqa: E402
from skdpvi.dpvi import run_dpvi_batched  # noqa: E402
from skdpvi.noise_aware import sample_phi_star, statistics_posterior  # noqa: E402
from skdpvi.noise_aware.statistics_sampling import NoValidDraws  # noqa: E402
from skdpvi.noise_aware.preconditioning import correlation_step_matrix  # noqa: E402
from skdpvi.posterior import NoiseAwarePosterior  # noqa: E402

CACHE = os.environ.get("SKDPVI_ABLATION_CACHE", "/tmp/skdpvi_ablation")
VARIANTS = ("default", "oracle_diag", "oracle_off", "oracle_xtx", "clip_noise_variance",
            "clip_residual", "clip_residual_1024", "no_scale_rows", "one_shrinkage",
            "oracle_colsums", "no_pooling", "no_design_priors")


def _cache_path(config, eps, recording_step, no_clipping=False, exact=False, dense=False):
    tag = f"_rec{recording_step:g}" if recording_step != 1 else ""
    tag += {False: "", "estimated": "_dense", "oracle": "_dense_oracle"}[dense]
    tag += "_noclip" if no_clipping else ""
    tag += "_exact" if exact else ""
    # runs cached before the thirteenth session used learning_rate_scale 1
    lam_c = DPBayesianLinearRegression()._default_learning_rate_scale(0)
    tag += f"_lr{lam_c:g}" if lam_c != 1 else ""
    return os.path.join(CACHE, f"linear_{config}_{eps:g}{tag}.pkl")


def _batch(seeds, config, settings, exact=False, dense=False):
    torch.set_num_threads(1)
    model = T2.model_of(config)
    model.exact_expectations = exact
    sims = [T2.simulate(config, np.random.default_rng(s)) for s in seeds]
    if dense == "oracle":
        # the step matrix of the private X^T X (a yardstick, not private)
        runs = []
        for seed, (X, y, _) in zip(seeds, sims):
            Xi = np.c_[X, np.ones(len(X))]
            matrix = np.eye(2 * model.n_params)
            matrix[:Xi.shape[1], :Xi.shape[1]] = correlation_step_matrix(Xi.T @ Xi)
            runs += run_dpvi_batched(model, [(X, y)], random_states=[seed % (2**31 - 16)],
                                     **dict(settings, step_matrix=lambda a, b, m=matrix: m))
    else:
        runs = run_dpvi_batched(model, [(X, y) for X, y, _ in sims],
                                random_states=[s % (2**31 - 16) for s in seeds], **settings)
    out = []
    for (X, y, theta), res in zip(sims, runs):
        Xi = np.c_[X, np.ones(len(X))]
        res.trace_phi = res.trace_phi.astype(np.float32)
        res.trace_grad = res.trace_grad.astype(np.float32)
        out.append((res, theta, Xi.T @ Xi))
    return out


def run(config, eps, n_sim, recording_step, no_clipping=False, exact=False, dense=False):
    model = T2.model_of(config)
    settings = _engine_settings(
        model, epsilon=eps, clip_norm=T2.clip_of(config), n_steps=10_000, sampling_rate=0.1,
        delta=1e-5, burn_in=0.2, preconditioner=None,
        learning_rate_scale=DPBayesianLinearRegression()._default_learning_rate_scale(
            2 * model.n_params),
        n_examples=T2.CONFIGS[config][1], record_trace=True,
        mean_preconditioning=dense == "estimated")
    if no_clipping:
        settings["clip_norm"] *= 100.0
        settings["noise_multiplier"] /= 100.0
    if recording_step != 1:
        n = model.n_params
        settings["step_scales"] = (1.0, np.r_[np.full(n, recording_step), np.ones(n)])
    # table2_linear.py's seeds for this epsilon
    seeds = _study_seeds(int(eps * 1000), n_sim)
    start = time.perf_counter()
    out = Parallel(n_jobs=2)(delayed(_batch)(seeds[i:i + 25], config, settings, exact, dense)
                             for i in range(0, n_sim, 25))
    os.makedirs(CACHE, exist_ok=True)
    with open(_cache_path(config, eps, recording_step, no_clipping, exact, dense), "wb") as f:
        pickle.dump([o for part in out for o in part], f)
    print(f"{config} eps {eps} recording step x{recording_step:g}: "
          f"{time.perf_counter() - start:.0f} s")


def _with_known_gram(stats, variant, gram):
    """``stats`` with the variant's part of X^T X fixed at the private value (and the
    model's own known statistics, the intercept's ``(X^T X)_pp = N``, kept)."""
    rows, cols = stats.rows, stats.cols
    last = stats.p - 1
    index = {"oracle_diag": np.flatnonzero(rows == cols),
             "oracle_off": np.flatnonzero(rows != cols),
             "oracle_colsums": np.flatnonzero((rows == last) & (cols != last)),
             "oracle_xtx": np.arange(stats.n_vech)}[variant]
    index = np.union1d(index, stats.known_statistics()[0]).astype(int)
    values = gram[rows[index], cols[index]]
    stats.known_statistics = lambda: (index, values)
    return stats


def _with_design_prior(power):
    """Add ``-power (p + 1) / 2 log det X^T X`` to the linear model's prior predictive
    (patched in the worker process that computes the posterior)."""
    from skdpvi.models.linear_statistics import LinearRegressionStatistics as Statistics

    original = getattr(Statistics, "_original_log_prior", Statistics.log_prior)
    Statistics._original_log_prior = original
    if not power:
        Statistics.log_prior = original
        return

    def log_prior(self, eta):
        out = original(self, eta)
        ok = np.isfinite(out)
        if ok.any():
            gram = self.unpack(eta[ok])[0]
            out[ok] -= power * 0.5 * (self.p + 1) * np.linalg.slogdet(gram)[1]
        return out

    Statistics.log_prior = log_prior


def _one(run_, config, variant, seed, design_prior_power=0.0):
    _with_design_prior(design_prior_power)
    res, theta, gram = run_
    res.trace_phi = res.trace_phi.astype(float)
    res.trace_grad = res.trace_grad.astype(float)
    model = T2.model_of(config)
    stats = model.data_statistics(T2.CONFIGS[config][1])
    if variant == "clip_noise_variance":
        stats.correct_clipping = "noise_variance"
    elif variant == "one_shrinkage":
        stats.separate_intercept_shrinkage = False
    elif variant == "no_pooling":
        stats.pool_diagonal = False
    elif variant == "no_design_priors":
        stats.separate_intercept_shrinkage = stats.pool_diagonal = False
    elif variant == "no_scale_rows":
        stats.use_scale_gradients = False
    elif variant.startswith("clip_residual"):
        stats.correct_clipping = True
        stats.clipping_quadrature = "residual"
        stats.n_nodes = 1024 if variant.endswith("1024") else 256
    elif variant != "default":
        stats = _with_known_gram(stats, variant, gram)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            components, diag = statistics_posterior(res, stats, 1000, random_state=seed)
        except NoValidDraws:  # as the estimator does: the paper's gradient model
            phi, _ = sample_phi_star(res, "exact", 1000, random_state=seed)
            post = NoiseAwarePosterior(phi, model, "exact")
            draws = post.sample(1000, random_state=seed, unconstrained=True)
            return (draws, post.to_unconstrained(theta), res.diagnostics["clipped_fraction"],
                    "fallback")
    post = NoiseAwarePosterior.from_components(components, model, "statistics")
    draws = post.sample(1000, random_state=seed, unconstrained=True)
    return (draws, post.to_unconstrained(theta), res.diagnostics["clipped_fraction"],
            diag["clipping_correction"])


def post(config, eps, variants, recording_step, design_prior_power=0.0, exact=False,
         no_clipping=False, dense=False):
    with open(_cache_path(config, eps, recording_step, no_clipping, exact, dense), "rb") as f:
        runs = pickle.load(f)
    name = "ablation_linear_design_information"
    payload = {"machine": machine(), "cells": load_cells(name)}
    for variant in variants:
        out = Parallel(n_jobs=2)(delayed(_one)(r, config, variant, 7 + i, design_prior_power)
                                 for i, r in enumerate(runs))
        draws = np.stack([o[0] for o in out])
        theta = np.stack([o[1] for o in out])
        rows = tarp_table({variant: draws}, theta, T2.prior_sampler_of(config), n_bootstrap=50)
        z = (draws.mean(1) - theta) / draws.std(1)
        row = rows[variant]
        cell = {"config": config, "epsilon": eps, "recording_step": recording_step,
                "variant": variant, "exact_expectations": exact, "design_prior_power": design_prior_power,
                "no_clipping": no_clipping, "dense_recording": dense,
                "n_sim": len(runs),
                "tarp_posterior": row["posterior"]["rmse"], "tarp_prior": row["prior"]["rmse"],
                "tarp_se": [row["posterior"]["se"], row["prior"]["se"]],
                "z_mean": z.mean(0).tolist(), "z_sd": z.std(0).tolist(),
                "clipped_fraction": float(np.mean([o[2] for o in out])),
                "clipping_correction": {k: sum(o[3] == k for o in out)
                                        for k in sorted({o[3] for o in out})}}
        key = f"{config}_{eps:g}_rec{recording_step:g}_{variant}"
        key += f"_prior{design_prior_power:g}" if design_prior_power else ""
        key += "_exact" if exact else ""
        key += "_noclip" if no_clipping else ""
        key += {False: "", "estimated": "_dense", "oracle": "_dense_oracle"}[dense]
        lam_c = DPBayesianLinearRegression()._default_learning_rate_scale(0)
        key += f"_lr{lam_c:g}" if lam_c != 1 else ""  # the keys before: step 1
        payload["cells"][key] = cell
        save(name, payload)
        with np.printoptions(precision=2, suppress=True, linewidth=160):
            print(f"{config} eps {eps} rec x{recording_step:g} {variant:12s} "
                  f"{'exact expectations ' if exact else ''}"
                  f"{'no clipping ' if no_clipping else ''}"
                  f"{'dense recording step (' + dense + ') ' if dense else ''}"
                  f"design prior power {design_prior_power:g} "
                  f"TARP {cell['tarp_posterior']:.3f} / {cell['tarp_prior']:.3f}  "
                  f"clipped {cell['clipped_fraction']:.3f} {cell['clipping_correction']}\n"
                  f"  z mean {z.mean(0)}\n  z sd   {z.std(0)}", flush=True)


def bias(config, eps, n_sim, no_clipping=False):
    """The trace's estimate of diag X^T X over the truth, on the first n_sim runs."""
    with open(_cache_path(config, eps, 1.0, no_clipping), "rb") as f:
        runs = pickle.load(f)[:n_sim]
    model = T2.model_of(config)
    ratios, relative_sd = [], []
    for i, (res, _, gram) in enumerate(runs):
        res.trace_phi = res.trace_phi.astype(float)
        res.trace_grad = res.trace_grad.astype(float)
        stats = model.data_statistics(T2.CONFIGS[config][1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, diag = statistics_posterior(res, stats, 1000, random_state=i)
        d = stats.diagonal
        ratios.append(diag["eta_mean"][d] / gram[stats.rows[d], stats.cols[d]])
        relative_sd.append(diag["scale_relative_sd"])
    ratios = np.array(ratios)
    with np.printoptions(precision=3, suppress=True, linewidth=160):
        print(f"{config} eps {eps}{' no clipping' if no_clipping else ''}, {len(runs)} runs: "
              f"diag X^T X estimate / truth, mean {ratios.mean(0)}, sd {ratios.std(0)}; "
              f"median relative posterior sd {np.median(relative_sd):.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("run", "post", "bias"))
    parser.add_argument("config", choices=sorted(T2.CONFIGS))
    parser.add_argument("epsilon", type=float)
    parser.add_argument("variants", nargs="*", default=["default"])
    parser.add_argument("--n-sim", type=int, default=200)
    parser.add_argument("--recording-step", type=float, default=1.0,
                        help="multiplier of the means' step from burn-in on")
    parser.add_argument("--no-clipping", action="store_true",
                        help="run / post: clip norm x100, noise multiplier /100 (the same "
                             "noise std, nothing clipped; not private)")
    parser.add_argument("--design-prior-power", type=float, default=0.0,
                        help="post: the scale-invariant prior on X^T X to this power")
    parser.add_argument("--dense-recording", nargs="?", const="estimated", default=False,
                        choices=("estimated", "oracle"),
                        help="run / post: the means' recording step multiplied by the "
                             "correlation step matrix, estimated from the release (the "
                             "estimator's mean_preconditioning='correlation') or of the "
                             "private X^T X (oracle)")
    parser.add_argument("--exact", action="store_true",
                        help="DP-SGD with the model's exact expectations over q, not draws")
    args = parser.parse_args()
    if args.command == "run":
        run(args.config, args.epsilon, args.n_sim, args.recording_step, args.no_clipping,
            args.exact, args.dense_recording)
    elif args.command == "bias":
        bias(args.config, args.epsilon, args.n_sim, args.no_clipping)
    else:
        unknown = set(args.variants) - set(VARIANTS)
        if unknown:
            parser.error(f"unknown variants {sorted(unknown)}; choose from {VARIANTS}")
        post(args.config, args.epsilon, args.variants, args.recording_step,
             args.design_prior_power, args.exact, args.no_clipping, args.dense_recording)


if __name__ == "__main__":
    main()
