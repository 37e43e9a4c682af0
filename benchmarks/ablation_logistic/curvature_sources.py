"""Where the dense model's curvature could come from: post-processing ablations on cached runs.

The results page's section on logistic regression beyond Adult ("Where the
curvature can come from") quotes these numbers. DP-SGD runs are the expensive part, so they are
cached once per design (``run``) and every curvature variant is then computed from the
same runs (``post``), with the same summary as ``designs.py`` (TARP with the authors'
and the prior references, radial and per-coordinate z-scores).

Variants of the curvature K behind ``error_model="dense"`` (means' errors
``K^-1 Q K^-1 / n`` and components ``kappa K^-1``):

- ``ou``: the package's window curvature (:func:`~skdpvi.noise_aware.window_curvature`);
- ``stat``: the stationary Lyapunov solution, floored at the prior's curvature;
- ``lw`` / ``diag`` / ``elem``: the wander's correlations shrunk towards 0 before the
  window correction, by a Ledoit-Wolf intensity from their sampling noise
  (``2 / (N_i + N_j)`` for coordinates relaxing N_i and N_j times in the window),
  entirely, or entry by entry;
- ``scales``: the diagonal ``kappa / s_j^2`` of the mean-field optimum
  (``s_j^-2 = H_jj + 1 / tau^2``);
- ``anchor``: the window curvature rescaled to that diagonal; ``anchorlw`` the same
  with shrunk correlations;
- ``ls``: the symmetric least-squares slope of the released gradients on the means
  (``K C_xx + C_xx K = C_gx + C_xg`` with the window's centred cross sums; needs the
  trace, or a recorded ``sum g x^T``), ``lsn`` the unconstrained slope symmetrised,
  ``lsd`` its diagonal, ``lsk`` ``ls`` less the Kendall / Marriott-Pope bias
  ``(1 + 3 rho) / n`` of an autoregression's slope per eigen-direction;
- ``lstr`` / ``lsta``: ``ls`` with its eigenvalues scaled, or shifted, so that
  ``tr(Gamma K)`` equals the scales' ``sum_j gamma_j kappa / s_j^2``;
- ``bayesn``: a posterior over each ``ls`` eigen-direction's relaxation count N (grid,
  log-uniform prior from the floor to 10^3) under the simulated sampling distribution
  of the least-squares estimate of an AR(1) with intercept, one draw of every N per
  mixture component; ``bayeseb`` the same with the prior over N estimated from the
  run's own directions (empirical Bayes: the nonparametric maximum-likelihood prior
  on the grid, by EM);
- ``oracle``: the true ``kappa (H + I / tau^2)`` at the trace mean (private data: the
  yardstick);
- a trailing ``0`` centres the optimum's prior at the model's prior mean (0, sd tau)
  instead of at the trace mean;
- ``emcee``: the default (diagonal gradient model); ``mix``: half the draws from
  ``emcee``, half from ``ou``.

Run:
    python benchmarks/ablation_logistic/curvature_sources.py run d10 --d 10 --n 2000
    python benchmarks/ablation_logistic/curvature_sources.py run corr1 --design correlated
    python benchmarks/ablation_logistic/curvature_sources.py post d10 emcee ou scales anchor oracle
"""

import argparse
import math
import os
import pickle
import sys
import time
import warnings

import numpy as np
import torch
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import designs  # noqa: E402
from _common import _engine_settings  # noqa: E402
from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.dpvi import run_dpvi_batched  # noqa: E402
from skdpvi.metrics import coverage_rmse_floor  # noqa: E402
from skdpvi.models.components import GaussianComponents  # noqa: E402
from skdpvi.noise_aware import sample_phi_star, window_curvature  # noqa: E402
from skdpvi.noise_aware.coupling import _optimum_of_means, wander_curvature  # noqa: E402
from skdpvi.noise_aware.linear_response import _relaxation_times  # noqa: E402
from skdpvi.noise_aware.statistics_sampling import _psd_cholesky  # noqa: E402
from skdpvi.posterior import NoiseAwarePosterior  # noqa: E402

CACHE = os.environ.get("SKDPVI_ABLATION_CACHE", "/tmp/skdpvi_ablation_cache")


def simulator(spec):
    return (designs.correlated_design() if spec["design"] == "correlated"
            else designs.gaussian_design(spec["d"], spec["n"], spec["rho"]))


def _batch(seeds, spec, settings):
    torch.set_num_threads(1)
    simulate, model, _ = simulator(spec)
    sims = [simulate(np.random.default_rng(s)) for s in seeds]
    runs = run_dpvi_batched(model, [(X, y) for X, y, _ in sims], random_states=seeds,
                            **settings)
    return [(r, theta) for (_, _, theta), r in zip(sims, runs)]


