"""Ablations of the logistic post-processing on cached DP-SGD runs.

``designs.py`` runs DP-SGD and post-processes in one go, so every new post-processing
variant costs the cell's DP-SGD again (1-6 minutes at K = 200). This script splits
the two: ``run`` simulates a cell with ``designs.py``'s settings and seeds (the
estimator's defaults; ``--burn-in-step`` as there) and pickles the released running
sums of every simulation with its true coefficients; ``evaluate`` post-processes the
pickles with any of ``designs.py``'s ``--methods`` that need only the running sums
(``emcee+dense``, ``emcee+dense+shrunk``, ``emcee+dense+probit``, ...), in seconds
per cell. The numbers are those of ``designs.py`` for
the same cell and seeds.

The variant this was written for (twentieth session; results page, "The
extrapolation's curvature uncertainty"): ``emcee+dense+kunclog[c]`` and
``emcee+dense+shrunk+kunclog[c]``, the dense model with
``linear_response_posterior(curvature_uncertainty=c)`` (default c = 2).

Run::

    python benchmarks/ablation_logistic/cached_runs.py run --d 10 --n 2000 \\
        --out /tmp/d10.pkl
    python benchmarks/ablation_logistic/cached_runs.py evaluate /tmp/d10.pkl \\
        --methods emcee+dense emcee+dense+shrunk emcee+dense+shrunk+kunclog2
"""

import argparse
import os
import pickle
import sys
import time

import numpy as np
import torch
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import designs  # noqa: E402
from _common import save  # noqa: E402
from skdpvi.dpvi import run_dpvi_batched  # noqa: E402
from skdpvi.metrics import coverage_rmse_floor  # noqa: E402


def _batch(seeds, simulate, model, settings):
    torch.set_num_threads(1)
    sims = [simulate(np.random.default_rng(s)) for s in seeds]
    runs = run_dpvi_batched(model, [(X, y) for X, y, _ in sims], random_states=seeds,
                            **settings)
    return [(run, theta) for (_, _, theta), run in zip(sims, runs)]


def run(args):
    """DP-SGD of every simulation of the cell, pickled with the true coefficients."""
    simulate, model, n_examples = designs.design_of(args)
    settings = designs.engine_settings(model, n_examples, args.epsilon)
    if args.burn_in_step != 1 or args.recording_step != 1:
        p = model.n_params
        settings["step_scales"] = tuple(np.r_[np.full(p, m), np.ones(p)]
                                        for m in (args.burn_in_step, args.recording_step))
    seeds = list(range(args.seed, args.seed + args.k))
    start = time.perf_counter()
    out = Parallel(n_jobs=args.n_jobs)(
        delayed(_batch)(seeds[i:i + 25], simulate, model, settings)
        for i in range(0, args.k, 25))
    out = [o for part in out for o in part]
    with open(args.out, "wb") as f:
        pickle.dump({"args": vars(args), "model": model, "n_examples": n_examples,
                     "runs": [o[0] for o in out], "theta": np.array([o[1] for o in out])}, f)
    print(f"{args.out}: {args.k} runs, {time.perf_counter() - start:.0f} s")


def evaluate(args):
    for path in args.files:
        with open(path, "rb") as f:
            cell = pickle.load(f)
        model, theta = cell["model"], cell["theta"]
        k = len(theta)
        floor, (lo, hi) = coverage_rmse_floor(k, random_state=0)
        print(f"{path} ({cell['args']}); calibrated TARP at K = {k}: {floor:.3f} "
              f"({lo:.3f}-{hi:.3f})")
        payload = {"cell": cell["args"], "floor": [floor, float(lo), float(hi)],
                   "methods": {}}
        for method in args.methods:
            draws = np.array([designs.posterior_draws(r, model, cell["n_examples"], method)
                              for r in cell["runs"]])
            s = designs.summarise(draws, theta, model.n_params, model.prior_scale)
            payload["methods"][method] = s
            print(f"  {method:<28} {designs.describe(s)}", flush=True)
        if args.save:
            save(f"{args.save}_{os.path.splitext(os.path.basename(path))[0]}", payload)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = designs.design_arguments(sub.add_parser("run", help="DP-SGD, pickled"))
    p_run.add_argument("--burn-in-step", type=float, default=1.0)
    p_run.add_argument("--recording-step", type=float, default=1.0,
                       help="multiplier of the means' step from burn-in on")
    p_run.add_argument("--seed", type=int, default=1000)
    p_run.add_argument("--n-jobs", type=int, default=2)
    p_run.add_argument("--out", required=True)
    p_eval = sub.add_parser("evaluate", help="post-processing variants on pickles")
    p_eval.add_argument("files", nargs="+")
    p_eval.add_argument("--methods", nargs="+", default=["emcee+dense"])
    p_eval.add_argument("--save", default=None,
                        help="prefix of JSONs in benchmarks/results (one per pickle)")
    args = parser.parse_args()
    (run if args.command == "run" else evaluate)(args)


if __name__ == "__main__":
    main()
