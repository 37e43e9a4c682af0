"""Issue 14's Adult criteria with the estimator's defaults, through the public API.

``DPBayesianLogisticRegression(epsilon=eps, random_state=seed).fit(X, y)`` on the
bundled UCI Adult training split (the package's public preprocessing), scored on the
test split with ``predict_proba``: calibration RMSE (10 quantile bins), ECE, Brier
score and ROC AUC, mean +- sd over repetitions. Beside it, on the same DP-SGD runs
(same seeds and settings), the naive baseline ``inference="last_iterate"``, and the
previous default clipping norm ``clip_norm = 2 sqrt(57)`` (``--variants fixed``),
and post-processing variants: ``auto_blocks`` (the schema's ``onehot_blocks``),
``matched`` / ``matched_blocks`` (``error_model="dense_matched"`` without / with them),
``matched_blocks_probit`` (and ``wander_correction="probit"``), ``dec0.1`` /
``dec0.1_blocks`` (``decorrelation=0.1`` without / with the blocks).

Run: python benchmarks/adult_defaults.py --reps 20
"""

import argparse
import math
import time

import numpy as np
from joblib import Parallel, delayed

from _common import machine, save

VARIANTS = {"auto": {}, "auto_naive": {"inference": "last_iterate"},
            "fixed": {"clip_norm": 2 * math.sqrt(57)},
            "fixed_naive": {"clip_norm": 2 * math.sqrt(57), "inference": "last_iterate"},
            # the default with the schema's one-hot blocks, and the curvature matched to
            # the mean-field diagonal with them (twenty-second session)
            "auto_blocks": {"onehot_blocks": "adult"},
            "matched_blocks": {"error_model": "dense_matched", "onehot_blocks": "adult"},
            "matched": {"error_model": "dense_matched"},
            "matched_probit": {"error_model": "dense_matched", "wander_correction": "probit"},
            "matched_blocks_probit": {"error_model": "dense_matched", "onehot_blocks": "adult",
                                      "wander_correction": "probit"},
            # thirty-third session: the fit in the eigenbasis of the private Gram matrix
            "dec0.1": {"decorrelation": 0.1},
            "dec0.1_blocks": {"decorrelation": 0.1, "onehot_blocks": "adult"}}


def one(seed, epsilon, variant):
    import warnings

    import torch
    from sklearn.metrics import roc_auc_score

    from skdpvi import DPBayesianLogisticRegression
    from skdpvi.datasets import load_adult
    from skdpvi.metrics import brier_score_loss, calibration_rmse, expected_calibration_error

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    X, y = load_adult(subset="train", return_X_y=True)
    Xt, yt = load_adult(subset="test", return_X_y=True)
    params = dict(VARIANTS[variant])
    if params.get("onehot_blocks") == "adult":
        params["onehot_blocks"] = load_adult().onehot_blocks
    est = DPBayesianLogisticRegression(epsilon=epsilon, random_state=seed, **params).fit(X, y)
    p = est.predict_proba(Xt)[:, 1]
    return {"cal_rmse": calibration_rmse(yt, p), "ece": expected_calibration_error(yt, p),
            "brier": brier_score_loss(yt, p), "auc": float(roc_auc_score(yt, p)),
            "clip_norm": est.clip_norm_, "epsilon_spent": est.epsilon_}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 0.3, 1.0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--save", default="adult_defaults")
    args = parser.parse_args()
    payload = {"machine": machine(), "reps": args.reps, "cells": {}}
    for eps in args.epsilons:
        cell = {}
        for variant in args.variants:
            start = time.perf_counter()
            out = Parallel(n_jobs=args.n_jobs)(delayed(one)(seed, eps, variant)
                                               for seed in range(args.reps))
            cell[variant] = {k: [float(np.mean([o[k] for o in out])),
                                 float(np.std([o[k] for o in out]))] for k in out[0]}
            cell[variant]["seconds"] = time.perf_counter() - start
            r = cell[variant]
            print(f"epsilon {eps:<4} {variant:<12} calibration RMSE {r['cal_rmse'][0]:.4f} "
                  f"+- {r['cal_rmse'][1]:.4f}, ECE {r['ece'][0]:.4f}, Brier {r['brier'][0]:.4f}, "
                  f"AUC {r['auc'][0]:.4f}, clip norm {r['clip_norm'][0]:.3g} "
                  f"({r['clip_norm'][1]:.2g}), epsilon spent {r['epsilon_spent'][0]:.4f}",
                  flush=True)
        payload["cells"][str(eps)] = cell
        save(args.save, payload)


if __name__ == "__main__":
    main()
