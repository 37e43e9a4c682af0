"""Where the logistic posterior's radial bias comes from, on cached DP-SGD runs.

Three measurements on the pickles of ``cached_runs.py run`` (each simulation's rows
regenerated from its seed: these are *oracles*, not private), in posterior standard
deviations along the exact mean-field optimum's direction u = mu* / |mu*|:

- ``decompose``: the window's mean ``x_bar``, the extrapolated optimum
  ``x_bar - K^-1 g_bar`` at the true curvature K, the shift the stationary probit
  correction removes (``logistic_wander_width`` from the release's ``Cov(g, x)``),
  the MAP and the truth, each minus the exact mean-field optimum mu* (computed
  without privacy, 40-node Gauss-Hermite; prior scale 1 only);
- ``width``: the release's ``sum_j Cov(g_j, x_j) / kappa - tr(S) / tau^2`` against
  ``tr(H S)`` from the data (S the window's covariance of the means), the
  intercept's curvature from its variational scale against the data's, and the
  median over coordinates of ``Cov(g_j, x_j)`` over ``(K S)_jj``;
- ``exact``: the exact shift of the optimum under the wander (the fixed point of the
  ELBO whose logit variances are grown by ``x_i^T S x_i``, scales fixed) against the
  probit formula's at the same S;
- ``path`` (no pickle): a noise-free check of the extrapolation on a window that still
  relaxes. Four-parameter logistic data; an exact Gaussian wander S_w (30 posterior
  covariances) around a mean that relaxes from 0.6 of the wander's fixed point over
  two relaxation times of its slowest direction; the window's mean gradient is the
  exact average of the widened ELBO's gradient along that path, S the wander plus the
  path's own covariance. The extrapolation through the true curvature at the
  window's mean, corrected with the width of S, or of ``S - D D^T`` (``D = K^-1
  g_bar``), or not at all, minus the optimum, in posterior sds.

Results page, "The Jensen width read through the curvature".

Run: python benchmarks/ablation_logistic/jensen_diagnostics.py decompose /tmp/d20.pkl --n-sim 40
"""

import argparse
import os
import pickle
import sys
from types import SimpleNamespace

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import designs  # noqa: E402
from fixed_point import map_and_vi  # noqa: E402
from skdpvi.noise_aware import logistic_wander_width  # noqa: E402

NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(30)
WEIGHTS = WEIGHTS / WEIGHTS.sum()


def _cell(path):
    with open(path, "rb") as f:
        cell = pickle.load(f)
    args = SimpleNamespace(**cell["args"])
    simulate, model, _ = designs.design_of(args)
    return cell, args, simulate, model


def _window(result, p):
    st = result.stats
    x_bar = st.shift[:p] + st.sum_x[:p] / st.count
    s2 = np.logaddexp(0, st.shift[p:] + st.sum_x[p:] / st.count) ** 2
    return st, x_bar, s2, st.wander_covariance()[:p, :p]


def _slopes(Xa, mu, var):
    prob = expit((Xa @ mu)[:, None] + np.sqrt(var)[:, None] * NODES)
    return (prob * (1 - prob)) @ WEIGHTS


