"""How ``error_model="auto"`` chooses between "dense" and "dense_matched", by ablation.

``run`` fits K simulations of a cell through the estimator's own lockstep path
(``DPBayesianLogisticRegression._fit_batch``, what :func:`~skdpvi.metrics.run_tarp_study`
uses), every parameter at its default but ``error_model="dense"``, and post-processes
each simulation's *same* release a second time with ``error_model="dense_matched",
wander_correction="probit"`` (the estimator's ``_fit_from_result`` on the stored
release). It pickles both posteriors' draws with the truth and the release statistics
a rule can read: the median window relaxations, the intercept's inflation read
through the window curvature (the explicit "dense_matched" warning's) and read off the
wander itself. ``evaluate`` scores rules (which posterior each simulation gets) by TARP
with the authors' and prior references, 90 % interval coverage and z-score sds, and
saves ``benchmarks/results/ablation_logistic_auto_rule.json``.

Cells: coefficients and intercept from the prior N(0, 1) (N(0, s^2) with ``prior_scale=s``
in the ``d3ps3`` (3), ``d5ps2`` (2) and ``d10ps05`` (0.5) cells), features ``gaussian``
(independent or equicorrelated), ``heavy`` (Student-t, 3 d.o.f.), ``unit`` (uniform on
[0, 1]), ``shifted`` (Gaussian with mean 1), ``correlated`` (issue 14's benchmark,
its one-hot block not declared).

Run::

    python benchmarks/ablation_logistic/auto_rule.py run gauss --n-sim 200 --cache /tmp/auto_rule
    python benchmarks/ablation_logistic/auto_rule.py evaluate gauss unit --cache /tmp/auto_rule
"""

import argparse
import os
import pickle
import sys
import warnings

import numpy as np
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import machine, rmse_floor, save  # noqa: E402
from private_clip import Simulator  # noqa: E402

#: cell: (design, n_features, n_rows, rho, epsilon[, prior scale])
CELLS = {"d3ps3": ("gaussian", 3, 5000, 0.0, 0.3, 3.0),
         "d3ps3_1": ("gaussian", 3, 5000, 0.0, 1.0, 3.0),
         "d5ps2": ("gaussian", 5, 5000, 0.0, 1.0, 2.0),
         "d2n500": ("gaussian", 2, 500, 0.0, 1.0), "d5n1000": ("gaussian", 5, 1000, 0.0, 1.0),
         "rho07": ("gaussian", 6, 20000, 0.7, 1.0),
         "d10ps05": ("gaussian", 10, 5000, 0.0, 1.0, 0.5),
         "gauss": ("gaussian", 10, 5000, 0.0, 1.0), "unit": ("unit", 10, 5000, 0.0, 1.0),
         "heavy": ("heavy", 10, 5000, 0.0, 1.0), "rho": ("gaussian", 10, 10000, 0.5, 0.3),
         "corr": ("correlated", 10, 10000, 0.0, 1.0), "shifted": ("shifted", 10, 5000, 0.0, 1.0),
         "n2k03": ("gaussian", 10, 2000, 0.0, 0.3), "d20": ("gaussian", 20, 10000, 0.0, 1.0),
         "corr03": ("correlated", 10, 10000, 0.0, 0.3), "d15": ("gaussian", 15, 5000, 0.0, 0.3),
         "d30": ("gaussian", 30, 20000, 0.0, 1.0)}


def prior_scale(cell):
    return CELLS[cell][5] if len(CELLS[cell]) > 5 else 1.0


def simulate(cell, seed):
    design, d, n, rho = CELLS[cell][:4]
    rng = np.random.default_rng(seed)
    if design == "shifted" or prior_scale(cell) != 1.0:
        X = rng.standard_normal((n, d)) + (1.0 if design == "shifted" else 0.0)
        theta = prior_scale(cell) * rng.standard_normal(d + 1)
        logits = X @ theta[:-1] + theta[-1]
        y = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(int)
        if y.min() == y.max():  # a single class cannot be fitted: flip one label
            y[0] = 1 - y[0]
        return theta, X, y
    return Simulator(design, d, n, rho)(rng)


