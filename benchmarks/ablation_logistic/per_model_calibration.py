"""The logistic default's calibration per error model, on cached releases (thirtieth session).

``error_model="auto"`` sends each fit to ``"dense_matched"``, ``"dense_shrunk"`` or
``"dense"`` (:func:`skdpvi.linear_model._logistic_dense.auto_dense_model`). A cell's
TARP and coverage pool the fits of all three, so a cell can look calibrated while each
model errs in its own direction. For each cached release (``release_cache.py``) this
post-processes the release with the default estimator and reports, per model: how
many fits took it, the root mean square over those fits and coordinates of the
coefficient z-scores ``(posterior mean - truth) / posterior sd`` (1 when calibrated)
and the slowest relaxation count of the posterior's curvature
(``inference_diagnostics_["relaxation_times"]``, the window's length in relaxation
times of its softest direction; read off the release).

Run: python benchmarks/ablation_logistic/per_model_calibration.py gauss rho07d10 --max-sim 40
"""

import argparse
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import release_cache as rc  # noqa: E402
from _common import machine, save  # noqa: E402

MODELS = ("dense", "dense_shrunk", "dense_matched")


def fit_row(cell, row):
    from sklearn.base import clone

    _, X, y = rc.simulate(rc._rule_cell(cell), row["seed"])
    est = clone(rc.estimator(cell)).set_params(random_state=row["seed"])
    rc.refitter(est, X, y)(row["result"])
    relax = np.sort(np.asarray(est.inference_diagnostics_["relaxation_times"], float))
    draws = est.sample_posterior(1000, random_state=0)
    z = (draws.mean(0) - row["theta"]) / draws.std(0)
    return est.error_model_, float(relax[0]), z


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", choices=list(rc.CELLS))
    parser.add_argument("--max-sim", type=int, default=40)
    parser.add_argument("--cache", default="/tmp/release_cache")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    payload = {"machine": machine(), "max_sim": args.max_sim, "cells": {}}
    for cell in args.cells:
        fits = [fit_row(cell, row) for row in rc.load(args.cache, cell)[:args.max_sim]]
        out = {}
        for model in MODELS:
            rows = [f for f in fits if f[0] == model]
            if not rows:
                continue
            z = np.concatenate([f[2] for f in rows])
            slowest = np.array([f[1] for f in rows])
            out[model] = {"n_fits": len(rows), "z_rms": float(np.sqrt(np.mean(z ** 2))),
                          "slowest_relaxations_median": float(np.median(slowest))}
            print(f"{cell:<12} {model:<14} {len(rows):3d} fits, coefficient z rms "
                  f"{out[model]['z_rms']:.2f}, slowest relaxations (median) "
                  f"{np.median(slowest):.2f}", flush=True)
        payload["cells"][cell] = out
        save("ablation_logistic_per_model_calibration", payload)


if __name__ == "__main__":
    main()