def decompose(path, n_sim):
    cell, args, simulate, model = _cell(path)
    assert model.prior_scale == 1.0, "the exact optimum is computed for prior scale 1"
    p, rows = model.n_params, []
    for i, result in enumerate(cell["runs"][:n_sim]):
        X, y, truth = simulate(np.random.default_rng(args.seed + i))
        st, x_bar, _, _ = _window(result, p)
        kappa = result.sampling_rate
        H, _ = designs.released_hessian(result, model, X, 0, None)
        K = kappa * (H + np.eye(p))
        centre = x_bar - np.linalg.solve(K, st.sum_g[:p] / st.count)
        t_map, mu_vi = map_and_vi(X, y)
        u = mu_vi / np.linalg.norm(mu_vi)
        sd = np.sqrt(u @ np.linalg.solve(H + np.eye(p), u))
        w = logistic_wander_width(st, n_means=p, sampling_rate=kappa)
        shift = np.pi / 16 * w * (centre - kappa * np.linalg.solve(K, centre))
        rows.append([(v @ u) / sd for v in (x_bar - mu_vi, centre - mu_vi, shift,
                                             t_map - mu_vi, truth - mu_vi)])
    rows = np.array(rows)
    names = ["x_bar", "extrapolated", "stationary probit shift", "MAP", "truth"]
    print(f"{path}: {len(rows)} simulations; minus mu*, along u, in posterior sds")
    for name, col in zip(names, rows.T):
        print(f"  {name:<24} mean {col.mean():+.2f}  median {np.median(col):+.2f}  "
              f"sd {col.std():.2f}")


def width(path, n_sim):
    cell, args, simulate, model = _cell(path)
    p, tau2, rows = model.n_params, model.prior_scale**2, []
    for i, result in enumerate(cell["runs"][:n_sim]):
        X, _, _ = simulate(np.random.default_rng(args.seed + i))
        st, x_bar, s2, S = _window(result, p)
        kappa, n = result.sampling_rate, st.count
        Xa = np.c_[X, np.ones(len(X))]
        slope = _slopes(Xa, x_bar, (Xa**2) @ s2)
        H = (Xa * slope[:, None]).T @ Xa
        mean_x = st.sum_x[:p] / n
        cov_gx = st.sum_gx[:p] / n - (st.sum_g[:p] / n) * mean_x
        var_x = st.sum_xx[:p] / n - mean_x**2
        rho0 = st.shift[2 * p - 1] + st.sum_x[2 * p - 1] / n
        h00 = 1 / np.logaddexp(0, rho0) ** 2 - 1 / tau2
        KS = (H + np.eye(p) / tau2) @ S
        rows.append([(cov_gx.sum() / kappa - var_x.sum() / tau2) / np.trace(H @ S),
                     h00 / slope.sum(), np.median(cov_gx / kappa / np.diag(KS))])
    med = np.median(np.array(rows), 0)
    print(f"{path}: medians over {len(rows)} simulations: release's tr(H S) / data's "
          f"{med[0]:.2f}; intercept curvature release / data {med[1]:.2f}; "
          f"Cov(g_j, x_j) / (K S)_jj {med[2]:.2f}")


def _optimum(Xa, y, var, tau2, start):
    sd = np.sqrt(var)[:, None]

    def f(mu):
        z = (Xa @ mu)[:, None] + sd * NODES
        ll = (y[:, None] * log_expit(z) + (1 - y[:, None]) * log_expit(-z)) @ WEIGHTS
        grad = ((y[:, None] - expit(z)) @ WEIGHTS) @ Xa
        return -(ll.sum() - 0.5 * mu @ mu / tau2), -(grad - mu / tau2)

    return minimize(f, start, jac=True, method="L-BFGS-B",
                    options=dict(gtol=1e-10, ftol=1e-15, maxiter=5000)).x


def exact(path, n_sim):
    cell, args, simulate, model = _cell(path)
    p, tau2, rows = model.n_params, model.prior_scale**2, []
    for i, result in enumerate(cell["runs"][:n_sim]):
        X, y, _ = simulate(np.random.default_rng(args.seed + i))
        _, x_bar, s2, S = _window(result, p)
        Xa = np.c_[X, np.ones(len(X))]
        v, w_i = (Xa**2) @ s2, np.einsum("ij,jk,ik->i", Xa, S, Xa)
        m0, mw = _optimum(Xa, y, v, tau2, x_bar), _optimum(Xa, y, v + w_i, tau2, x_bar)
        slope = _slopes(Xa, m0, v)
        H = (Xa * slope[:, None]).T @ Xa + np.eye(p) / tau2
        u = m0 / np.linalg.norm(m0)
        sd = np.sqrt(u @ np.linalg.solve(H, u))
        probit = np.pi / 16 * (slope @ w_i / slope.sum()) * (m0 - np.linalg.solve(H, m0) / tau2)
        rows.append([(mw - m0) @ u / sd, probit @ u / sd])
    rows = np.array(rows)
    print(f"{path}: {len(rows)} simulations; along u in posterior sds: exact shift "
          f"{np.median(rows[:, 0]):.2f}, probit formula {np.median(rows[:, 1]):.2f}, "
          f"ratio {np.median(rows[:, 0] / rows[:, 1]):.2f} (medians)")


