"""Probe: where the full-rank curvature reads wrong, against the exact VI optimum.

For cached fits (``full_rank.py --cache``), the generalised eigenvalues of the
release's curvature H against the exact variational optimum's ``S_vi^-1`` (median per
rank over the fits: 1 everywhere when H is right), and ``u' H u / u' S_vi^-1 u`` along
four directions: the VI mean's (radial), the intercept's, the exact curvature's
flattest (slowest to relax) and stiffest eigenvectors. Three readings: the default's
(shrunk towards the diagonal and the means' direction), unshrunk, and the window's
second half (``moments="late"``).

Run::

    python benchmarks/ablation_logistic/full_rank.py bin03d6 --n-sim 200 \\
        --variants shrunk_radial --cache /tmp/fits
    python benchmarks/ablation_logistic/full_rank_curvature_directions.py bin03d6 /tmp/fits --n 40
"""

import argparse
import glob
import os
import sys
import warnings

import numpy as np
from joblib import Parallel, delayed
from scipy.linalg import eigh

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import machine, save  # noqa: E402
from full_rank_centre_probe import load_fit  # noqa: E402
from release_cache import prior_scale  # noqa: E402
from skdpvi.noise_aware import full_rank_curvature  # noqa: E402

READINGS = {"default": ("radial", "window"), "unshrunk": (False, "window"),
            "late": (False, "late")}
DIRECTIONS = ("radial", "intercept", "slowest", "stiffest")


def one(cell, path):
    warnings.simplefilter("ignore")
    _, est, _, _, _, m_vi, S_vi = load_fit(cell, path)
    release, tau = est.dpvi_result_, prior_scale(cell)
    H_vi = np.linalg.inv(S_vi)
    vecs = np.linalg.eigh(H_vi)[1]
    directions = dict(zip(DIRECTIONS, (m_vi / np.linalg.norm(m_vi), np.eye(len(m_vi))[-1],
                                       vecs[:, 0], vecs[:, -1])))
    out = {}
    for name, (shrinkage, moments) in READINGS.items():
        H = full_rank_curvature(release, tau, None, shrinkage, moments)
        row = {k: float(u @ H @ u / (u @ H_vi @ u)) for k, u in directions.items()}
        row["eigenvalues"] = eigh(H, H_vi, eigvals_only=True).tolist()
        out[name] = row
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell")
    parser.add_argument("cache")
    parser.add_argument("--n", type=int, default=40, help="the first n cached fits")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--save", default="ablation_logistic_full_rank_curvature_directions")
    args = parser.parse_args()
    paths = sorted(glob.glob(os.path.join(args.cache, f"{args.cell}_*.pkl")))[:args.n]
    fits = Parallel(n_jobs=args.n_jobs)(delayed(one)(args.cell, p) for p in paths)
    rows = {}
    for name in READINGS:
        rows[name] = {k: float(np.median([f[name][k] for f in fits])) for k in DIRECTIONS}
        rows[name]["eigenvalues"] = np.median([f[name]["eigenvalues"] for f in fits], 0).tolist()
        print(f"{args.cell} {name:<9} " + " ".join(f"{k} {rows[name][k]:.2f}" for k in DIRECTIONS)
              + "; generalised eigenvalues " + " ".join(f"{v:.2f}" for v in rows[name]["eigenvalues"]))
    tag = os.path.basename(os.path.normpath(args.cache))
    save(f"{args.save}_{args.cell}_{tag}", {"machine": machine(), "args": vars(args),
                                            "n_fits": len(fits), "rows": rows})


if __name__ == "__main__":
    main()
