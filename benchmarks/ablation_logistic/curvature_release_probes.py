"""Where else the release could tell the curvature: two probes against the data's own.

Both compare a curvature with the data's, ``kappa (X~' W X~ + I / tau^2)`` (W the
logistic weights, an oracle no release holds), on simulations of
``release_cache.py``'s cells, each fitted by the default estimator:

- ``gradient-covariance``: the released gradients' covariance over the recording
  window minus the DP noise's known variance. By the information identity the
  Poisson sum's covariance is ``kappa (1 - kappa) X~' W X~`` for the means, and a
  window has thousands of independent gradient draws where the wander has a few
  dozen relaxations, so this would be a curvature with far more looks, if the
  sampling variance were visible beside the DP noise. Reports the generalised
  eigenvalues of both curvatures against the data's (medians by rank) and the
  ratio of the sampling variance to the DP noise's.
- ``shrunk``: the stated variance of one error model (``--error-model``,
  "dense_shrunk" by default) split into its parts, each over the data's:
  the curvature's diagonal, the optimum's error ``K^-1 Q K^-1 / n`` against
  ``K_o^-1 Q K_o^-1 / n``, the components' ``kappa K^-1`` against ``H^-1``, and
  where the posterior's softest direction lies (its alignment with the coefficient
  vector).

Run::

    python benchmarks/ablation_logistic/curvature_release_probes.py \
        gradient-covariance gauss rho07d10 --n-sim 12
    python benchmarks/ablation_logistic/curvature_release_probes.py \
        shrunk gauss rho07d10 --n-sim 40
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import machine, save  # noqa: E402
from release_cache import CELLS, _rule_cell, estimator, simulate  # noqa: E402
import skdpvi.linear_model._logistic_dense as dense  # noqa: E402
from skdpvi.dpvi import run_dpvi  # noqa: E402


class Captured:
    """``linear_response_posterior``'s info of the last fit in this process."""

    info = {}

    @classmethod
    def install(cls):
        original = dense.linear_response_posterior

        def spy(stats, **kw):
            components, info = original(stats, **kw)
            cls.info = dict(info, stats=stats, kw=kw)
            return components, info

        dense.linear_response_posterior = spy


def data_curvature(X, point, kappa, prior_scale):
    """``kappa (X~' W X~ + I / tau^2)`` at ``point`` (coefficients, intercept last)."""
    Xt = np.c_[X, np.ones(len(X))]
    prob = 1 / (1 + np.exp(-(Xt @ point)))
    w = prob * (1 - prob)
    return kappa * (Xt.T @ (Xt * w[:, None]) + np.eye(Xt.shape[1]) / prior_scale**2)


def relative_eigenvalues(K, reference):
    """Generalised eigenvalues of K against ``reference`` (1: equal), ascending."""
    inv_root = np.linalg.inv(np.linalg.cholesky(reference))
    return np.sort(np.linalg.eigvalsh(inv_root @ K @ inv_root.T))


def gradient_covariance(cell, seed):
    theta, X, y = simulate(_rule_cell(cell), 2000 + seed)
    est = estimator(cell, random_state=seed)
    X, y01 = est._fit_inputs(X, y)
    seeds = est._fit_seeds()
    settings = est._engine_settings(X.shape[0], X.shape[1], X, seeds.engine)
    engine = dict(settings.engine, record_trace=True)
    result = run_dpvi(data=(X, y01), random_state=seeds.engine, **engine)
    p, kappa = engine["model"].n_params, engine["sampling_rate"]
    grads = result.trace_grad[result.burn_in:, :p]
    noise_var = result.noise_std[:p] ** 2
    sampling = np.cov(grads.T) - np.diag(noise_var)
    from_gradients = sampling / (1 - kappa) + kappa * np.eye(p) / est.prior_scale**2
    est._fit_from_result(result, settings, X.shape[0], seeds)  # the default's reading
    window_mean = result.stats.sum_x[:p] / result.stats.count + result.stats.shift[:p]
    reference = data_curvature(X, window_mean, kappa, est.prior_scale)
    return {"gradients": relative_eigenvalues(from_gradients, reference).tolist(),
            "wander": relative_eigenvalues(Captured.info["curvature"], reference).tolist(),
            "sampling_over_noise": float(np.median(np.diag(sampling)) / np.median(noise_var)),
            "error_model": est.error_model_}


