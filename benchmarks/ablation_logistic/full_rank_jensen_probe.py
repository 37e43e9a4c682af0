"""Probe: is the full-rank centre's error the wander's Jensen shift?

On the fits ``full_rank.py --cache DIR`` kept for a cell, per simulation: the
default posterior's centre before the wander correction (``mu0``), the exact VI
optimum ``m_vi`` of the same ELBO (:func:`full_rank_vi_reference.vi_optimum`), the
Jensen shift the correction removes (``(pi / 16) w H^-1 H_lik mu0``, from the release
alone) and the one computed from the private data (``H_vi^-1 b`` with ``b = 1/2
sum_i E_q[sigma''(x_i theta)] x_i^T S x_i x_i``, S the window's covariance of the
means). Reported, medians over the simulations, every vector whitened by the
posterior's stated covariance: the size of ``mu0 - m_vi`` and of both shifts; the
coefficient of ``mu0 - m_vi`` on the data's shift (1: the Jensen shift is all of the
systematic error) and of the release's shift on it (1: the release reads it right).

Run::

    python benchmarks/ablation_logistic/full_rank.py toep06d6e05 --n-sim 200 \\
        --set burn_in=0.5 elbo_gradients=closed_form --cache /tmp/fits
    python benchmarks/ablation_logistic/full_rank_jensen_probe.py toep06d6e05 /tmp/fits
"""

import argparse
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

from _common import machine, save  # noqa: E402
from full_rank_vi_reference import vi_optimum  # noqa: E402
from release_cache import CELLS, _rule_cell, prior_scale, simulate  # noqa: E402
from skdpvi.noise_aware import full_rank_posterior, full_rank_wander_width  # noqa: E402


def one(cell, path):
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    seed = int(path.rsplit("_", 1)[1][:-4])
    with open(path, "rb") as f:
        est, _ = pickle.load(f)
    theta, X, y = simulate(_rule_cell(cell), seed)
    X_checked, y01 = est._fit_inputs(X, y)
    rows = est._full_rank_rows(X_checked)
    tau = prior_scale(cell)
    m_vi, S_vi = vi_optimum(rows, y01, tau)
    release = est.dpvi_result_
    components, info = full_rank_posterior(release, prior_scale=tau, n_components=4000,
                                           curvature_shrinkage="radial", random_state=0)
    mu0, H = components.mean.mean(0), info["curvature"]
    n = len(mu0)
    w = full_rank_wander_width(release, H, tau)
    release_shift = (np.pi / 16) * w * np.linalg.solve(H, (H - np.eye(n) / tau**2) @ mu0)
    # the data's own: E_q sigma'' by Gauss-Hermite at the exact optimum
    nodes, weights = np.polynomial.hermite_e.hermegauss(40)
    weights = weights / weights.sum()
    logit_sd = np.sqrt(np.einsum("ij,jk,ik->i", rows, S_vi, rows))
    p = 1 / (1 + np.exp(-((rows @ m_vi)[:, None] + logit_sd[:, None] * nodes)))
    second = (p * (1 - p) * (1 - 2 * p)) @ weights
    wander = np.einsum("ij,jk,ik->i", rows, release.wander_covariance, rows)
    data_shift = -S_vi @ (0.5 * (second * wander) @ rows)
    whiten = np.linalg.cholesky(np.linalg.inv(info["covariance"] + info["component_covariance"])).T
    error = mu0 - m_vi
    return dict(seed=seed, error=float(np.linalg.norm(whiten @ error)),
                data_shift=float(np.linalg.norm(whiten @ data_shift)),
                release_shift=float(np.linalg.norm(whiten @ release_shift)),
                error_on_data=float(error @ data_shift / (data_shift @ data_shift)),
                release_on_data=float(release_shift @ data_shift / (data_shift @ data_shift)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell", choices=list(CELLS))
    parser.add_argument("cache")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--save", default="ablation_logistic_full_rank_jensen_probe")
    args = parser.parse_args()
    paths = sorted(glob.glob(os.path.join(args.cache, f"{args.cell}_*.pkl")))
    rows = Parallel(n_jobs=args.n_jobs)(delayed(one)(args.cell, p) for p in paths)
    medians = {k: float(np.median([r[k] for r in rows])) for k in rows[0] if k != "seed"}
    print(f"{args.cell}: {len(rows)} fits; whitened |mu0 - m_vi| {medians['error']:.2f}, "
          f"data's Jensen shift {medians['data_shift']:.2f}, the release's "
          f"{medians['release_shift']:.2f}; coefficient of the error on the data's shift "
          f"{medians['error_on_data']:.2f}, of the release's shift on it "
          f"{medians['release_on_data']:.2f}")
    save(f"{args.save}_{args.cell}", {"machine": machine(), "args": vars(args),
                                      "medians": medians, "simulations": rows})


if __name__ == "__main__":
    main()
