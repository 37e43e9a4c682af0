"""The estimator with ``variational_family="full_rank"`` on the cached-release cells.

Fits ``DPBayesianLogisticRegression(variational_family="full_rank")`` (every other
parameter at its default, the cell's prior scale and declared one-hot blocks) on the
simulations of ``release_cache.py``'s cells, with the same seeds (in lockstep, 32
at a time, through the estimator's ``_fit_batch``: each fit its own), and scores the
posteriors exactly as ``release_cache.py evaluate`` scores the default on the cached
releases (TARP with the authors' and the same prior references, 90 % coordinate
coverage, z-score sds, 90 % ellipsoids, radial z), so the two sit side by side on the
same data sets.

Run: python benchmarks/ablation_logistic/full_rank.py corrb gauss rho07d10 --n-sim 200
"""

import argparse
import os
import pickle
import sys
import time
import warnings

import numpy as np
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import machine, rmse_floor, save  # noqa: E402
from skdpvi.noise_aware import full_rank_posterior, full_rank_wander_width  # noqa: E402
from skdpvi.posterior import NoiseAwarePosterior  # noqa: E402
from release_cache import (CELLS, _rule_cell, _value, describe, estimator,  # noqa: E402
                           prior_scale, score, simulate)


def _engine_overrides(engine):
    """Run every full-rank fit of this process with ``run_dpvi_full_rank``'s keyword
    arguments ``engine`` (an ablation of the engine's settings)."""
    if engine:
        import functools

        from skdpvi.dpvi.full_rank import run_dpvi_full_rank, run_dpvi_full_rank_batched
        from skdpvi.linear_model import _logistic_full_rank
        # both: a study's fits run in lockstep through the batched engine
        _logistic_full_rank.run_dpvi_full_rank = functools.partial(run_dpvi_full_rank, **engine)
        _logistic_full_rank.run_dpvi_full_rank_batched = functools.partial(
            run_dpvi_full_rank_batched, **engine)


#: Post-processing variants of one release: (the wander correction's width times this,
#: the curvature shrunk to its diagonal by its noise share[, the moments it is read
#: from, the prior applied once (``full_rank_posterior(prior_once=True)``)]).
CORRECTIONS = {"probit": (1.0, False), "none": (0.0, False), "half": (0.5, False),
               "shrunk": (1.0, True), "shrunk_radial": (1.0, "radial"),
               "late_radial": (1.0, "radial", "late"), "late": (1.0, False, "late"),
               "radial_x1.5": (1.5, "radial"), "radial_x2": (2.0, "radial"),
               "radial_x3": (3.0, "radial"), "once": (1.0, "radial", "window", True)}


def _draws(est, variant):
    """1,000 draws of the posterior of ``est``'s release with the wander correction's
    width times ``factor`` and the curvature shrunk or not (post-processing only: the
    same release)."""
    from skdpvi.noise_aware import remove_wander_bias

    factor, shrink, *rest = variant
    moments, once = (list(rest) + ["window", False][len(rest):])[:2]
    directions = est._onehot_flat_directions()
    components, info = full_rank_posterior(
        est.dpvi_result_, prior_scale=est.prior_scale, random_state=est._fit_seeds().post,
        flat_directions=directions if len(directions) else None,
        curvature_shrinkage=shrink, curvature_moments=moments, prior_once=once,
        wander_correction=bool(once and factor))
    if factor and not once:
        width = factor * full_rank_wander_width(est.dpvi_result_, info["curvature"],
                                                est.prior_scale)
        components.mean = remove_wander_bias(components.mean, width,
                                             prior_scale=est.prior_scale,
                                             covariance=info["component_covariance"])
    model = est._make_model(est.n_features_in_)
    est.posterior_ = est._finish_posterior(
        NoiseAwarePosterior.from_components(components, model, "full_rank"), model)
    return est.sample_posterior(1000, random_state=0)


