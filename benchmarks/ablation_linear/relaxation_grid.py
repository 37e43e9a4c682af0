"""Over-confidence of the linear default against the means' relaxation count, on a grid.

For d features, N rows and epsilon on a grid (``make_nig``-style data as in
``feedback_bias.py``), K fits of the default ``DPBayesianLinearRegression`` each, and
per fit:

- the coefficient z-scores' root mean square (1 is calibrated, above 1 too narrow);
- the means' relaxation count in the recording window, true
  (``n_window * lr_j * kappa * (X^T X)_jj / sigma^2``) and as the release estimates
  it (the posterior mean of the diagonal of X^T X, ``inference_diagnostics_["eta_mean"]``,
  and of 1 / sigma^2), median over the features;
- the same count as the scale rows alone read it (the package's check,
  ``skdpvi.linear_model._release_checks.scale_row_relaxations``; the fit warns below 25);
- whether the fit warned (IdentifiabilityWarning / ConvergenceWarning).

Writes ``results/relaxation_grid.json`` (``--out``). Results: doc/results.rst, "Small
data at small epsilon". Run from ``benchmarks/``:
python ablation_linear/relaxation_grid.py --k 6
python ablation_linear/relaxation_grid.py --rho 0.5 --ds 10 --ns 300 500 1000 2000 \
    --epsilons 0.3 --out results/relaxation_grid_scale_rows_rho0.5.json
"""

import argparse
import itertools
import json
import os
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from skdpvi import DPBayesianLinearRegression  # noqa: E402
from skdpvi.dpvi import run_dpvi  # noqa: E402
from skdpvi.linear_model._release_checks import scale_row_relaxations  # noqa: E402
from skdpvi.models.statistics import vech_indices  # noqa: E402
from feedback_bias import simulate  # noqa: E402


def release_relaxations(est, result, inv_var):
    """Per feature, ``n_window lambda_j kappa (X^T X)_jj E[1 / sigma^2]`` with the
    diagonal as the release reads it (the posterior mean of eta; NaN without one), and
    the steps ``n_window lambda_j kappa`` themselves."""
    d = est.n_features_in_
    step = (result.n_steps - result.burn_in) * result.learning_rate[:d] * result.sampling_rate
    rows, cols = vech_indices(d + 1)
    diagonal = np.flatnonzero(rows == cols)[:d]
    eta = est.inference_diagnostics_.get("eta_mean")
    return (step * eta[diagonal] * inv_var if eta is not None else np.full(d, np.nan)), step


def design(seed, d, n, rho=0.0, noise=1.0):
    """``feedback_bias.simulate``'s data, with equicorrelated features (``rho``) and the
    noise variance times ``noise`` (the estimator's noise prior scaled to match)."""
    X, y, theta, var = simulate(seed, d, n)
    if rho == 0.0 and noise == 1.0:
        return X, y, theta, var
    rng = np.random.default_rng(seed + 7919)
    X = np.sqrt(1 - rho) * X + np.sqrt(rho) * rng.standard_normal((n, 1))
    var = var * noise
    theta = theta * np.sqrt(noise)  # the prior's weight scale is relative to the noise sd
    y = X @ theta[:-1] + theta[-1] + rng.normal(0, np.sqrt(var), n)
    return X, y, theta, var


def one(seed, d, n, epsilon, rho=0.0, noise=1.0):
    X, y, theta, var = design(seed, d, n, rho, noise)
    est = DPBayesianLinearRegression(epsilon=epsilon, random_state=seed)
    if noise != 1.0:
        est.set_params(prior_noise_scale=est.prior_noise_scale * noise)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        X_fit, y_fit = est._fit_inputs(X, y)
        settings = est._engine_settings(n, d)
        result = run_dpvi(data=(X_fit, y_fit), random_state=est._fit_seeds().engine,
                          **settings.engine)
        est._fit_from_result(result, settings, n, est._fit_seeds())
    draws = est.sample_posterior(4000, random_state=0)
    z = (draws.mean(0) - np.r_[theta, var]) / draws.std(0)
    inv_var = np.mean(1 / draws[:, -1])
    est_relax, step = release_relaxations(est, result, inv_var)
    true_relax = step * (X * X).sum(0) / var
    # the package's check: the scale rows' pooled diagonal, which the feedback does not bias
    scale_rows, scale_rows_sd = scale_row_relaxations(
        settings.engine["model"].data_statistics(n), result, inv_var)
    return dict(z_rms=float(np.sqrt(np.mean(z[:-1] ** 2))),
                relax_true=float(np.median(true_relax)),
                relax_release=float(np.median(est_relax)),
                relax_scale_rows=float(scale_rows), relax_scale_rows_sd=float(scale_rows_sd),
                warned=sorted({type(w.message).__name__ for w in caught
                               if issubclass(w.category, Warning)}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ds", type=int, nargs="+", default=[3, 5, 10, 20])
    parser.add_argument("--ns", type=int, nargs="+", default=[200, 300, 500, 1000, 2000])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.3, 1.0])
    parser.add_argument("--k", type=int, default=6)
    parser.add_argument("--rho", type=float, default=0.0, help="equicorrelated features")
    parser.add_argument("--noise", type=float, default=1.0,
                        help="noise variance (and its prior) times this")
    parser.add_argument("--out", default="results/relaxation_grid.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cells = []
    for d, n, eps in itertools.product(args.ds, args.ns, args.epsilons):
        start = time.perf_counter()
        fits = [one(seed, d, n, eps, args.rho, args.noise) for seed in range(args.k)]
        z_rms = [f["z_rms"] for f in fits]
        cell = dict(d=d, n=n, epsilon=eps, rho=args.rho, noise=args.noise, fits=fits,
                    z_rms_pooled=float(np.sqrt(np.mean(np.square(z_rms)))),
                    relax_true=float(np.median([f["relax_true"] for f in fits])),
                    relax_release=float(np.median([f["relax_release"] for f in fits])))
        cells.append(cell)
        print(f"d={d:2d} N={n:5d} eps={eps:<4} z rms {cell['z_rms_pooled']:.2f} "
              f"(fits {min(z_rms):.2f}-{max(z_rms):.2f}) relaxations true "
              f"{cell['relax_true']:.0f} release {cell['relax_release']:.0f} scale rows "
              f"{np.median([f['relax_scale_rows'] for f in fits]):.0f} "
              f"({np.median([f['relax_scale_rows_sd'] for f in fits]):.0f}); warned "
              f"{sum(bool(f['warned']) for f in fits)}/{len(fits)} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    with open(args.out, "w") as fh:
        json.dump(dict(k=args.k, cells=cells), fh, indent=1)


if __name__ == "__main__":
    main()
