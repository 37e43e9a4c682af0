"""Probe: is it the full-rank default's centre or its shape that prior references see?

On the fits ``full_rank.py --cache DIR`` kept for a cell, scores (as ``full_rank.py``
does, the same prior references) four posteriors per simulation: the default; the
exact VI optimum ``N(m_vi, S_vi)`` of the same ELBO (no privacy,
:func:`full_rank_vi_reference.vi_optimum`); the default's mean with ``S_vi``'s shape
scaled to the default's trace; ``m_vi`` with the default's covariance. Then the
default's radial z (along the truth) by the size of the coefficients, and the default
with the centre's Newton step taken with the late half's curvature
(``full_rank_curvature(moments="late")``) and the window's everywhere else.

Run::

    python benchmarks/ablation_logistic/full_rank.py toep06d6e05 --n-sim 200 \\
        --variants shrunk_radial --cache /tmp/fits
    python benchmarks/ablation_logistic/full_rank_centre_probe.py toep06d6e05 /tmp/fits
"""

import argparse
import copy
import glob
import os
import pickle
import sys
import warnings

import numpy as np
import torch
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import full_rank as fr  # noqa: E402
from _common import machine, save  # noqa: E402
from full_rank_vi_reference import vi_optimum  # noqa: E402
from release_cache import CELLS, _rule_cell, describe, prior_scale, score, simulate  # noqa: E402
from skdpvi.noise_aware import full_rank_curvature  # noqa: E402

DEFAULT = fr.CORRECTIONS["shrunk_radial"]


def _late_newton_draws(est):
    """The default posterior with the centre's Newton step read with the late half's
    curvature: the window's mean of the means moved by the two steps' difference."""
    release = est.dpvi_result_
    n, kappa = release.n_params, release.sampling_rate
    directions = est._onehot_flat_directions()
    flat = directions if len(directions) else None
    g = np.asarray(release.mean_gradient, float)
    steps = [np.linalg.solve(kappa * full_rank_curvature(release, est.prior_scale, flat,
                                                         "radial", moments), g)
             for moments in ("late", "window")]
    moved = copy.copy(release)
    moved.mean_phi = np.array(release.mean_phi, float)
    moved.mean_phi[:n] += steps[1] - steps[0]
    est = copy.copy(est)
    est.dpvi_result_ = moved
    return fr._draws(est, DEFAULT)


def load_fit(cell, path, exact=True):
    """A cached fit of ``full_rank.py --cache``: (seed, estimator, theta, the engine's
    rows, the 0/1 targets[, and with ``exact`` the exact VI optimum ``(m_vi, S_vi)``])."""
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    seed = int(path.rsplit("_", 1)[1][:-4])
    with open(path, "rb") as f:
        est, _ = pickle.load(f)
    theta, X, y = simulate(_rule_cell(cell), seed)
    X_checked, y01 = est._fit_inputs(X, y)
    rows = est._full_rank_rows(X_checked)
    fit = (seed, est, theta, rows, y01)
    return fit + vi_optimum(rows, y01, prior_scale(cell)) if exact else fit


def one(cell, path):
    seed, est, theta, _, _, m_vi, S_vi = load_fit(cell, path)
    ours = fr._draws(est, DEFAULT)
    mean, cov = ours.mean(0), np.cov(ours.T)
    rng = np.random.default_rng(seed)
    posteriors = {
        "default": ours,
        "exact VI": rng.multivariate_normal(m_vi, S_vi, size=1000),
        "default mean, S_vi shape": rng.multivariate_normal(
            mean, S_vi * np.trace(cov) / np.trace(S_vi), size=1000),
        "m_vi, default covariance": rng.multivariate_normal(m_vi, cov, size=1000),
        "late Newton step": _late_newton_draws(est),
    }
    u = theta / np.linalg.norm(theta)
    radial = float((mean - theta) @ u / np.sqrt(u @ cov @ u))
    return seed, theta, posteriors, radial


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell", choices=list(CELLS))
    parser.add_argument("cache")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--save", default="ablation_logistic_full_rank_centre_probe")
    args = parser.parse_args()
    paths = sorted(glob.glob(os.path.join(args.cache, f"{args.cell}_*.pkl")))
    res = sorted(Parallel(n_jobs=args.n_jobs)(delayed(one)(args.cell, p) for p in paths),
                 key=lambda r: r[0])
    theta = np.array([r[1] for r in res])
    K, p = theta.shape
    refs = prior_scale(args.cell) * np.random.default_rng(12345).standard_normal((K, p))
    payload = {"machine": machine(), "args": vars(args), "n_sim": K, "posteriors": {}}
    for name in res[0][2]:
        row = score(np.array([r[2][name] for r in res]), theta, refs)
        payload["posteriors"][name] = row
        print(f"{args.cell} {name:26s} {describe(row)}", flush=True)
    norms = np.linalg.norm(theta, axis=1)
    radial = np.array([r[3] for r in res])
    edges = np.quantile(norms, [0.0, 0.25, 0.5, 0.75, 1.0])
    payload["radial_by_size"] = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        k = (norms >= lo) & (norms <= hi)
        payload["radial_by_size"].append({"norm": [float(lo), float(hi)], "n": int(k.sum()),
                                          "mean": float(radial[k].mean()),
                                          "sd": float(radial[k].std())})
        print(f"  |theta| {lo:.2f}-{hi:.2f}: {k.sum()} simulations, radial z "
              f"{radial[k].mean():+.2f} ({radial[k].std():.2f})")
    save(f"{args.save}_{args.cell}", payload)


if __name__ == "__main__":
    main()
