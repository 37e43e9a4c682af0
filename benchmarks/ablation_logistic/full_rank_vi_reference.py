"""Probe: what the full-rank default's curvature and centre read wrong, against the exact VI optimum.

For each simulation of a ``release_cache.py`` cell, the exact (deterministic,
non-private) optimum of the same full-rank Gaussian ELBO the engine descends,
``N(m_vi, S_vi)`` (Gauss-Hermite expectations, L-BFGS), beside the release of one
private run with the default estimator's mechanism (``--variant`` overrides
:func:`~skdpvi.dpvi.run_dpvi_full_rank`'s keyword arguments, as a Python expression
over ``kw``, the default's own; e.g. ``"dict(noise_multiplier=kw['noise_multiplier'] /
16)"``). Reported per variant, medians over the simulations (u the truth's direction,
v a random direction across it):

- the curvature read off the whole window, its first and its second half
  (:func:`~skdpvi.noise_aware.full_rank_curvature`, no shrinkage): ``u' H^-1 u / u'
  S_vi u`` (radial) and ``v' H^-1 v / v' S_vi v`` (transverse), 1 is right;
- the window's mean of the means against ``m_vi`` along u;
- with ``--posterior``: the default's posterior (the window's curvature, shrunk) and
  the late-half one: the optimum's error along u (posterior mean - ``m_vi``) over
  the sd the posterior states for it (mean and root mean square; 0 and 1 are right),
  and the same with ``S_vi``'s curvature in the error model.

Run::

    python benchmarks/ablation_logistic/full_rank_vi_reference.py gauss --n-sim 32 --posterior
    python benchmarks/ablation_logistic/full_rank_vi_reference.py gauss --n-sim 12 \\
        --variant "{}" "dict(noise_multiplier=kw['noise_multiplier'] / 16)"
"""

import argparse
import os
import sys
import warnings

import numpy as np
import torch
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import machine, save  # noqa: E402
from release_cache import CELLS, _rule_cell, estimator, prior_scale, simulate  # noqa: E402
from skdpvi.dpvi.full_rank import run_dpvi_full_rank  # noqa: E402
from skdpvi.models.base import gauss_hermite  # noqa: E402
from skdpvi.noise_aware import full_rank_posterior  # noqa: E402
from skdpvi.noise_aware.full_rank import _stationarity_curvature  # noqa: E402


def vi_optimum(X, y, prior_sd, n_nodes=40):
    """The exact optimum ``(m, L L^T)`` of the full-rank logistic ELBO (no privacy)."""
    X = torch.as_tensor(X, dtype=torch.float64)
    y = torch.as_tensor(y, dtype=torch.float64)
    n = X.shape[1]
    nodes, weights = gauss_hermite(n_nodes, torch.float64, "cpu")
    m = torch.zeros(n, dtype=torch.float64, requires_grad=True)
    L_raw = (0.1 * torch.eye(n, dtype=torch.float64)).requires_grad_()
    opt = torch.optim.LBFGS([m, L_raw], max_iter=500, tolerance_grad=1e-10,
                            tolerance_change=1e-14, line_search_fn="strong_wolfe")

    def negative_elbo():
        opt.zero_grad()
        L = torch.tril(L_raw)
        logit = (X @ m)[:, None] + (X @ L).norm(dim=1)[:, None] * nodes
        nll = ((torch.nn.functional.softplus(logit) - y[:, None] * logit) @ weights).sum()
        value = nll + (m @ m + (L * L).sum()) / (2 * prior_sd**2) \
            - torch.log(torch.abs(torch.diagonal(L))).sum()
        value.backward()
        return value

    for _ in range(3):
        opt.step(negative_elbo)
    L = torch.tril(L_raw).detach()
    return m.detach().numpy(), (L @ L.T).numpy()


def _ratio(H, S, direction):
    return float(direction @ np.linalg.solve(H, direction) / (direction @ S @ direction))


def _curvature(release, moments, prior_sd):
    H = _stationarity_curvature(release.n_params, **moments)
    lam, V = np.linalg.eigh(0.5 * (H + H.T))
    return (V * np.maximum(lam, 1.0 / prior_sd**2)) @ V.T


