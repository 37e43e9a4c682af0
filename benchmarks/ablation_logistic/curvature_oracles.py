"""Which part of the logistic dense posterior's curvature fails, found with oracles.

The default logistic posterior (``error_model="dense"``) reads one curvature K off the
released wander (:func:`~skdpvi.noise_aware.window_curvature`) and uses it twice: to
extrapolate the window's mean to the optimum and as the components' covariance
``kappa K^-1``. On uncorrelated Gaussian designs with 10-20 features it is jointly
over-confident (90 % ellipsoids cover 0-1 % of the truths) and its TARP error is
2-3 times the paper's diagonal emcee model's. This script post-processes cached
DP-SGD runs (``cached_runs.py run``; it regenerates each simulation's rows from its
seed for the oracles, which are *not private*) with K taken from:

- ``default``: the estimator's window curvature;
- ``shrunk1``: the wander shrunk fully towards the mean-field diagonal first
  (``error_model="dense_shrunk"``);
- ``oracle``: the true ``kappa (H + I / tau^2)`` at the window's mean (plug-in of the
  variational posterior, 12-node quadrature);
- ``shrunk1+radial``: ``shrunk1`` with its curvature along the means' own direction
  ``u = x_bar / |x_bar|`` replaced by the true ``u^T K u`` (cross terms with u set
  to 0: exact for isotropic Gaussian features, where u is an eigenvector of H);
- ``shrunk1+radial<s>``: the same with ``u^T H u = sum_i sigma'(z_i) z_i^2 / |x_bar|^2``
  (``z_i`` the rows' logits at x_bar) released by a Gaussian mechanism that spends
  the share ``s`` of the run's mu^2: every row adds at most ``max_z sigma'(z) z^2 =
  0.4393`` to the sum whatever its norm, so the noise sd is ``0.4393 / (mu sqrt(s))``
  (mu from the accountant for the cell's epsilon, delta 1e-5), drawn here; a
  measurement of the signal-to-noise such a release would have, *not* a mechanism
  of the package (its accounting is not composed with the run's);
- ``shrunk1+radialhv``: the row and column of u from the true ``K u`` (what a
  released Hessian-vector product would give, noise-free here; it can lose positive
  definiteness, which this oracle does not repair);
- ``matched``: :func:`~skdpvi.noise_aware.matched_curvature` (the estimator's
  ``error_model="dense_matched"``), ``+shrunk<m>`` after shrinking the wander first;
- ``laplace_nonprivate``: the *non-private* Laplace posterior of the same data (not
  private; the Gaussian approximation's own calibration on the same truths);
- a ``+flat`` suffix (correlated design only): K along the design's exactly flat
  direction (every one-hot coefficient up, the intercept down) set to the prior's
  curvature, cross terms 0 (what a user's ``onehot_blocks`` knows).

- ``oraclew``: the true curvature of the ELBO whose logit variances are grown by the
  wander's ``x_i^T S x_i`` (oracle; measured: within 1 % of ``oracle``);
- ``vi_nonprivate``: the *exact* mean-field optimum of the same data (not private,
  prior scale 1 only) with the oracle's covariance: what the estimator aims at.

Every variant then draws the optimum as the estimator does (``x_bar - K^-1 g_bar``,
error ``K^-1 Q K^-1 / n``, the gradient model's N(x_bar, I) prior; ``+noprior``
without it, ``+zprior`` with N(0, tau^2 I) instead) and components
``N(., kappa K^-1)``, then optionally removes the wander's Jensen bias from the
optimum with the width read as follows:

- ``+probit``: the release's ``Cov(g, x)`` (the stationary formula; the estimator's
  ``wander_correction="probit"`` for the diagonal and coupled models, and for the
  dense ones before the twenty-third session);
- ``+kprobit``: through the variant's own curvature, ``tr((K / kappa - I / tau^2) S)``
  (the estimator's dense models since the twenty-third session);
- ``+klprobit``: the same with ``S - D D^T``, ``D = K^-1 g_bar`` (the extrapolation's
  own second-order error; measured: no better than ``+kprobit``), ``+lprobit`` that
  correction on the stationary formula;
- ``+dprobit``, ``+hprobit``: the window's linear trend (halves' difference) taken out
  of the stationary formula, or of it through K; ``+oprobit``, ``+odprobit``: the
  width from the data's own logits and S, without or with that trend (oracles);
  ``+sprobit``: the stationary wander K implies (Lyapunov) instead of S.

Reports TARP (authors' / prior references), radial and per-coordinate z-scores and
90 % ellipsoid coverage.

Run::

    python benchmarks/ablation_logistic/cached_runs.py run --d 20 --n 10000 \\
        --out /tmp/d20.pkl
    python benchmarks/ablation_logistic/curvature_oracles.py /tmp/d20.pkl \\
        --variants default shrunk1 oracle shrunk1+radial shrunk1+radial0.02 \\
        --save curvature_oracles
"""

