"""Probe: how much the full-rank engine clips, and what its scale block's noise costs.

For each cell (``release_cache.py``'s simulations and the default estimator's
mechanism: noise multiplier, private clipping norm, learning rate, preconditioner,
burn-in) and each variant ``F,S,D`` (``--variants``; F: the rho and U blocks' preconditioner
over the mean-field engine's beta, ``1 / scale_noise``; S: the means' clip share
``mean_clip_share``, or ``joint`` for a row clipped as a whole; D: the divisor of
:func:`skdpvi.dpvi.full_rank_step.full_rank_scale_preconditioner`'s cap, or ``none``;
an optional fourth field ``cf``: ``elbo_gradients="closed_form"``),
runs :func:`~skdpvi.dpvi.run_dpvi_full_rank` on a few simulations and reports:

- the fractions of rows whose means' and whose scales' block was clipped;
- at the last iterate, on one fresh Poisson batch: quantiles of each block's
  per-example norm (means; rho and U preconditioned) over the clipping norm;
- the generalised eigenvalues of the curvature read off the release
  (:func:`~skdpvi.noise_aware.full_rank_curvature`) against the data's Hessian of the
  negative log joint at the truth (1 is right).

Run: python benchmarks/ablation_logistic/full_rank_clipping.py corrb gauss rho07d10
"""

import argparse
import os
import sys
import warnings

import numpy as np
import scipy.linalg
import torch
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import machine, save  # noqa: E402
from release_cache import CELLS, _rule_cell, estimator, prior_scale, simulate  # noqa: E402
from skdpvi.dpvi import full_rank as fr  # noqa: E402
from skdpvi.dpvi import full_rank_step  # noqa: E402
from skdpvi.noise_aware import full_rank_curvature  # noqa: E402


def one(cell, seed, variant):
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    theta, X, y = simulate(_rule_cell(cell), seed)
    est = estimator(cell).set_params(random_state=seed, variational_family="full_rank")
    X_checked, _ = est._fit_inputs(X, y)
    engine = est._engine_settings(X.shape[0], X.shape[1], X_checked,
                                  est._fit_seeds().engine).engine
    rows = np.c_[X, np.ones(len(X))]
    N, n = rows.shape
    beta = float(engine["preconditioner"])
    factor, share, divisor, *rest = variant.split(",")
    gradients = "closed_form" if rest == ["cf"] else "monte_carlo"
    share = None if share == "joint" else float(share)
    if divisor != "none":
        full_rank_step.SCALE_CAP_DIVISOR = float(divisor)
    kwargs = {"scale_noise": 1.0 / float(factor), "scale_cap": divisor != "none",
              "mean_clip_share": share, "elbo_gradients": gradients}
    release, clipped = fr.run_dpvi_full_rank(
        rows, y, prior_scale=prior_scale(cell), noise_multiplier=engine["noise_multiplier"],
        clip_norm=engine["clip_norm"], sampling_rate=engine["sampling_rate"],
        n_steps=engine["n_steps"], burn_in=engine["burn_in"],
        learning_rate=engine["learning_rate"], preconditioner=beta,
        n_mc_samples=engine["n_mc_samples"], random_state=seed, return_clipped=True,
        **kwargs)
    beta_s = float(release.preconditioner[-1])
    C = float(engine["clip_norm"])
    # block norms at the last iterate, one fresh batch
    step = full_rank_step._FullRankStep(n, N, prior_scale(cell), beta_s, beta_s, C, share,
                                        closed_form=gradients == "closed_form")
    g = torch.Generator().manual_seed(seed)
    idx = torch.as_tensor(np.flatnonzero(np.random.default_rng(seed).random(N)
                                         < engine["sampling_rate"]))
    Xt = torch.as_tensor(rows, dtype=torch.float64)[idx]
    yt = torch.as_tensor(y, dtype=torch.float64)[idx]
    phi = torch.as_tensor(release.phi)
    m, rho, U = phi[:n], phi[n:2 * n], phi[2 * n:]
    eps = torch.randn(engine["n_mc_samples"], n, generator=g, dtype=torch.float64)
    eps = eps - eps.mean(0)
    pieces = step.pieces(m, rho, step.factors(rho, U), None if step.closed_form else eps,
                         Xt, yt)
    sq_m, sq_rho, sq_u = pieces[5], pieces[6], pieces[7]
    norms = {"means": sq_m.sqrt(), "scales": (beta_s**2 * (sq_rho + sq_u)).sqrt()}
    quant = {k: (np.quantile(v.numpy(), [0.5, 0.9, 0.99]) / C).tolist()
             for k, v in norms.items()}
    est.n_features_in_ = X.shape[1]
    flat = est._onehot_flat_directions()
    H = full_rank_curvature(release, prior_scale=prior_scale(cell),
                            flat_directions=flat if len(flat) else None)
    p = 1 / (1 + np.exp(-rows @ theta))
    H_data = (rows * (p * (1 - p))[:, None]).T @ rows + np.eye(n) / prior_scale(cell) ** 2
    gen = scipy.linalg.eigvalsh(H, H_data)
    return {"clipped": clipped, "quantiles": quant, "eig": [float(gen.min()), float(gen.max())],
            "factor": beta_s / beta, "beta_mf": beta, "N": N, "n": n, "C": C}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", choices=list(CELLS))
    parser.add_argument("--variants", nargs="+", default=["4,joint,none", "4,0.8,6"])
    parser.add_argument("--n-sim", type=int, default=2)
    parser.add_argument("--first-seed", type=int, default=5000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--save", default="ablation_logistic_full_rank_clipping")
    args = parser.parse_args()
    payload = {"machine": machine(), "args": vars(args), "cells": {}}
    jobs = [(c, s, v) for c in args.cells for v in args.variants
            for s in range(args.first_seed, args.first_seed + args.n_sim)]
    out = Parallel(n_jobs=args.n_jobs)(delayed(one)(*job) for job in jobs)
    for (cell, seed, variant), r in zip(jobs, out):
        payload["cells"].setdefault(cell, {}).setdefault(variant, []).append(r)
        q = r["quantiles"]
        print(f"{cell:<12} {variant:<13} seed {seed}: N {r['N']} n {r['n']} beta "
              f"x{r['factor']:.2f} clipped {r['clipped']['means']:.4f} / "
              f"{r['clipped']['scales']:.4f}; norms/C means {q['means'][0]:.2f}/{q['means'][1]:.2f}"
              f"/{q['means'][2]:.2f} scales {q['scales'][0]:.2f}/{q['scales'][1]:.2f}"
              f"/{q['scales'][2]:.2f}; curvature eig {r['eig'][0]:.2f}-{r['eig'][1]:.2f}",
              flush=True)
    save(args.save, payload)


if __name__ == "__main__":
    main()