def run(name, spec, k, seed=1000):
    """DP-SGD on K simulated data sets with the estimator's settings; cache the results."""
    _, model, n_examples = simulator(spec)
    est = DPBayesianLogisticRegression()
    settings = _engine_settings(
        model, epsilon=spec["epsilon"], clip_norm=2.0 * math.sqrt(model.n_params),
        n_steps=10_000, sampling_rate=0.1, delta=1e-5, burn_in=0.2, preconditioner=None,
        learning_rate_scale=est._default_learning_rate_scale(2 * model.n_params),
        n_examples=n_examples, record_trace=True)  # the least-squares variants read it
    seeds = list(range(seed, seed + k))
    start = time.perf_counter()
    out = Parallel(n_jobs=2)(delayed(_batch)(seeds[i:i + 25], spec, settings)
                             for i in range(0, k, 25))
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, f"{name}.pkl"), "wb") as f:
        pickle.dump({"runs": [o for part in out for o in part], "spec": spec,
                     "seeds": seeds}, f)
    print(f"{name}: {k} runs in {time.perf_counter() - start:.0f} s")


def _scales_curvature(st, p, n, kappa):
    """kappa / s_j^2: the diagonal curvature the mean-field scales imply (trace means)."""
    return kappa / np.logaddexp(0, st.shift[p:2 * p] + st.sum_x[p:2 * p] / n) ** 2


def _parts(r, model):
    p, st = model.n_params, r.stats
    return (p, st, st.count, r.sampling_rate, np.asarray(r.learning_rate, float)[:p],
            np.asarray(r.noise_std, float)[:p] ** 2)


def shrunk_covariance(S, gamma, q, n, mode="lw"):
    """The wander covariance with its correlations shrunk towards 0 by their noise."""
    root = np.sqrt(gamma)
    scaled = S / root[:, None] / root[None, :]
    innovation = float(np.exp(np.mean(np.log(gamma * q))))
    sd = np.sqrt(np.diag(scaled))
    R = scaled / sd[:, None] / sd[None, :]
    N = np.array([_relaxation_times(v / (n * innovation / 6)) for v in np.diag(scaled)])
    noise = np.minimum(2 / np.maximum(N[:, None] + N[None, :], 1e-9), 1 / 3)
    off = ~np.eye(len(sd), dtype=bool)
    if mode == "lw":
        lam = min(1.0, noise[off].sum() / max((R[off] ** 2).sum(), 1e-300))
        R = np.where(off, (1 - lam) * R, 1.0)
    elif mode == "diag":
        R = np.eye(len(sd))
    else:
        w = np.clip(1 - noise / np.maximum(R**2, 1e-300), 0, 1)
        R = np.where(off, w * R, 1.0)
    return R * sd[:, None] * sd[None, :] * root[:, None] * root[None, :]


def curvature(r, model, variant, X=None):
    p, st, n, kappa, gamma, q = _parts(r, model)
    S = st.wander_covariance()[:p, :p]
    floor = kappa / model.prior_scale**2
    if variant == "ou":
        return window_curvature(S, gamma, q, n, floor=floor)[0]
    if variant == "stat":
        lam, U = np.linalg.eigh(wander_curvature(S, gamma, q))
        return (U * np.maximum(lam, floor)) @ U.T
    if variant in ("lw", "diag", "elem"):
        return window_curvature(shrunk_covariance(S, gamma, q, n, variant), gamma, q, n,
                                floor=floor)[0]
    if variant in ("ls", "lsn", "lsd", "lsk"):
        start = r.trace_grad.shape[0] - n
        x, g = r.trace_phi[start:-1, :p], r.trace_grad[start:, :p]
        x, g = x - x.mean(0), g - g.mean(0)
        Cxx, Cgx = x.T @ x, g.T @ x
        if variant == "lsn":
            K = Cgx @ np.linalg.inv(Cxx)
        elif variant == "lsd":
            K = np.diag(np.diag(Cgx) / np.diag(Cxx))
        else:
            lam, U = np.linalg.eigh(Cxx)
            K = U @ (U.T @ (Cgx + Cgx.T) @ U / (lam[:, None] + lam[None, :])) @ U.T
        root = np.sqrt(gamma)
        lam, U = np.linalg.eigh(0.5 * (K + K.T) * root[:, None] * root[None, :])
        if variant == "lsk":
            lam = lam - (4 - 3 * lam) / n
        lam = np.maximum(lam, floor * (U**2).T @ gamma)
        K = (U * lam) @ U.T / root[:, None] / root[None, :]
        return 0.5 * (K + K.T)
    if variant in ("lstr", "lsta"):
        K = curvature(r, model, "ls")
        target = np.sum(gamma * _scales_curvature(st, p, n, kappa))
        root = np.sqrt(gamma)
        lam, U = np.linalg.eigh(root[:, None] * K * root[None, :])
        low = floor * (U**2).T @ gamma
        if variant == "lstr":
            lam = lam * target / lam.sum()
        else:
            from scipy.optimize import brentq

            excess = lambda c: np.maximum(lam - c, low).sum() - target  # noqa: E731
            lo = -10 * lam.max() - 1
            lam = lam - (brentq(excess, lo, lam.max())
                         if excess(lam.max()) < 0 < excess(lo) else 0.0)
        K = (U * np.maximum(lam, low)) @ U.T / root[:, None] / root[None, :]
        return 0.5 * (K + K.T)
    if variant == "oracle":
        H, _ = designs.released_hessian(r, model, X, 0, None)
        return kappa * (H + np.eye(p) / model.prior_scale**2)
    diagonal = _scales_curvature(st, p, n, kappa)
    if variant == "scales":
        return np.diag(diagonal)
    if variant in ("anchor", "anchorlw"):
        S = S if variant == "anchor" else shrunk_covariance(S, gamma, q, n)
        K = window_curvature(S, gamma, q, n, floor=floor)[0]
        d = np.sqrt(diagonal / np.diag(K))
        return d[:, None] * K * d[None, :]
    raise ValueError(f"unknown variant {variant!r}")