import argparse
import math
import os
import pickle
import sys
from types import SimpleNamespace

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import designs  # noqa: E402
from _common import save  # noqa: E402
from skdpvi.accounting import noise_multiplier  # noqa: E402
from skdpvi.metrics import coverage_rmse_floor  # noqa: E402
from skdpvi.noise_aware import (logistic_wander_width, mean_field_curvature,  # noqa: E402
                                remove_wander_bias, shrink_wander_covariance,
                                window_curvature)
from skdpvi.noise_aware.coupling import _optimum_of_means  # noqa: E402
from skdpvi.noise_aware.statistics_sampling import _psd_cholesky  # noqa: E402

#: max_z sigma'(z) z^2: one row's largest share of sum_i sigma'(z_i) z_i^2.
RADIAL_SENSITIVITY = 0.4393


def _context(result, model, X, design):
    p, st = model.n_params, result.stats
    kappa = result.sampling_rate
    H, _ = designs.released_hessian(result, model, X, 0, None)
    x_bar = st.shift[:p] + st.sum_x[:p] / st.count
    Xa = np.c_[X, np.ones(len(X))]
    z = Xa @ x_bar
    w = 1 / (1 + np.exp(-z))
    radial_sum = float((w * (1 - w) * z**2).sum())
    # the same with every logit's variance grown by the wander's x_i^T S x_i
    S = st.wander_covariance()[:p, :p]
    s2 = np.logaddexp(0, st.shift[p:] + st.sum_x[p:] / st.count) ** 2
    v_w = (Xa**2) @ s2 + np.einsum("ij,jk,ik->i", Xa, S, Xa)
    nodes, weights = np.polynomial.hermite_e.hermegauss(12)
    prob = 1 / (1 + np.exp(-(z[:, None] + np.sqrt(v_w)[:, None] * nodes)))
    slope_w = (prob * (1 - prob)) @ (weights / weights.sum())
    H_w = (Xa * slope_w[:, None]).T @ Xa
    # the probit width from the data (oracle): sigma'-weighted x_i^T S x_i, with S the
    # window's covariance and with its linear trend taken out
    h1, h2 = st.halves
    dx = (h2.sum_x / h2.count - h1.sum_x / h1.count)[:p]
    prob = 1 / (1 + np.exp(-(z[:, None] + np.sqrt((Xa**2) @ s2)[:, None] * nodes)))
    slope = (prob * (1 - prob)) @ (weights / weights.sum())
    quad = np.einsum("ij,jk,ik->i", Xa, S, Xa)
    quad_d = quad - (Xa @ dx) ** 2 / 3
    oracle_widths = {"oprobit": float(slope @ quad / slope.sum()),
                     "odprobit": float(slope @ quad_d / slope.sum())}
    return SimpleNamespace(
        design=design, p=p, st=st, n=st.count, kappa=kappa, model=model, x_bar=x_bar,
        oracle_widths=oracle_widths, dx=dx,
        true_K_w=kappa * (H_w + np.eye(p) / model.prior_scale**2),
        steps=np.asarray(result.learning_rate, float)[:p],
        noise_var=np.asarray(result.noise_std, float)[:p] ** 2,
        floor=kappa / model.prior_scale**2,
        true_K=kappa * (H + np.eye(p) / model.prior_scale**2), radial_sum=radial_sum)


def _window(c):
    return window_curvature(c.st.wander_covariance()[:c.p, :c.p], c.steps, c.noise_var, c.n,
                            floor=c.floor)[0]