def shrunk(cell, seed, error_model):
    theta, X, y = simulate(_rule_cell(cell), 1000 + seed)
    est = estimator(cell, error_model=error_model, random_state=seed).fit(X, y)
    info, kw = Captured.info, Captured.info["kw"]
    p, kappa, n = kw["n_means"], kw["sampling_rate"], info["stats"].count
    Ko = data_curvature(X, theta, kappa, est.prior_scale)
    Ko_inv = np.linalg.inv(Ko)
    noise_var = np.asarray(kw["noise_std"], float)[:p] ** 2
    error_o = Ko_inv @ np.diag(noise_var) @ Ko_inv / n
    component_o = kappa * Ko_inv
    K = info["curvature"]
    draws = est.sample_posterior(4000, random_state=0)
    g, G = np.linalg.eigh(np.linalg.inv(np.linalg.cholesky(Ko)) @ K
                          @ np.linalg.inv(np.linalg.cholesky(Ko)).T)
    softest = np.linalg.solve(np.linalg.cholesky(Ko).T, G[:, 0])
    u = theta / np.linalg.norm(theta)
    return {"curvature_diagonal": (np.diag(K) / np.diag(Ko)).tolist(),
            "optimum_error": (np.diag(info["covariance"]) / np.diag(error_o)).tolist(),
            "components": (np.diag(info["component_covariance"])
                           / np.diag(component_o)).tolist(),
            "stated_total": (draws.var(0) / (np.diag(error_o) + np.diag(component_o))).tolist(),
            "z": ((draws.mean(0) - theta) / draws.std(0)).tolist(),
            "z_with_data_variance": ((draws.mean(0) - theta)
                                     / np.sqrt(np.diag(error_o) + np.diag(component_o))).tolist(),
            "relative_eigenvalues": np.sort(g).tolist(),
            "softest_alignment_with_coefficients": float(abs(softest @ u)
                                                         / np.linalg.norm(softest)),
            "coefficient_direction_curvature": float((u @ K @ u) / (u @ Ko @ u)),
            "n_kept": info.get("n_kept"), "intensity": info.get("intensity")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe", choices=["gradient-covariance", "shrunk"])
    parser.add_argument("cells", nargs="+", choices=sorted(CELLS))
    parser.add_argument("--n-sim", type=int, default=12)
    parser.add_argument("--error-model", default="dense_shrunk")
    args = parser.parse_args()
    Captured.install()
    for cell in args.cells:
        rows = []
        for seed in range(args.n_sim):
            rows.append(gradient_covariance(cell, seed) if args.probe == "gradient-covariance"
                        else shrunk(cell, seed, args.error_model))

        def median(key):
            return np.round(np.median(np.array([r[key] for r in rows]), 0), 2)

        print(f"{cell} ({args.n_sim} simulations)")
        if args.probe == "gradient-covariance":
            print("  gradients' covariance K / data K, by rank:", median("gradients"))
            print("  the default's wander K / data K, by rank:  ", median("wander"))
            print("  sampling variance / DP noise variance:    ",
                  np.median([r["sampling_over_noise"] for r in rows]))
        else:
            for key in ("curvature_diagonal", "optimum_error", "components", "stated_total",
                        "relative_eigenvalues"):
                print(f"  {key} / data's:", median(key))
            z = np.array([r["z"] for r in rows])
            zo = np.array([r["z_with_data_variance"] for r in rows])
            print("  z sd:", np.round(z.std(0), 2))
            print("  z sd with the data's variance:", np.round(zo.std(0), 2))
            print("  softest direction's alignment with the coefficients (median):",
                  np.median([r["softest_alignment_with_coefficients"] for r in rows]),
                  "; the coefficient direction's curvature / data's:",
                  np.median([r["coefficient_direction_curvature"] for r in rows]),
                  "; directions kept:", np.median([r["n_kept"] or 0 for r in rows]))
        tag = args.error_model if args.probe == "shrunk" else ""
        save(f"ablation_logistic_curvature_release_probes_{args.probe}_{cell}{tag and '_' + tag}",
             {"machine": machine(), "cell": cell, "design": CELLS[cell], "n_sim": args.n_sim,
              "rows": rows})


if __name__ == "__main__":
    main()