N_GRID = np.logspace(-2, 3, 61)


def _ls_sampling_table(n_sim=2000, m=800, seed=0):
    """Least-squares estimates of N (m per grid value) for an AR(1) with intercept."""
    from scipy.signal import lfilter

    rng = np.random.default_rng(seed)
    out = np.empty((len(N_GRID), m))
    for i, N in enumerate(N_GRID):
        rate = min(N / n_sim, 1.0)
        a = 1 - rate
        start = rng.standard_normal(m) * (np.sqrt(1 / (2 * rate - rate**2)) if N >= 1 else 0.0)
        x, _ = lfilter([1.0], [1.0, -a], rng.standard_normal((m, n_sim + 1)), axis=-1,
                       zi=(a * start)[:, None])
        xc = x[:, :-1] - x[:, :-1].mean(1, keepdims=True)
        dx = np.diff(x, axis=1)
        out[i] = -((xc * (dx - dx.mean(1, keepdims=True))).sum(1) / (xc * xc).sum(1)) * n_sim
    return out


def _bayes_n_draws(r, model, n_draws, rng, table, empirical=False):
    p, st, n, kappa, gamma, q = _parts(r, model)
    K = curvature(r, model, "ls")
    root = np.sqrt(gamma)
    rate, V = np.linalg.eigh(0.5 * (K + K.T) * root[:, None] * root[None, :])
    floor_n = kappa / model.prior_scale**2 * (V**2).T @ gamma * n
    width = 1.06 * table.std(1) * table.shape[1] ** -0.2 + 1e-9
    like = np.array([np.exp(-0.5 * ((N_hat - table) / width[:, None]) ** 2).mean(1) / width
                     for N_hat in rate * n])                      # (p, grid)
    allowed = (N_GRID[None, :] >= floor_n[:, None]).astype(float)
    prior = np.ones(len(N_GRID))                                  # log-uniform on the grid
    if empirical:  # the NPMLE of one prior shared by the p directions (EM)
        prior = allowed.mean(0) + 1e-12
        for _ in range(500):
            post = like * prior * allowed
            post /= np.maximum(post.sum(1, keepdims=True), 1e-300)
            prior = post.mean(0) + 1e-12
    picks = []
    for w, ok in zip(like * prior * allowed, allowed):
        w = w / w.sum() if w.sum() > 0 else ok / ok.sum()
        picks.append(rng.choice(len(N_GRID), size=n_draws, p=w))
    N = N_GRID[np.array(picks).T]
    x_bar = st.shift[:p] + st.sum_x[:p] / n
    g_bar = st.sum_g[:p] / n
    out = np.empty((n_draws, p))
    for m in range(n_draws):
        K_inv = (V * (n / N[m])) @ V.T * root[:, None] * root[None, :]
        estimate = x_bar - K_inv @ g_bar
        error = K_inv @ (q[:, None] * K_inv) / n
        error = 0.5 * (error + error.T)
        gain = error @ np.linalg.inv(error + np.eye(p))
        total = error - gain @ error + kappa * K_inv
        w, E = np.linalg.eigh(0.5 * (total + total.T))
        out[m] = (estimate + gain @ (x_bar - estimate)
                  + E @ (np.sqrt(np.maximum(w, 0)) * rng.standard_normal(p)))
    return out