def _shrunk(c):
    S, _ = shrink_wander_covariance(c.st.wander_covariance()[:c.p, :c.p], c.steps,
                                    c.noise_var, c.n,
                                    mean_field_curvature(c.st, c.p, c.kappa), 1.0)
    return window_curvature(S, c.steps, c.noise_var, c.n, floor=c.floor)[0]


def _set_direction(K, v, curvature):
    """K with its curvature along unit v set to ``curvature``, cross terms with v 0."""
    P = np.eye(len(K)) - np.outer(v, v)
    return P @ K @ P + curvature * np.outer(v, v)


def _flat_direction(p):
    from logistic_correlated import N_CATEGORIES, N_GAUSSIAN

    v = np.zeros(p)
    v[N_GAUSSIAN:N_GAUSSIAN + N_CATEGORIES] = 1.0
    v[-1] = -1.0
    return v / np.linalg.norm(v)


def curvature(c, variant, mu, rng):
    """K of one variant (see the module docstring); ``mu`` the run's Gaussian-DP mu."""
    parts = variant.split("+")
    if "flat" in parts and c.design != "correlated":
        raise ValueError("+flat knows only the correlated design's flat direction.")
    if parts[0] == "matched":
        from skdpvi.noise_aware import matched_curvature

        flat = [_flat_direction(c.p)] if "flat" in parts else None
        diag = mean_field_curvature(c.st, c.p, c.kappa)
        S = c.st.wander_covariance()[:c.p, :c.p]
        shrink = [part for part in parts if part.startswith("shrunk")]
        if shrink:  # the wander shrunk towards the diagonal's target first
            S, _ = shrink_wander_covariance(S, c.steps, c.noise_var, c.n, diag,
                                            float(shrink[0][6:] or 2.0))
        if "win" in parts:  # the covariance the window curvature stands for
            half_q = float(np.exp(np.mean(np.log(c.steps * c.noise_var)))) / 2
            S = half_q * np.linalg.inv(_window(c))
        K, _ = matched_curvature(S, c.steps, c.noise_var, diag, floor=c.floor,
                                 flat_directions=flat)
        return 0.5 * (K + K.T)
    base = {"default": _window, "shrunk1": _shrunk, "oracle": lambda c: c.true_K,
            "oraclew": lambda c: c.true_K_w}[parts[0]]
    K = base(c)
    if "flat" in parts:
        K = _set_direction(K, _flat_direction(c.p), c.floor)
    if "radialhv" in parts:  # the true H u: the row and column of u, cross terms included
        u = c.x_bar / np.linalg.norm(c.x_bar)
        P = np.eye(c.p) - np.outer(u, u)
        k_u = c.true_K @ u
        cross = P @ k_u
        K = ((u @ k_u) * np.outer(u, u) + np.outer(u, cross) + np.outer(cross, u)
             + P @ K @ P)
        return 0.5 * (K + K.T)
    radial = [part for part in parts if part.startswith("radial")]
    if radial:
        u = c.x_bar / np.linalg.norm(c.x_bar)
        if radial[0] == "radial":
            k_u = u @ c.true_K @ u
        else:
            share = float(radial[0][6:])
            noisy = c.radial_sum + rng.normal(0.0, RADIAL_SENSITIVITY / (mu * math.sqrt(share)))
            k_u = c.kappa * max(noisy, 0.0) / (c.x_bar @ c.x_bar) + c.floor
        K = _set_direction(K, u, k_u)
    return 0.5 * (K + K.T)


def detrended_wander_width(stats, n_means, sampling_rate, prior_scale):
    """``logistic_wander_width`` with the window's linear trend taken out of the
    covariance of the gradients with the means: a trace still relaxing moves
    through the window, and that drift is no wander (it has no Jensen bias). With
    the halves' means ``x_1, x_2`` and ``g_1, g_2``, a linear trend contributes
    ``(g_2 - g_1)(x_2 - x_1) / 3`` to ``Cov(g_j, x_j)`` and ``(x_2 - x_1)^2 / 3`` to
    ``Var(x_j)``."""
    import copy

    p = int(n_means)
    h1, h2 = stats.halves
    dx = h2.sum_x / h2.count - h1.sum_x / h1.count
    dg = h2.sum_g / h2.count - h1.sum_g / h1.count
    st = copy.copy(stats)
    n = stats.count
    st.sum_gx = stats.sum_gx - n * dg * dx / 3
    st.sum_xx = stats.sum_xx - n * dx * dx / 3
    return logistic_wander_width(st, n_means=p, sampling_rate=sampling_rate,
                                 prior_scale=prior_scale)