def path(seeds=(0, 1, 2)):
    from scipy.linalg import expm

    from skdpvi.noise_aware import remove_wander_bias

    tau2, kappa = 1.0, 0.1
    for seed in seeds:
        rng = np.random.default_rng(seed)
        Xa = np.column_stack([rng.standard_normal((4000, 3)), np.ones(4000)])
        p = Xa.shape[1]
        y = (rng.random(4000) < expit(Xa @ np.array([1.0, -0.7, 0.4, 0.3]))).astype(float)
        v = (Xa**2) @ np.full(p, 0.03**2)  # q's logit variances (scales 0.03)

        def curvature(mu, var):
            slope = _slopes(Xa, mu, var)
            return (Xa * slope[:, None]).T @ Xa + np.eye(p) / tau2

        def gradient(mu, var):  # of the negative ELBO's mean part
            prob = expit((Xa @ mu)[:, None] + np.sqrt(var)[:, None] * NODES)
            return -((y[:, None] - prob) @ WEIGHTS) @ Xa + mu / tau2

        mu_star = _optimum(Xa, y, v, tau2, np.zeros(p))
        H = curvature(mu_star, v)
        S_w = 30.0 * np.linalg.inv(H)
        w_i = np.einsum("ij,jk,ik->i", Xa, S_w, Xa)
        mu_w = _optimum(Xa, y, v + w_i, tau2, mu_star)
        A = curvature(mu_w, v + w_i)
        times = np.linspace(0.0, 2.0 / np.linalg.eigvalsh(A)[0], 400)
        trail = np.array([mu_w + expm(-A * t) @ (0.6 * mu_w - mu_w) for t in times])
        g_bar = kappa * np.mean([gradient(m, v + w_i) for m in trail], axis=0)
        x_bar = trail.mean(0)
        S = S_w + np.cov(trail.T, bias=True)
        K = kappa * curvature(x_bar, v)
        centre = x_bar - np.linalg.solve(K, g_bar)
        lag = np.linalg.solve(K, g_bar)
        s0 = 1 / np.sqrt(H[-1, -1])
        h00 = 1 / s0**2 - 1 / tau2
        H_lik = K / kappa - np.eye(p) / tau2
        sd = np.sqrt(np.diag(np.linalg.inv(H)))
        out = []
        for cov in (None, S, S - np.outer(lag, lag)):
            width = 0.0 if cov is None else max(np.sum(H_lik * cov) / h00, 0.0)
            corrected = remove_wander_bias(centre[None], width, prior_scale=1.0,
                                           covariance=kappa * np.linalg.inv(K))[0]
            out.append(np.abs((corrected - mu_star) / sd).max())
        print(f"seed {seed}: window mean {np.abs((x_bar - mu_star) / sd).max():.2f} sds "
              f"behind; largest error of the corrected extrapolation: none {out[0]:.2f}, "
              f"width of S {out[1]:.2f}, of S - D D^T {out[2]:.2f} posterior sds")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["decompose", "width", "exact", "path"])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--n-sim", type=int, default=30)
    args = parser.parse_args()
    if args.what == "path":
        return path()
    for name in args.files:
        {"decompose": decompose, "width": width, "exact": exact}[args.what](name, args.n_sim)


if __name__ == "__main__":
    main()