_TABLE = {}


def draws(r, model, variant, X=None, n_draws=1000):
    """Unconstrained posterior draws of one run under one variant."""
    if variant in ("bayesn", "bayeseb"):
        if "ls" not in _TABLE:
            _TABLE["ls"] = _ls_sampling_table()
        return _bayes_n_draws(r, model, n_draws, np.random.default_rng(0), _TABLE["ls"],
                              empirical=variant == "bayeseb")
    if variant == "mix":
        return np.concatenate([draws(r, model, "emcee", X, n_draws)[: n_draws // 2],
                               draws(r, model, "ou", X, n_draws)[n_draws // 2:]])
    if variant == "emcee":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            phi, _ = sample_phi_star(r, "emcee", n_draws, random_state=0)
        return NoiseAwarePosterior(phi, model, "emcee").sample(n_draws, random_state=0,
                                                               unconstrained=True)
    p, st, n, kappa, gamma, q = _parts(r, model)
    centred = variant.endswith("0")
    K = curvature(r, model, variant.rstrip("0"), X)
    lam, U = np.linalg.eigh(0.5 * (K + K.T))
    K_inv = (U / lam) @ U.T
    mean, cov = _optimum_of_means(st, K_inv, q, model.prior_scale if centred else 1.0)
    if centred:  # the same gain, the prior's mean 0 in place of the trace mean
        x_bar = st.shift[:p] + st.sum_x[:p] / n
        estimate = x_bar - K_inv @ (st.sum_g[:p] / n)
        error = K_inv @ (q[:, None] * K_inv) / n
        error = 0.5 * (error + error.T)
        mean = estimate - error @ np.linalg.solve(
            error + model.prior_scale**2 * np.eye(p), estimate)
    rng = np.random.default_rng(0)
    means = mean + rng.standard_normal((n_draws, p)) @ _psd_cholesky(cov).T
    comp = kappa * K_inv
    components = GaussianComponents(means, _psd_cholesky(0.5 * (comp + comp.T)))
    return NoiseAwarePosterior.from_components(components, model, variant).sample(
        n_draws, random_state=0, unconstrained=True)


def _post_chunk(runs, seeds, spec, variants):
    simulate, model, _ = simulator(spec)
    out = []
    for (r, _), seed in zip(runs, seeds):
        X = simulate(np.random.default_rng(seed))[0] if "oracle" in "".join(variants) else None
        out.append({v: draws(r, model, v, X) for v in variants})
    return out


def post(name, variants):
    with open(os.path.join(CACHE, f"{name}.pkl"), "rb") as f:
        data = pickle.load(f)
    runs, spec, seeds = data["runs"], data["spec"], data["seeds"]
    _, model, _ = simulator(spec)
    out = Parallel(n_jobs=2)(delayed(_post_chunk)(runs[i:i + 25], seeds[i:i + 25], spec,
                                                  variants)
                             for i in range(0, len(runs), 25))
    out = [o for part in out for o in part]
    theta = np.array([t for _, t in runs])
    floor, (lo, hi) = coverage_rmse_floor(len(runs), random_state=0)
    print(f"{name} ({spec}), K = {len(runs)}; calibrated TARP {floor:.3f} ({lo:.3f}-{hi:.3f})")
    for v in variants:
        s = designs.summarise(np.array([o[v] for o in out]), theta, model.n_params)
        print(f"  {v:<9} TARP {s['tarp_posterior'][0]:.3f} ± {s['tarp_posterior'][1]:.3f} / "
              f"{s['tarp_prior'][0]:.3f} ± {s['tarp_prior'][1]:.3f}   radial z "
              f"{s['radial_z'][0]:+.2f} (sd {s['radial_z'][1]:.2f})   z sd "
              f"{min(s['z_sd']):.2f}-{max(s['z_sd']):.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("name")
    r.add_argument("--design", choices=["gaussian", "correlated"], default="gaussian")
    r.add_argument("--d", type=int, default=5)
    r.add_argument("--n", type=int, default=5000)
    r.add_argument("--rho", type=float, default=0.0)
    r.add_argument("--epsilon", type=float, default=1.0)
    r.add_argument("--k", type=int, default=200)
    p = sub.add_parser("post")
    p.add_argument("name")
    p.add_argument("variants", nargs="+")
    args = parser.parse_args()
    if args.command == "run":
        spec = {k: getattr(args, k) for k in ("design", "d", "n", "rho", "epsilon")}
        run(args.name, spec, args.k)
    else:
        post(args.name, args.variants)


if __name__ == "__main__":
    main()
