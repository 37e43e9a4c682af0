"""Probe (oracle): a full-rank posterior that carries the DP error's dependence on theta.

``prior_once_theta_dependent.py`` shows, in a Gaussian model, that where the DP error
of the released mode grows with the coefficients only a posterior that carries the
error as a function of theta passes prior references. This probe asks the same of
real releases, with the private data as an oracle for that function. For each of a
cell's cached fits (``full_rank.py --cache``):

- ``c``: the release's estimate of the mode (the window's mean of the means, its
  Newton step and the wander correction, as the default computes it);
- ``E(t) = K(t)^-1 Q K(t)^-1 / n``, ``K(t) = kappa H(t)``, with ``H(t)`` the negative
  log joint's Hessian at t computed *from the private data* (the oracle: a release
  reads it at one point only), Q the DP noise's variance, n the window's steps;
- the data's mode given t, ``N(t - H(t)^-1 t / tau^2, H(t)^-1 H_lik(t) H(t)^-1)``
  (first order), so ``c | t`` is Gaussian with the sum of the two covariances;
- ``p(t | c)`` by importance resampling (``--proposals`` draws from the plug-in
  ``N(c, H^-1 + E)`` widened 1.5 times, the release's H).

Scored as ``full_rank.py`` scores (TARP with the authors' and the same prior
references), beside the default on the same fits.

Run::

    python benchmarks/ablation_logistic/full_rank.py toep06d6e05 --n-sim 200 \\
        --set burn_in=0.5 elbo_gradients=closed_form --cache /tmp/fits
    python benchmarks/ablation_logistic/full_rank_theta_error_oracle.py toep06d6e05 /tmp/fits
"""

import argparse
import glob
import os
import sys

import numpy as np
from joblib import Parallel, delayed

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import full_rank as fr  # noqa: E402
from _common import machine, save  # noqa: E402
from full_rank_centre_probe import load_fit  # noqa: E402
from release_cache import CELLS, describe, prior_scale, score  # noqa: E402
from skdpvi.noise_aware import full_rank_curvature, full_rank_wander_width  # noqa: E402
from skdpvi.noise_aware.wander_bias import remove_wander_bias  # noqa: E402


def _log_normal(x, mean, cov):
    diff = x - mean
    _, logdet = np.linalg.slogdet(cov)
    return -0.5 * (diff @ np.linalg.solve(cov, diff) + logdet)


def release_estimate(release, tau):
    """The default's curvature H, its inverse and its estimate c of the mode (the
    window's mean of the means, its Newton step and the wander correction)."""
    n, kappa = release.n_params, release.sampling_rate
    H = full_rank_curvature(release, tau, None, fr.CORRECTIONS["shrunk_radial"][1])
    H_inv = np.linalg.inv(H)
    c = np.asarray(release.mean_phi, float)[:n] \
        - np.linalg.solve(kappa * H, np.asarray(release.mean_gradient, float))
    c = remove_wander_bias(c[None], full_rank_wander_width(release, H, tau),
                           prior_scale=tau, covariance=H_inv)[0]
    return H, H_inv, c


def one(cell, path, n_proposals):
    seed, est, theta, rows, _ = load_fit(cell, path, exact=False)
    tau = prior_scale(cell)
    release = est.dpvi_result_
    n, kappa = release.n_params, release.sampling_rate
    noise_var = float(release.noise_std[0]) ** 2
    H, H_inv, c = release_estimate(release, tau)

    def error(Ht):
        Ht_inv = np.linalg.inv(Ht)
        return noise_var / kappa**2 * Ht_inv @ Ht_inv / release.count

    rng = np.random.default_rng(seed)
    proposal_cov = 2.25 * (H_inv + error(H))
    proposals = rng.multivariate_normal(c, proposal_cov, size=n_proposals)
    log_w = np.empty(n_proposals)
    for k, t in enumerate(proposals):
        p = 1 / (1 + np.exp(-rows @ t))
        H_lik = (rows * (p * (1 - p))[:, None]).T @ rows
        Ht = H_lik + np.eye(n) / tau**2
        Ht_inv = np.linalg.inv(Ht)
        mode = t - Ht_inv @ t / tau**2
        cov = Ht_inv @ H_lik @ Ht_inv + error(Ht)
        log_w[k] = (_log_normal(c, mode, cov) - 0.5 * t @ t / tau**2
                    - _log_normal(t, c, proposal_cov))
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    draws = proposals[rng.choice(n_proposals, size=1000, p=w)]
    return seed, theta, fr._draws(est, fr.CORRECTIONS["shrunk_radial"]), draws, \
        float(1 / np.sum(w**2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell", choices=list(CELLS))
    parser.add_argument("cache")
    parser.add_argument("--proposals", type=int, default=4000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--save", default="ablation_logistic_full_rank_theta_error_oracle")
    args = parser.parse_args()
    paths = sorted(glob.glob(os.path.join(args.cache, f"{args.cell}_*.pkl")))
    out = Parallel(n_jobs=args.n_jobs)(delayed(one)(args.cell, p, args.proposals)
                                       for p in paths)
    thetas = np.array([o[1] for o in out])
    refs = prior_scale(args.cell) * np.random.default_rng(12345).standard_normal(thetas.shape)
    rows = {}
    for label, index in (("default", 2), ("theta-dependent error (oracle)", 3)):
        rows[label] = score(np.array([o[index] for o in out]), thetas, refs)
        print(f"{args.cell} {label:<32} {describe(rows[label])}")
    ess = [o[4] for o in out]
    print(f"  importance sampling: effective sample size median {np.median(ess):.0f}, "
          f"minimum {np.min(ess):.0f} of {args.proposals}")
    save(f"{args.save}_{args.cell}", {"machine": machine(), "args": vars(args),
                                      "rows": rows, "effective_sample_size": ess})


if __name__ == "__main__":
    main()