def probit_width(c, K, K_inv, probit):
    """The probit correction's width ``w`` for one of the module docstring's readings."""
    if probit in ("oprobit", "odprobit"):  # from the data's own logits (oracle)
        return c.oracle_widths[probit]
    if probit == "kprobit":  # the estimator's dense models since the twenty-third session
        return logistic_wander_width(c.st, n_means=c.p, sampling_rate=c.kappa,
                                     prior_scale=c.model.prior_scale, curvature=K)
    if probit == "detrended":
        return detrended_wander_width(c.st, c.p, c.kappa, c.model.prior_scale)
    stationary = logistic_wander_width(c.st, n_means=c.p, sampling_rate=c.kappa,
                                       prior_scale=c.model.prior_scale)
    if probit is True:
        return stationary
    rho = c.st.shift[c.p:] + c.st.sum_x[c.p:] / c.st.count
    tau2 = c.model.prior_scale**2
    h00 = 1.0 / np.logaddexp(0.0, rho[-1]) ** 2 - 1.0 / tau2
    if h00 <= 0:
        return 0.0
    H_lik = K / c.kappa - np.eye(c.p) / tau2
    lag = K_inv @ (c.st.sum_g[:c.p] / c.st.count)  # D: the window mean's distance
    S = c.st.wander_covariance()[:c.p, :c.p]
    if probit == "sprobit":  # the stationary wander K implies: L K S + S K L = L N L
        from scipy.linalg import solve_continuous_lyapunov

        L = np.diag(c.steps)
        S = solve_continuous_lyapunov(L @ K, L @ np.diag(c.noise_var) @ L)
        trace = float(np.sum(H_lik * S))
    elif probit == "klprobit":  # through K, with S - D D^T
        trace = float(np.sum(H_lik * (S - np.outer(lag, lag))))
    elif probit == "lprobit":  # the stationary reading less D^T H D
        trace = stationary * h00 - float(lag @ H_lik @ lag)
    elif probit == "hprobit":  # the stationary reading less the halves' linear trend
        trace = stationary * h00 - float(c.dx @ H_lik @ c.dx) / 3
    else:
        raise ValueError(f"unknown probit reading {probit!r}")
    return max(trace / h00, 0.0)


def draws(c, K, probit, n_draws, rng, prior_sd=1.0):
    """The estimator's dense posterior at curvature K: optimum draws + components."""
    lam, U = np.linalg.eigh(K)
    K_inv = (U / lam) @ U.T
    if prior_sd == "zero":  # the model's prior N(0, tau^2 I) instead of N(x_bar, I)
        x_bar = c.st.shift[:c.p] + c.st.sum_x[:c.p] / c.st.count
        estimate = x_bar - K_inv @ (c.st.sum_g[:c.p] / c.st.count)
        error = K_inv @ (c.noise_var[:, None] * K_inv) / c.st.count
        error = 0.5 * (error + error.T)
        gain = error @ np.linalg.inv(error + c.model.prior_scale**2 * np.eye(c.p))
        mean, cov = estimate - gain @ estimate, error - gain @ error
        cov = 0.5 * (cov + cov.T)
    else:
        mean, cov = _optimum_of_means(c.st, K_inv, c.noise_var, prior_sd)
    optimum = mean + rng.standard_normal((n_draws, c.p)) @ _psd_cholesky(cov).T
    component_cov = c.kappa * K_inv
    if probit:
        optimum = remove_wander_bias(optimum, probit_width(c, K, K_inv, probit),
                                     prior_scale=c.model.prior_scale, covariance=component_cov)
    return optimum + rng.standard_normal((n_draws, c.p)) @ _psd_cholesky(component_cov).T


