"""UCI Adult: the "dense" fits' curvature against the data's (thirtieth session).

One default ``DPBayesianLogisticRegression`` fit on the bundled training split (no
``onehot_blocks``, as the issue's Adult targets are measured), then its release
post-processed again with the window curvature K of the ``"dense"`` model replaced:

- ``full``: by the data's curvature ``kappa (A' W A + I / tau^2)`` at the window's mean
  (W the rows' logistic weights; an oracle, it reads the rows);
- ``rank1``: along ``u = x_bar / |x_bar|`` only, ``K + (u' H u - u' K u) u u'``;
- ``replace``: along u with u's cross terms set to 0 (the twenty-ninth session's
  radial oracle).

Prints the test calibration RMSE (10 quantile bins) of each, the generalised
eigenvalues of K against the data's curvature, ``u' K u / u' H u`` and the median
ratio of the test rows' logit variance under ``K^-1`` and ``H^-1``.

Run: python benchmarks/ablation_logistic/adult_curvature.py [--epsilon 0.3] [--seed 0]
"""

import argparse
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import release_cache as rc  # noqa: E402


def main():
    import torch

    from skdpvi import DPBayesianLogisticRegression
    from skdpvi.datasets import load_adult
    from skdpvi.metrics import calibration_rmse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    X, y = load_adult(subset="train", return_X_y=True)
    Xt, yt = load_adult(subset="test", return_X_y=True)
    est = DPBayesianLogisticRegression(epsilon=args.epsilon, random_state=args.seed).fit(X, y)
    out = {"error_model": est.error_model_,
           "default": calibration_rmse(yt, est.predict_proba(Xt)[:, 1])}
    lr, dense = rc._linear_response(), rc._dense()
    window_curvature, posterior = lr.window_curvature, dense.linear_response_posterior
    A = np.c_[np.asarray(X, float), np.ones(len(X))]
    state = {"form": None}

    def capture(stats, **kw):
        p = kw["n_means"]
        state.update(x_bar=stats.shift[:p] + stats.sum_x[:p] / stats.count,
                     kappa=kw["sampling_rate"])
        return posterior(stats, **kw)

    def curvature(covariance, steps, noise_var, n_steps, floor=0.0):
        K, n_relax = window_curvature(covariance, steps, noise_var, n_steps, floor)
        x_bar = state["x_bar"]
        z = A @ x_bar
        H = state["kappa"] * ((A * (0.25 / np.cosh(0.5 * z) ** 2)[:, None]).T @ A
                              + np.eye(A.shape[1]) / float(est.prior_scale) ** 2)
        u = x_bar / np.linalg.norm(x_bar)
        state.update(K=K, H=H, u=u)
        if state["form"] == "full":
            return H, n_relax
        if state["form"] == "rank1":
            return K + (u @ H @ u - u @ K @ u) * np.outer(u, u), n_relax
        if state["form"] == "replace":
            P = np.eye(len(K)) - np.outer(u, u)
            return P @ K @ P + (u @ H @ u) * np.outer(u, u), n_relax
        return K, n_relax

    refit = rc.refitter(est, X, y)
    for form in ("none", "full", "rank1", "replace"):
        state["form"] = form
        with rc._patched((lr, "window_curvature", curvature),
                         (dense, "linear_response_posterior", capture)):
            refit(est.dpvi_result_)
        out[form] = calibration_rmse(yt, est.predict_proba(Xt)[:, 1])
    K, H, u = state["K"], state["H"], state["u"]
    ratios = np.sort(np.linalg.eigvals(np.linalg.solve(H, K)).real)
    At = np.c_[np.asarray(Xt, float), np.ones(len(Xt))]
    var_k = np.einsum("ij,jk,ik->i", At, np.linalg.inv(K), At)
    var_h = np.einsum("ij,jk,ik->i", At, np.linalg.inv(H), At)
    print(f"epsilon {args.epsilon}, seed {args.seed}, error model {out['error_model']}")
    print("calibration RMSE: " + ", ".join(f"{k} {out[k]:.4f}"
                                           for k in ("default", "full", "rank1", "replace")))
    print(f"eigenvalues of H^-1 K: min {ratios[0]:.3g}, median {np.median(ratios):.3g}, "
          f"max {ratios[-1]:.3g}; u'Ku / u'Hu {(u @ K @ u) / (u @ H @ u):.3g}; test logit "
          f"variance under K^-1 / H^-1 (median) {np.median(var_k / var_h):.3g}")


if __name__ == "__main__":
    main()
