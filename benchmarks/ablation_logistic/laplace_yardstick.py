"""A non-private yardstick for the large-coefficient cells: the Laplace posterior.

For each simulation of a ``release_cache.py`` cell (the same truths and data sets),
the exact MAP of the logistic posterior with the cell's N(0, prior_scale^2) prior and
its Laplace covariance (inverse Hessian at the MAP), computed from the data without
privacy, scored by ``release_cache.score`` against the same prior references. It
says how calibrated a Gaussian posterior can be on the cell when the optimisation is
exact (the mean-field posterior is not the Laplace one, but sits near it); where the
private fits are far worse, the gap is the DP-SGD's, not the posterior family's.
``--exact`` scores the exact posterior instead (importance resampling of a t
proposal around the MAP; thirtieth session), and beside it the Gaussian with the exact
posterior's mean and covariance: where that one passes and Laplace's does not, the
Laplace posterior's error is its centre (the MAP), not the Gaussian shape.
``--seeds`` prints, for single simulations, the truth, the Laplace posterior and the
cached private fits along the truth's direction (mean and sd).

Run::

    python benchmarks/ablation_logistic/laplace_yardstick.py d10ps2 rho05ps2 d3ps3
    python benchmarks/ablation_logistic/laplace_yardstick.py d10ps2 --seeds 5021 \\
        --tags "" bi4
"""

import argparse
import os
import sys
import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.base import BaseEstimator

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import release_cache as rc  # noqa: E402
from _common import save  # noqa: E402


def laplace(X, y, prior_sd):
    """MAP and Laplace covariance of logistic regression with an intercept (last)."""
    A = np.c_[X, np.ones(len(X))]

    def objective(w):
        z = A @ w
        value = np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * w @ w / prior_sd ** 2
        return value, A.T @ (1.0 / (1.0 + np.exp(-z)) - y) + w / prior_sd ** 2

    w = minimize(objective, np.zeros(A.shape[1]), jac=True, method="L-BFGS-B").x
    p = 1.0 / (1.0 + np.exp(-(A @ w)))
    H = (A * (p * (1 - p))[:, None]).T @ A + np.eye(A.shape[1]) / prior_sd ** 2
    return w, np.linalg.inv(H)


def exact_draws(X, y, prior_sd, w, C, rng, n_draws=1000, n_proposal=8000, dof=5.0):
    """Draws of the exact posterior (thirtieth session): importance resampling of a
    multivariate t (``dof``) around the MAP with the Laplace covariance; returns the
    draws and the importance weights' effective sample size."""
    A = np.c_[X, np.ones(len(X))]
    p = len(w)
    L = np.linalg.cholesky(C)
    g = rng.chisquare(dof, n_proposal) / dof
    z = rng.standard_normal((n_proposal, p))
    draws = w + (z @ L.T) / np.sqrt(g)[:, None]
    maha = np.einsum("kp,kp->k", z, z) / g  # (x - w)' C^-1 (x - w)
    log_q = -0.5 * (dof + p) * np.log1p(maha / dof)
    log_lik = np.empty(n_proposal)
    for i in range(0, n_proposal, 500):  # (500, N) logits at a time
        logits = draws[i:i + 500] @ A.T
        log_lik[i:i + 500] = logits @ y - np.logaddexp(0.0, logits).sum(1)
    log_post = log_lik - 0.5 * np.einsum("kp,kp->k", draws, draws) / prior_sd ** 2
    log_w = log_post - log_q
    weights = np.exp(log_w - log_w.max())
    weights /= weights.sum()
    ess = 1.0 / np.sum(weights ** 2)
    return draws[rng.choice(n_proposal, n_draws, p=weights)], float(ess)


class _Identity:
    """``posterior_.to_unconstrained`` of a model without constraints."""

    @staticmethod
    def to_unconstrained(theta):
        return np.asarray(theta, float)


