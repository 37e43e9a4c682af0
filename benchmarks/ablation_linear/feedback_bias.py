"""Why small data at small epsilon is over-confident: the statistics regression's feedback bias.

For each simulated data set (``make_nig``-style: d standard normal features, N rows,
coefficients and noise variance from the paper's priors) the default
``DPBayesianLinearRegression`` runs DP-SGD once with the trace recorded, and then,
with the *true* statistics eta = (X^T X, X^T y, y^T y) of the data:

- the released gradients' residuals around ``J(phi_t) eta + r(phi_t)`` in units of
  the mechanism's noise (mean z and scatter per coordinate): the linear-Gaussian
  model of the release is exact at the truth, or it is not;
- the least-squares estimate of eta from the trace (the statistics posterior's
  likelihood, before any prior) against the truth, in its own standard errors, for
  the diagonal of X^T X;
- the means' relaxation count in the recording window,
  ``n_window * lr_j * kappa * (X^T X)_jj / sigma^2`` (sigma^2 the true noise variance);
- the fitted posterior's coefficient z-scores (root mean square; 1 is calibrated).

``--no-clip`` runs the same noise with a clip norm 1000 times larger (nothing is
clipped; not private, a reference). Results: doc/results.rst, "Small data at small
epsilon".

Run from ``benchmarks/``: python ablation_linear/feedback_bias.py --n 300 --epsilon 0.3 --k 4
"""

import argparse
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from skdpvi import DPBayesianLinearRegression  # noqa: E402
from skdpvi.dpvi import run_dpvi  # noqa: E402
from skdpvi.models.linear_statistics import LinearRegressionStatistics  # noqa: E402
from skdpvi.models.statistics import vech_indices  # noqa: E402


def simulate(seed, d, n):
    """(X, y, theta, sigma^2): d standard normal features, the paper's priors."""
    rng = np.random.default_rng(seed + 100)
    var = 0.5 / rng.gamma(20.0)
    theta = rng.normal(0, 2 * np.sqrt(var), d + 1)
    X = rng.standard_normal((n, d))
    y = X @ theta[:-1] + theta[-1] + rng.normal(0, np.sqrt(var), n)
    return X, y, theta, var


def fit_recorded(seed, d, n, epsilon, no_clip=False):
    """The default fit of ``simulate(seed, d, n)`` with its trace recorded: (estimator,
    settings, DPVIResult, the data's true statistics eta, theta, sigma^2)."""
    X, y, theta, var = simulate(seed, d, n)
    est = DPBayesianLinearRegression(epsilon=epsilon, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        X_fit, y_fit = est._fit_inputs(X, y)
        settings = est._engine_settings(n, d)
        engine = dict(settings.engine, record_trace=True, return_diagnostics=True)
        if no_clip:  # the same noise sigma C, nothing clipped
            engine["clip_norm"] *= 1e3
            engine["noise_multiplier"] /= 1e3
        result = run_dpvi(data=(X_fit, y_fit), random_state=est._fit_seeds().engine, **engine)
        est._fit_from_result(result, settings, n, est._fit_seeds())
    Xa = np.c_[X, np.ones(n)]
    rows, cols = vech_indices(d + 1)
    eta = np.r_[(Xa.T @ Xa)[rows, cols], Xa.T @ y, y @ y]
    return est, settings, result, eta, theta, var


def one(seed, d, n, epsilon, no_clip):
    est, settings, result, eta, theta, var = fit_recorded(seed, d, n, epsilon, no_clip)
    draws = est.sample_posterior(4000, random_state=0)
    z = (draws.mean(0) - np.r_[theta, var]) / draws.std(0)

    statistics = LinearRegressionStatistics(settings.engine["model"], n)
    rows, cols = vech_indices(d + 1)
    grads = result.trace_grad[result.burn_in:]
    phi = result.trace_phi[result.burn_in: result.burn_in + len(grads)]
    target = grads / result.sampling_rate
    tau = result.noise_std / result.sampling_rate
    J, r = statistics.design(phi)
    resid = (target - (J @ eta + r)) / tau
    P, h, _ = statistics.normal_equations(phi, target, 1 / tau**2)
    cov = np.linalg.pinv(P)
    diagonal = np.flatnonzero(rows == cols)[:d]
    z_ols = ((cov @ h - eta) / np.sqrt(np.diag(cov)))[diagonal]
    relax = len(grads) * result.learning_rate[:d] * result.sampling_rate * eta[diagonal] / var
    return dict(resid_z=resid.mean(0) * np.sqrt(len(resid)), scatter=resid.std(0),
                z_ols=z_ols, relax=relax, z_rms=float(np.sqrt(np.mean(z[:-1] ** 2))),
                clipped=result.diagnostics["clipped_fraction"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--epsilon", type=float, default=0.3)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--no-clip", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"d={args.d} N={args.n} epsilon={args.epsilon} K={args.k}"
          f"{' no clipping' if args.no_clip else ''}")
    out = [one(seed, args.d, args.n, args.epsilon, args.no_clip) for seed in range(args.k)]
    for seed, o in enumerate(out):
        print(f"  seed {seed}: clipped {o['clipped']:.3f}, residual z at the truth "
              f"|mean| max {np.abs(o['resid_z']).max():.1f}, scatter "
              f"{o['scatter'].min():.2f}-{o['scatter'].max():.2f}; least-squares "
              f"diag(X^T X) z {o['z_ols'].mean():+.1f} ({o['z_ols'].min():+.1f} to "
              f"{o['z_ols'].max():+.1f}); relaxations {np.median(o['relax']):.0f}; "
              f"posterior coefficient z rms {o['z_rms']:.2f}")
    z_ols = np.concatenate([o["z_ols"] for o in out])
    print(f"  pooled: least-squares diag z mean {z_ols.mean():+.2f}; coefficient z rms "
          f"median {np.median([o['z_rms'] for o in out]):.2f}")


if __name__ == "__main__":
    main()
