"""Why Table 2 fails with prior reference points: per-coordinate z-scores.

For K simulations of the 10-D regression (Table 2's settings and estimator defaults),
prints the mean and sd over simulations of z = (posterior mean - truth) / posterior sd
for every unconstrained coordinate (a calibrated posterior gives mean 0, sd 1), the
trace's wander of the coefficient means, and two attempted repairs of the noise-variance
coordinate u = softplus^-1(sigma^2):

- ``exact_second_order``: exact inference with the u-gradient offset of
  ``LinearRegressionModel.wander_gradient_offset`` (the second-order effect of the
  coefficients' stationary wander, ``-(sigmoid(u) / (4 var)) sum_j lr_j tau_j^2``);
- ``exact, minus wander``: the posterior mean of var minus sum_j Var(mu_j) (unit
  feature second moments, true for this simulator).

``--beta-u`` preconditions the u coordinate (default 1, the estimator's choice).

Run: python benchmarks/diagnose_linear_noise_variance.py [--epsilon 0.1] [--n-sim 48]
"""

import argparse

import numpy as np
from joblib import Parallel, delayed

from _common import machine, save


def _batch(seeds, epsilon, n_steps, beta_u):
    import torch

    from _common import _engine_settings, _post_process
    from skdpvi import DPBayesianLinearRegression
    from skdpvi.datasets import make_nig_linear_regression
    from skdpvi.dpvi import run_dpvi_batched
    from skdpvi.noise_aware import sample_phi_star
    from skdpvi.posterior import NoiseAwarePosterior
    from table2_linear import CLIP, MODEL

    torch.set_num_threads(1)
    p = MODEL.n_weights
    sims = [make_nig_linear_regression(5000, random_state=s) for s in seeds]
    lam_c = DPBayesianLinearRegression()._default_learning_rate_scale(2 * MODEL.n_params)
    settings = _engine_settings(MODEL, epsilon=epsilon, clip_norm=CLIP, n_steps=n_steps,
                                sampling_rate=0.1, delta=1e-5, burn_in=0.2,
                                preconditioner=None, learning_rate_scale=lam_c)
    settings["preconditioner"] = np.r_[np.ones(p), beta_u,
                                       np.full(p + 1, settings["preconditioner"])]
    runs = run_dpvi_batched(MODEL, [(X, y) for X, y, _ in sims], random_states=seeds,
                            **settings)
    out = []
    for res, (_, _, theta) in zip(runs, sims):
        posts, diag = _post_process(res, MODEL, 0, 1000, ("exact", "emcee"))
        stats = res.stats
        wander = stats.sum_xx / stats.count - (stats.sum_x / stats.count) ** 2
        offset = MODEL.wander_gradient_offset(stats.shift + stats.sum_x / stats.count,
                                              res.learning_rate, res.noise_std)
        phi, _ = sample_phi_star(res, "exact", 1000, random_state=0, gradient_offset=offset)
        posts["exact_second_order"] = NoiseAwarePosterior(phi, MODEL, "exact")
        row = {"theta_u": posts["exact"].to_unconstrained(theta), "wander": wander,
               "sigma2": float(theta[-1]), "clipped": diag["clipped_fraction"]}
        for method, post in posts.items():
            draws = post.sample(2000, random_state=0, unconstrained=True)
            row[method] = (draws.mean(0), draws.std(0))
        out.append(row)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--n-sim", type=int, default=48)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--beta-u", type=float, default=1.0)
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
    seeds = list(range(1000, 1000 + args.n_sim))
    parts = Parallel(n_jobs=args.n_jobs)(
        delayed(_batch)(seeds[i::args.n_jobs], args.epsilon, args.steps, args.beta_u)
        for i in range(args.n_jobs))
    rows = [r for part in parts for r in part]
    truth = np.array([r["theta_u"] for r in rows])
    report = {"machine": machine(), "args": vars(args), "z": {}}
    np.set_printoptions(precision=2, suppress=True, linewidth=120)
    print(f"epsilon={args.epsilon}, K={args.n_sim}, beta_u={args.beta_u}: z per coordinate "
          "(10 coefficients, intercept, u)")
    for method in ("exact", "emcee", "exact_second_order"):
        z = np.array([(r[method][0] - t) / r[method][1] for r, t in zip(rows, truth)])
        print(f"{method:<20} mean {z.mean(0)}\n{'':<20} sd   {z.std(0)}")
        report["z"][method] = {"mean": z.mean(0).tolist(), "sd": z.std(0).tolist()}
    # the posterior mean of var minus the coefficients' wander, mapped back to u
    var_post = np.logaddexp(0, np.array([r["exact"][0][-1] for r in rows]))
    wander = np.array([r["wander"][: truth.shape[1] - 1].sum() for r in rows])
    corrected = var_post - wander
    ok = corrected > 0
    u_corr = np.log(np.expm1(corrected[ok]))
    z = (u_corr - truth[ok, -1]) / np.array([r["exact"][1][-1] for r in rows])[ok]
    sigma2 = np.array([r["sigma2"] for r in rows])
    print(f"exact, minus wander: u z mean {z.mean():.2f}, sd {z.std():.2f}; "
          f"{(~ok).sum()} of {len(rows)} corrected variances <= 0")
    print(f"coefficient wander sum_j Var(mu_j) / sigma^2: median "
          f"{np.median(wander / sigma2):.2f}; clipped fraction "
          f"{np.mean([r['clipped'] for r in rows]):.3f}")
    report.update(minus_wander={"z_mean": float(z.mean()), "z_sd": float(z.std()),
                                "non_positive": int((~ok).sum())},
                  wander_over_sigma2=float(np.median(wander / sigma2)))
    save(f"diagnose_linear_eps{args.epsilon}_betau{args.beta_u:g}", report)


if __name__ == "__main__":
    main()
