"""UCI Adult with the curvature along the means' direction replaced (twenty-ninth session).

A probe of the private radial release the results page discusses ("The scales'
wander"): each repetition fits the default ``DPBayesianLogisticRegression`` on the
bundled training split, then post-processes the same release again with the curvature
of the fits that take ``"dense"`` replaced along ``u = x_bar / |x_bar|`` by
``kappa (sum_i sigma'(z_i) z_i^2 / |x_bar|^2 + 1)`` (``z_i`` the rows' logits at the
window's mean, cross terms with u 0) plus the noise of a Gaussian mechanism of
sensitivity 0.4393 spending ``--share`` of the budget's mu^2 (drawn here: not a
mechanism of the package, and not composed with the run's accounting). Calibration
RMSE (10 quantile bins) on the test split, default against replaced.

Run: python benchmarks/ablation_logistic/adult_radial.py --reps 6
"""

import argparse
import os
import sys
import warnings

import numpy as np
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import machine, save  # noqa: E402


def one(seed, epsilon, share):
    import torch

    import release_cache as rc
    from skdpvi import DPBayesianLogisticRegression
    from skdpvi.accounting import noise_multiplier
    from skdpvi.datasets import load_adult
    from skdpvi.metrics import calibration_rmse

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    X, y = load_adult(subset="train", return_X_y=True)
    Xt, yt = load_adult(subset="test", return_X_y=True)
    est = DPBayesianLogisticRegression(epsilon=epsilon, random_state=seed).fit(X, y)
    out = {"default": calibration_rmse(yt, est.predict_proba(Xt)[:, 1]),
           "error_model": est.error_model_}
    lr, dense = rc._linear_response(), rc._dense()
    window_curvature, posterior = lr.window_curvature, dense.linear_response_posterior
    state = {}

    def capture(stats, **kw):
        p = kw["n_means"]
        state.update(x_bar=stats.shift[:p] + stats.sum_x[:p] / stats.count,
                     kappa=kw["sampling_rate"],
                     shrunk=kw.get("diagonal_curvature") is not None)
        return posterior(stats, **kw)

    A = np.c_[np.asarray(X, float), np.ones(len(X))]
    mu = 1.0 / noise_multiplier(epsilon, 1e-5, 1.0, 1)[0]

    def radial(covariance, steps, noise_var, n_steps, floor=0.0):
        K, n_relax = window_curvature(covariance, steps, noise_var, n_steps, floor)
        if state["shrunk"]:  # "dense" fits only
            return K, n_relax
        x_bar = state["x_bar"]
        z = A @ x_bar
        total = float((0.25 / np.cosh(0.5 * z) ** 2) @ z**2)
        total += np.random.default_rng(seed + 7919).normal(0.0, 0.4393 / (mu * np.sqrt(share)))
        k_u = state["kappa"] * (max(total, 0.0) / (x_bar @ x_bar) + 1.0)
        u = x_bar / np.linalg.norm(x_bar)
        P = np.eye(len(K)) - np.outer(u, u)
        return P @ K @ P + max(k_u, floor) * np.outer(u, u), n_relax

    X_checked, _ = est._fit_inputs(X, y)
    seeds = est._fit_seeds()
    settings = est._engine_settings(X.shape[0], X.shape[1], X_checked, seeds.engine)
    with rc._patched((lr, "window_curvature", radial),
                     (dense, "linear_response_posterior", capture)):
        est._fit_from_result(est.dpvi_result_, settings, X.shape[0], seeds)
    out["radial"] = calibration_rmse(yt, est.predict_proba(Xt)[:, 1])
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.3, 0.1])
    parser.add_argument("--share", type=float, default=0.02)
    args = parser.parse_args()
    payload = {"machine": machine(), "reps": args.reps, "share": args.share, "cells": {}}
    for epsilon in args.epsilons:
        out = Parallel(n_jobs=2)(delayed(one)(s, epsilon, args.share) for s in range(args.reps))
        cell = {k: [float(np.mean([o[k] for o in out])), float(np.std([o[k] for o in out]))]
                for k in ("default", "radial")}
        cell["error_models"] = [o["error_model"] for o in out]
        payload["cells"][str(epsilon)] = cell
        print(f"epsilon {epsilon}: calibration RMSE default {cell['default'][0]:.4f} +- "
              f"{cell['default'][1]:.4f}, radial replaced {cell['radial'][0]:.4f} +- "
              f"{cell['radial'][1]:.4f} ({', '.join(cell['error_models'])})", flush=True)
    save("adult_radial_probe", payload)


if __name__ == "__main__":
    main()