def nonprivate_draws(X, y, prior_scale, n_draws, rng):
    """Draws of the *non-private* Laplace posterior (Gaussian at the MAP, covariance
    the inverse Hessian there): the Gaussian approximation's own calibration on the
    same data and truths, the yardstick of everything else in the table."""
    Xa = np.c_[X, np.ones(len(X))]
    p = Xa.shape[1]
    theta = np.zeros(p)
    for _ in range(100):  # Newton for the MAP
        prob = 1 / (1 + np.exp(-(Xa @ theta)))
        grad = Xa.T @ (y - prob) - theta / prior_scale**2
        H = (Xa * (prob * (1 - prob))[:, None]).T @ Xa + np.eye(p) / prior_scale**2
        step = np.linalg.solve(H, grad)
        theta = theta + step
        if np.max(np.abs(step)) < 1e-10:
            break
    return theta + rng.standard_normal((n_draws, p)) @ np.linalg.cholesky(np.linalg.inv(H)).T


def evaluate(path, variants, n_draws=1000):
    with open(path, "rb") as f:
        cell = pickle.load(f)
    args = SimpleNamespace(**cell["args"])
    simulate, model, _ = designs.design_of(args)
    runs, theta = cell["runs"], cell["theta"]
    mu = 1.0 / noise_multiplier(args.epsilon, 1e-5, 1.0, 1)[0]
    out = {v: [] for v in variants}
    for i, result in enumerate(runs):
        X, _, truth = simulate(np.random.default_rng(args.seed + i))
        assert np.allclose(truth, theta[i]), "the pickle's seeds do not regenerate its data"
        c = _context(result, model, X, args.design)
        for v in variants:
            rng = np.random.default_rng([i, len(v)])
            if v == "vi_nonprivate":  # the exact mean-field optimum, oracle covariance
                from fixed_point import map_and_vi

                assert model.prior_scale == 1.0
                y = simulate(np.random.default_rng(args.seed + i))[1]
                centre = map_and_vi(X, y)[1]
                cov = c.kappa * np.linalg.inv(c.true_K)
                out[v].append(centre + rng.standard_normal((n_draws, c.p))
                              @ np.linalg.cholesky(cov).T)
                continue
            if v == "laplace_nonprivate":
                y = simulate(np.random.default_rng(args.seed + i))[1]
                out[v].append(nonprivate_draws(X, y, model.prior_scale, n_draws, rng))
                continue
            prior_sd = 1.0
            base_v = v
            if "+noprior" in v:  # no N(x_bar, I) prior on the optimum
                prior_sd, base_v = 1e3, v.replace("+noprior", "")
            if "+zprior" in v:  # N(0, tau^2 I) instead
                prior_sd, base_v = "zero", v.replace("+zprior", "")
            base, _, last = base_v.rpartition("+")
            if last not in ("probit", "dprobit", "oprobit", "odprobit", "hprobit", "sprobit", "lprobit", "kprobit", "klprobit"):
                base, last = base_v, ""
            K = curvature(c, base, mu, rng)
            probit = {"dprobit": "detrended", "probit": True}.get(last, last)
            out[v].append(draws(c, K, probit, n_draws, rng, prior_sd))
    k = len(theta)
    floor, (lo, hi) = coverage_rmse_floor(k, random_state=0)
    print(f"{path} ({args.design}, d {args.d}, N {args.n}, epsilon {args.epsilon}, "
          f"prior scale {args.prior_scale}); calibrated TARP at K = {k}: {floor:.3f} "
          f"({lo:.3f}-{hi:.3f})")
    summary = {"cell": cell["args"], "floor": [floor, float(lo), float(hi)], "variants": {}}
    for v in variants:
        s = designs.summarise(np.array(out[v]), theta, model.n_params, model.prior_scale)
        summary["variants"][v] = s
        print(f"  {v:<26} {designs.describe(s)}", flush=True)
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="pickles of cached_runs.py run")
    parser.add_argument("--variants", nargs="+",
                        default=["default", "shrunk1", "oracle", "shrunk1+radial",
                                 "shrunk1+radial0.02"])
    parser.add_argument("--save", default=None,
                        help="prefix of JSONs in benchmarks/results (one per pickle)")
    args = parser.parse_args()
    for path in args.files:
        summary = evaluate(path, args.variants)
        if args.save:
            save(f"{args.save}_{os.path.splitext(os.path.basename(path))[0]}", summary)


if __name__ == "__main__":
    main()
