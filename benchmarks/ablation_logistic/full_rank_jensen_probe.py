"""Probe: is the full-rank centre's error the wander's Jensen shift?

On the fits ``full_rank.py --cache DIR`` kept for a cell, per simulation: the
default posterior's centre before the wander correction (``mu0``), the exact VI
optimum ``m_vi`` of the same ELBO (:func:`full_rank_vi_reference.vi_optimum`), the
Jensen shift the correction removes (``(pi / 16) w H^-1 H_lik mu0``, from the release
alone) and the one computed from the private data (``H_vi^-1 b`` with ``b = 1/2
sum_i E_q[sigma''(x_i theta)] x_i^T S x_i x_i``, S the window's covariance of the
means). Reported, means over the simulations, every vector whitened by the
posterior's stated covariance: the size of ``mu0 - m_vi`` and of the data's shift,
and the components of ``mu0 - m_vi`` and of the release's shift along the data's
shift, averaged over the simulations (their ratios to its size: 1 when the Jensen
shift is all of the systematic error along it, and when the release reads it right).

Run::

    python benchmarks/ablation_logistic/full_rank.py toep06d6e05 --n-sim 200 \\
        --set burn_in=0.5 elbo_gradients=closed_form --cache /tmp/fits
    python benchmarks/ablation_logistic/full_rank_jensen_probe.py toep06d6e05 /tmp/fits
"""

import argparse
import glob
import os
import sys

import numpy as np
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import machine, save  # noqa: E402
from full_rank_centre_probe import load_fit  # noqa: E402
from release_cache import CELLS, prior_scale  # noqa: E402
from skdpvi.noise_aware import full_rank_posterior, full_rank_wander_width  # noqa: E402


def one(cell, path):
    seed, est, _, rows, _, m_vi, S_vi = load_fit(cell, path)
    tau = prior_scale(cell)
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
    error, shift = whiten @ (mu0 - m_vi), whiten @ data_shift
    direction = shift / np.linalg.norm(shift)
    return dict(seed=seed, error=float(np.linalg.norm(error)),
                data_shift=float(np.linalg.norm(shift)),
                release_shift=float(np.linalg.norm(whiten @ release_shift)),
                error_along_shift=float(error @ direction),
                release_along_shift=float(whiten @ release_shift @ direction))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell", choices=list(CELLS))
    parser.add_argument("cache")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--save", default="ablation_logistic_full_rank_jensen_probe")
    args = parser.parse_args()
    paths = sorted(glob.glob(os.path.join(args.cache, f"{args.cell}_*.pkl")))
    rows = Parallel(n_jobs=args.n_jobs)(delayed(one)(args.cell, p) for p in paths)
    means = {k: float(np.mean([r[k] for r in rows])) for k in rows[0] if k != "seed"}
    se = float(np.std([r["error_along_shift"] for r in rows]) / np.sqrt(len(rows)))
    print(f"{args.cell}: {len(rows)} fits; mean whitened |mu0 - m_vi| {means['error']:.2f}; "
          f"along the data's Jensen shift (mean size {means['data_shift']:.3f}) the error is "
          f"{means['error_along_shift']:.3f} +- {se:.3f} (ratio "
          f"{means['error_along_shift'] / means['data_shift']:.2f}) and the release's shift "
          f"{means['release_along_shift']:.3f} (ratio "
          f"{means['release_along_shift'] / means['data_shift']:.2f})")
    save(f"{args.save}_{args.cell}", {"machine": machine(), "args": vars(args),
                                      "means": means, "error_along_shift_se": se,
                                      "simulations": rows})


if __name__ == "__main__":
    main()