def simulation(cell, seed, **params):
    """One simulation of ``cell`` with the default full-rank estimator's mechanism
    (``params`` change estimator parameters): the truth, the engine's rows and 0/1
    targets, the prior scale, :func:`run_dpvi_full_rank`'s keyword arguments, the
    exact VI optimum ``(m_vi, S_vi)``, the truth's direction u and a random unit v
    across it."""
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    theta, X, y = simulate(_rule_cell(cell), seed)
    tau = prior_scale(cell)
    est = estimator(cell, variational_family="full_rank").set_params(random_state=seed,
                                                                     **params)
    X_checked, y01 = est._fit_inputs(X, y)
    settings = est._engine_settings(X_checked.shape[0], X_checked.shape[1], X_checked,
                                    est._fit_seeds().engine)
    kw = est._full_rank_engine(settings)
    rows = est._full_rank_rows(X_checked)
    m_vi, S_vi = vi_optimum(rows, y01, tau)
    u = theta / np.linalg.norm(theta)
    v = np.random.default_rng(seed).standard_normal(len(u))
    v -= (v @ u) * u
    v /= np.linalg.norm(v)
    return theta, rows, y01, tau, kw, (m_vi, S_vi), u, v


def one(cell, seed, variants, posterior):
    theta, rows, y01, tau, kw, (m_vi, S_vi), u, v = simulation(cell, seed)
    out = {}
    for name in variants:
        release = run_dpvi_full_rank(rows, y01, random_state=seed,
                                     **{**kw, **eval(name, {}, {"kw": kw})})  # noqa: S307
        whole = dict(scale_moments=release.scale_moments,
                     diagonal_moments=release.diagonal_moments, entropy=release.entropy)
        row = {}
        for label, moments in (("window", whole), ("first", release.half_moments[0]),
                               ("second", release.half_moments[1])):
            H = _curvature(release, moments, tau)
            row[label] = (_ratio(H, S_vi, u), _ratio(H, S_vi, v))
        row["mean_lag"] = float((release.mean_phi[:len(u)] - m_vi) @ u)
        if posterior:
            kappa = release.sampling_rate
            K_inv = S_vi / kappa
            exact_error = release.noise_std[0] ** 2 * K_inv @ K_inv / release.count
            for label, moments in (("default", "window"), ("late", "late")):
                components, info = full_rank_posterior(
                    release, prior_scale=tau, n_components=2000, wander_correction=True,
                    curvature_shrinkage="radial", curvature_moments=moments, random_state=0)
                error = float((components.mean.mean(0) - m_vi) @ u)
                row[label] = (error / np.sqrt(u @ info["covariance"] @ u),
                              error / np.sqrt(u @ exact_error @ u))
        out[name] = row
    return out


def cell_parser(description):
    """The arguments of a probe over one cell's simulations: the cell, how many, the
    first seed and the workers."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("cell", choices=list(CELLS))
    parser.add_argument("--n-sim", type=int, default=12)
    parser.add_argument("--first-seed", type=int, default=5000)
    parser.add_argument("--n-jobs", type=int, default=2)
    return parser


def main():
    parser = cell_parser(__doc__.splitlines()[0])
    parser.add_argument("--variant", nargs="+", default=["{}"])
    parser.add_argument("--posterior", action="store_true")
    parser.add_argument("--save", default="ablation_logistic_full_rank_vi_reference")
    args = parser.parse_args()
    seeds = range(args.first_seed, args.first_seed + args.n_sim)
    results = Parallel(n_jobs=args.n_jobs)(
        delayed(one)(args.cell, s, args.variant, args.posterior) for s in seeds)
    payload = {"machine": machine(), "args": vars(args), "variants": {}}
    for name in args.variant:
        rows = [r[name] for r in results]
        summary = {label: [float(np.median([r[label][k] for r in rows])) for k in (0, 1)]
                   for label in ("window", "first", "second")}
        summary["mean_lag"] = float(np.mean([r["mean_lag"] for r in rows]))
        line = ", ".join(f"{k} {v[0]:.2f} / {v[1]:.2f}" for k, v in summary.items()
                         if k != "mean_lag")
        print(f"{args.cell} {name}: curvature radial / transverse H^-1 over S_vi: {line}; "
              f"window mean - m_vi along u {summary['mean_lag']:+.3f}", flush=True)
        if args.posterior:
            for label in ("default", "late"):
                z = np.array([r[label] for r in rows])
                summary[label] = {"stated": [float(z[:, 0].mean()),
                                             float(np.sqrt((z[:, 0] ** 2).mean()))],
                                  "exact_curvature": [float(z[:, 1].mean()),
                                                      float(np.sqrt((z[:, 1] ** 2).mean()))]}
                s = summary[label]
                print(f"    {label}: optimum error along u / stated sd {s['stated'][0]:+.2f} "
                      f"(rms {s['stated'][1]:.2f}); / sd with S_vi's curvature "
                      f"{s['exact_curvature'][0]:+.2f} (rms {s['exact_curvature'][1]:.2f})",
                      flush=True)
        payload["variants"][name] = {"summary": summary, "per_simulation": rows}
    save(f"{args.save}_{args.cell}", payload)


if __name__ == "__main__":
    main()