class ExactLogistic(BaseEstimator):
    """The exact (non-private) posterior as an estimator :func:`run_tarp_study` can fit:
    ``fit`` runs :func:`laplace` and :func:`exact_draws` (thirtieth session), so a study
    of it sees the same simulations and references as a study of the private default
    with the same ``random_state``: the attainable figure beside it."""

    def __init__(self, prior_scale=1.0, random_state=None):
        self.prior_scale = prior_scale
        self.random_state = random_state

    def fit(self, X, y):
        X, y = np.asarray(X, float), np.asarray(y, float)
        w, C = laplace(X, y, self.prior_scale)
        self.pool_, self.ess_ = exact_draws(X, y, self.prior_scale, w, C,
                                            np.random.default_rng(self.random_state),
                                            n_draws=4000)
        self.posterior_ = _Identity()
        return self

    def sample_posterior(self, n_samples, *, random_state=None, unconstrained=False):
        rng = np.random.default_rng(random_state)
        return self.pool_[rng.choice(len(self.pool_), n_samples)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", choices=list(rc.CELLS))
    parser.add_argument("--n-sim", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=None)
    parser.add_argument("--tags", nargs="+", default=[""],
                        help="with --seeds: cached runs to compare ('' = the default's)")
    parser.add_argument("--cache", default="/tmp/release_cache")
    parser.add_argument("--save", default="ablation_logistic_laplace_yardstick")
    parser.add_argument("--ref-sets", type=int, default=0,
                        help="also score against this many other sets of prior references")
    parser.add_argument("--proposals", type=int, default=8000,
                        help="--exact: importance proposals per simulation")
    parser.add_argument("--exact", action="store_true",
                        help="the exact posterior (importance-resampled), not Laplace's")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.seeds:
        for cell in args.cells:
            for seed in args.seeds:
                theta, X, y = rc.simulate(rc._rule_cell(cell), seed)
                u = theta / np.linalg.norm(theta)
                w, C = laplace(X, y, rc.prior_scale(cell))
                line = (f"{cell} seed {seed}: truth {theta @ u:.2f}, Laplace {w @ u:.2f} "
                        f"(sd {np.sqrt(u @ C @ u):.2f})")
                for tag in args.tags:
                    row = [r for r in rc.load(args.cache, rc._tagged(cell, tag or None))
                           if r["seed"] == seed][0]
                    draws = rc._posterior(cell, row, {}, {})[0] @ u
                    line += f", {tag or 'default'} {draws.mean():.2f} (sd {draws.std():.3f})"
                print(line)
        return
    payload = {"cells": {}}
    out = os.path.join(os.path.dirname(HERE), "results", args.save + ".json")
    if os.path.exists(out):  # add to the cells kept
        import json
        with open(out) as f:
            payload["cells"].update(json.load(f).get("cells", {}))
    for cell in args.cells:
        rng = np.random.default_rng(0)
        draws, thetas, ess = [], [], []
        for seed in range(5000, 5000 + args.n_sim):
            theta, X, y = rc.simulate(rc._rule_cell(cell), seed)
            w, C = laplace(X, y, rc.prior_scale(cell))
            if args.exact:
                d, e = exact_draws(X, y, rc.prior_scale(cell), w, C, rng,
                                   n_proposal=args.proposals)
                draws.append(d)
                ess.append(e)
            else:
                draws.append(rng.multivariate_normal(w, C, size=1000))
            thetas.append(theta)
        thetas = np.array(thetas)
        refs = rc.prior_scale(cell) * np.random.default_rng(12345).standard_normal(thetas.shape)
        row = rc.score(np.array(draws), thetas, refs)
        label = "exact" if args.exact else "Laplace"
        if args.exact:
            row["importance_ess"] = [float(np.min(ess)), float(np.median(ess))]
            # the Gaussian with the exact posterior's mean and covariance: is the shape
            # or the centre what a Gaussian posterior misses?
            gauss = np.stack([rng.multivariate_normal(d.mean(0), np.cov(d.T), size=1000)
                              for d in draws])
            row["moment_matched_gaussian"] = rc.score(gauss, thetas, refs)
        if args.ref_sets:  # how much the prior references alone move the figure
            from skdpvi.metrics import tarp_coverage
            row["prior_refs_other_sets"] = [
                float(tarp_coverage(np.array(draws), thetas, references=rc.prior_scale(cell)
                                    * np.random.default_rng(s).standard_normal(thetas.shape)).rmse)
                for s in range(1, args.ref_sets + 1)]
            print(f"{cell:<8} prior references, {args.ref_sets} other sets: "
                  f"{min(row['prior_refs_other_sets']):.3f}-{max(row['prior_refs_other_sets']):.3f}")
        payload["cells"][cell + ("@exact" if args.exact else "")] = row
        print(f"{cell:<8} {label} (not private) TARP {row['tarp_posterior']:.3f} / "
              f"{row['tarp_prior']:.3f}, coverage {row['coverage_90'][0]:.2f}-"
              f"{row['coverage_90'][1]:.2f}, z sd {row['z_sd'][0]:.2f}-{row['z_sd'][1]:.2f}, "
              f"ellipsoids {row['ellipsoid_90']:.2f}, radial z {row['radial_z'][0]:+.2f}"
              + (f", importance ESS min {min(ess):.0f}; the moment-matched Gaussian "
                 f"{row['moment_matched_gaussian']['tarp_posterior']:.3f} / "
                 f"{row['moment_matched_gaussian']['tarp_prior']:.3f}" if ess else ""), flush=True)
        save(args.save, payload)  # after every cell


if __name__ == "__main__":
    main()