def _chunk(cell, seeds):
    import torch
    from sklearn.base import clone

    from skdpvi import DPBayesianLogisticRegression
    from skdpvi.linear_model._logistic_dense import window_relaxations
    from skdpvi.linear_model._logistic_release_checks import wander_intercept_inflation

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    sims = [simulate(cell, s) for s in seeds]
    base = DPBayesianLogisticRegression(epsilon=CELLS[cell][4], error_model="dense",
                                        prior_scale=prior_scale(cell))
    fitted = base._fit_batch([(X, y) for _, X, y in sims], seeds)
    rows = []
    for est, (theta, X, y) in zip(fitted, sims):
        matched = clone(est).set_params(error_model="dense_matched",
                                        wander_correction="probit")
        X_checked, _ = matched._fit_inputs(X, y)
        seeds_ = matched._fit_seeds()
        settings = matched._engine_settings(X.shape[0], X.shape[1], X_checked, seeds_.engine)
        matched._fit_from_result(est.dpvi_result_, settings, X.shape[0], seeds_)
        result, p = est.dpvi_result_, len(theta)
        rows.append({"theta": theta, "dense": est.sample_posterior(1000, random_state=0),
                     "matched": matched.sample_posterior(1000, random_state=0),
                     "infl": matched.inference_diagnostics_.get("intercept_inflation"),
                     "infl_S": wander_intercept_inflation(result, p),
                     "relax": float(np.median(window_relaxations(result, p)))})
    return rows


def run(args):
    seeds = list(range(5000, 5000 + args.n_sim))
    for cell in args.cells:
        parts = Parallel(n_jobs=args.n_jobs)(
            delayed(_chunk)(cell, seeds[i:i + 25]) for i in range(0, len(seeds), 25))
        with open(os.path.join(args.cache, f"rule_{cell}.pkl"), "wb") as f:
            pickle.dump([r for part in parts for r in part], f)
        print(cell, "done", flush=True)


def rules():
    """name: which posterior a simulation gets (True: "dense_matched")."""
    def matched_if(relaxations=3.0, over_sampling=np.inf, inflation_S=np.inf,
                   inflation_K=np.inf):
        def pick(r, p):
            over = (r["infl_S"] - 1) * r["relax"] / (p - 1)
            return (r["relax"] >= relaxations and over <= over_sampling
                    and r["infl_S"] <= inflation_S and r["infl"] <= inflation_K)
        return pick

    out = {"dense": lambda r, p: False, "dense_matched+probit": lambda r, p: True,
           "relaxations>=3": matched_if(),
           "relaxations>=3, window-curvature inflation<=6": matched_if(inflation_K=6),
           "relaxations>=3, wander inflation<=4": matched_if(inflation_S=4)}
    for c in (2.5, 3.5, 5, 7):
        out[f"relaxations>=3, inflation over sampling<={c:g}"] = matched_if(over_sampling=c)
    for t in (4, 5, 6, 8):  # 5 with 2.5: the estimator's rule
        out[f"relaxations>={t}, inflation over sampling<=2.5"] = matched_if(t, 2.5)
    return out


def evaluate(args):
    from release_cache import score  # imports this module: not at the top

    payload = {"machine": machine(), "cells": {}, "rules": {}}
    for cell in args.cells:
        with open(os.path.join(args.cache, f"rule_{cell}.pkl"), "rb") as f:
            rows = pickle.load(f)
        K, p = len(rows), len(rows[0]["theta"])
        theta = np.array([r["theta"] for r in rows])
        refs = prior_scale(cell) * np.random.default_rng(12345).standard_normal((K, p))
        payload["cells"][cell] = {"design": CELLS[cell], "n_sim": K, "floor": rmse_floor(K),
                                  "relaxations_median": float(np.median([r["relax"]
                                                                         for r in rows]))}
        for name, pick in rules().items():
            chosen = np.array([bool(pick(r, p)) for r in rows])
            draws = np.array([r["matched"] if c else r["dense"] for r, c in zip(rows, chosen)])
            row = dict(score(draws, theta, refs), fraction_matched=float(chosen.mean()))
            payload["rules"].setdefault(name, {})[cell] = row
            print(f"{cell:<8} {name:<36} TARP {row['tarp_posterior']:.3f} / "
                  f"{row['tarp_prior']:.3f}, coverage {row['coverage_90'][0]:.2f}-"
                  f"{row['coverage_90'][1]:.2f}, z sd {row['z_sd'][0]:.2f}-{row['z_sd'][1]:.2f}, "
                  f"matched {row['fraction_matched']:.2f}", flush=True)
    save(args.save, payload)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["run", "evaluate"])
    parser.add_argument("cells", nargs="+", choices=list(CELLS))
    parser.add_argument("--n-sim", type=int, default=200)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--cache", default="/tmp/auto_rule")
    parser.add_argument("--save", default="ablation_logistic_auto_rule")
    args = parser.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    (run if args.command == "run" else evaluate)(args)


if __name__ == "__main__":
    main()
