"""Probe: the full-rank trace's lag behind the VI optimum along the coefficients.

For each simulation of a ``release_cache.py`` cell: the exact full-rank VI optimum
``N(m_vi, S_vi)`` (``full_rank_vi_reference.simulation``, non-private), one private
run with the default estimator's full-rank mechanism (``--set`` changes estimator
parameters before the accountant, e.g. ``'{"epsilon": 30}'`` or ``'{"max_iter":
40000}'``; ``--engine`` overrides :func:`~skdpvi.dpvi.run_dpvi_full_rank`'s keyword
arguments, e.g. ``'{"mean_preconditioning": 100, "init_scale": 2.0}'``) and its
posterior (``full_rank_posterior`` with the default's shrinkage and wander correction,
without declared one-hot directions: Gaussian cells only). Reported, u the truth's
direction and v a random direction across it:

- ``lag``: the window's mean of the means minus ``m_vi``, along u;
- ``relaxations``: ``learning_rate * kappa * T * lambda`` of the means along the
  stiffest and the flattest direction of ``S_vi^-1`` and along u (how many times the
  plain step relaxes the means there in the whole run);
- the truth's z along u and along v with the posterior's mean and total sd (mean
  and root mean square over the simulations; 0 and 1 are right).

Run: python benchmarks/ablation_logistic/wide_prior_lag.py d10ps2 --n-sim 12 \
         --engine '{"mean_preconditioning": 100}'
"""

import json
import os
import sys

import numpy as np
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import machine, save  # noqa: E402
from full_rank_vi_reference import cell_parser, simulation  # noqa: E402
from skdpvi.dpvi.full_rank import run_dpvi_full_rank  # noqa: E402
from skdpvi.noise_aware import full_rank_posterior  # noqa: E402


def one(cell, seed, params, engine):
    theta, rows, y01, tau, kw, (m_vi, S_vi), u, v = simulation(cell, seed, **params)
    release = run_dpvi_full_rank(rows, y01, random_state=seed, **{**kw, **engine})
    components, info = full_rank_posterior(release, prior_scale=tau, n_components=2000,
                                           wander_correction=True,
                                           curvature_shrinkage="radial", random_state=0)
    mean = components.mean.mean(0)
    total = info["covariance"] + info["component_covariance"]
    rate = kw["learning_rate"] * kw["sampling_rate"] * kw["n_steps"]
    lam = np.linalg.eigvalsh(np.linalg.inv(S_vi))
    return {"lag": float((release.mean_phi[:len(u)] - m_vi) @ u),
            "relaxations": [rate * lam[-1], rate * lam[0], rate / float(u @ S_vi @ u)],
            "z_u": float((mean - theta) @ u / np.sqrt(u @ total @ u)),
            "z_v": float((mean - theta) @ v / np.sqrt(v @ total @ v))}


def main():
    parser = cell_parser(__doc__.splitlines()[0])
    parser.add_argument("--set", default="{}", help="estimator parameters (JSON)")
    parser.add_argument("--engine", default="{}", help="run_dpvi_full_rank overrides (JSON)")
    parser.add_argument("--save", default="ablation_logistic_wide_prior_lag")
    args = parser.parse_args()
    params, engine = json.loads(args.set), json.loads(args.engine)
    rows = Parallel(n_jobs=args.n_jobs)(
        delayed(one)(args.cell, s, params, engine)
        for s in range(args.first_seed, args.first_seed + args.n_sim))
    z_u, z_v = (np.array([r[k] for r in rows]) for k in ("z_u", "z_v"))
    relax = np.median([r["relaxations"] for r in rows], axis=0)
    summary = {"lag": float(np.mean([r["lag"] for r in rows])),
               "relaxations_stiffest_flattest_u": relax.tolist(),
               "z_u": [float(z_u.mean()), float(np.sqrt((z_u**2).mean()))],
               "z_v": [float(z_v.mean()), float(np.sqrt((z_v**2).mean()))]}
    print(f"{args.cell} set {params} engine {engine}: lag along u {summary['lag']:+.2f}; "
          f"relaxations (median) stiffest {relax[0]:.1f}, flattest {relax[1]:.2f}, along u "
          f"{relax[2]:.2f}; truth z along u {summary['z_u'][0]:+.2f} (rms "
          f"{summary['z_u'][1]:.2f}), across rms {summary['z_v'][1]:.2f}", flush=True)
    label = "_".join(f"{k}-{v}" for k, v in {**params, **engine}.items()) or "default"
    save(f"{args.save}_{args.cell}_{label}", {"machine": machine(), "args": vars(args),
                                             "summary": summary, "per_simulation": rows})


if __name__ == "__main__":
    main()