def chunk(cell, seeds, params, engine=None, cache=None, variants=None):
    """For each seed: the posterior draws of each of :data:`CORRECTIONS` from one fit (or
    its cached estimator), the truth and the fit's seconds. The seeds' fits run through
    the estimator's ``_fit_batch`` (their DP-SGD in lockstep, each its own fit's)."""
    warnings.simplefilter("ignore")
    _engine_overrides(engine)
    sims = {seed: simulate(_rule_cell(cell), seed) for seed in seeds}
    paths = {seed: None if cache is None else os.path.join(cache, f"{cell}_{seed}.pkl")
             for seed in seeds}
    fitted = {}
    for seed, path in paths.items():
        if path is not None and os.path.exists(path):
            with open(path, "rb") as f:
                fitted[seed] = pickle.load(f)
    todo = [seed for seed in seeds if seed not in fitted]
    if todo:
        start = time.perf_counter()
        ests = estimator(cell, **params)._fit_batch([sims[s][1:] for s in todo], todo)
        seconds = (time.perf_counter() - start) / len(todo)
        for seed, est in zip(todo, ests):
            fitted[seed] = (est, seconds)
            if paths[seed] is not None:
                with open(paths[seed], "wb") as f:
                    pickle.dump(fitted[seed], f)
    out = []
    for seed in seeds:
        est, seconds = fitted[seed]
        corrections = {k: CORRECTIONS[k] for k in variants or CORRECTIONS}
        if est.wander_correction_ != "probit":
            corrections = {"none": (0.0, False)}
        draws = {name: _draws(est, variant) for name, variant in corrections.items()}
        out.append((draws, sims[seed][0], seconds))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", choices=list(CELLS))
    parser.add_argument("--n-sim", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=5000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--set", nargs="+", default=[], metavar="PARAM=VALUE",
                        help="further estimator parameters")
    parser.add_argument("--engine", nargs="+", default=[], metavar="PARAM=VALUE",
                        help="run_dpvi_full_rank keyword arguments (an ablation)")
    parser.add_argument("--cache", default=None,
                        help="a directory keeping each fitted estimator (reused if there)")
    parser.add_argument("--variants", nargs="+", default=list(CORRECTIONS),
                        choices=list(CORRECTIONS))
    parser.add_argument("--save", default="ablation_logistic_full_rank")
    args = parser.parse_args()
    params = {"variational_family": "full_rank",
              **{k: _value(v) for k, v in (item.split("=", 1) for item in args.set)}}
    engine = {k: _value(v) for k, v in (item.split("=", 1) for item in args.engine)}
    if args.cache:
        os.makedirs(args.cache, exist_ok=True)
    payload = {"machine": machine(), "args": vars(args), "params": params, "engine": engine,
               "cells": {}}
    for cell in args.cells:
        seeds = list(range(args.first_seed, args.first_seed + args.n_sim))
        size = max(1, min(32, -(-len(seeds) // args.n_jobs)))
        fits = [f for part in Parallel(n_jobs=args.n_jobs)(
            delayed(chunk)(cell, seeds[i:i + size], params, engine, args.cache, args.variants)
            for i in range(0, len(seeds), size)) for f in part]
        theta = np.array([f[1] for f in fits])
        K, p = theta.shape
        refs = prior_scale(cell) * np.random.default_rng(12345).standard_normal((K, p))
        for correction in fits[0][0]:
            draws = np.array([f[0][correction] for f in fits])
            row = score(draws, theta, refs)
            row.update(floor=rmse_floor(K),
                       seconds_per_fit=float(np.median([f[2] for f in fits])))
            payload["cells"].setdefault(cell, {})[correction] = row
            print(f"{cell:<10} {correction:<7} {describe(row)}, "
                  f"{row['seconds_per_fit']:.1f} s per fit", flush=True)
        save(args.save, payload)


if __name__ == "__main__":
    main()
