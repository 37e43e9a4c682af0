"""The private clipping norm against the fixed one: TARP through the public API.

``DPBayesianLogisticRegression(clip_norm="auto")`` measures the rows' norms
privately (5 % of the budget, :mod:`skdpvi.dpvi.clip_bound`) where the data are large
enough for the histogram to tell; ``--variant fixed`` runs the previous default
``clip_norm = 2 sqrt(n_features + 1)``, the bound the private one never exceeds. Every
other parameter is the estimator's default; the study is the public
:func:`skdpvi.metrics.run_tarp_study` (DP-SGD of a task's simulations in lockstep),
coefficients and intercept drawn from the prior N(0, 1). TARP with the authors'
(posterior) and prior references, per-coordinate 90 % coverage and z sds, and the
clipping norms the fits chose.

Designs: ``gaussian`` (d equicorrelated unit-variance features), ``correlated``
(issue 14's benchmark, ``benchmarks/logistic_correlated.py``; ``--onehot`` declares its
one-hot block, ``onehot_blocks=[[6, 7, 8, 9]]``), ``unit`` (d features
uniform on [0, 1], public-scale features as on Adult), ``heavy`` (d Student-t
features with 3 degrees of freedom, scaled to unit variance: large-norm rows).

Run: python benchmarks/ablation_logistic/private_clip.py --design correlated --epsilon 1 --n-sim 300
"""

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from _common import machine, rmse_floor, save  # noqa: E402
from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.metrics import run_tarp_study, tarp_coverage  # noqa: E402


class Simulator:
    """theta ~ N(0, I) (coefficients, then the intercept), X from the design, y | X, theta."""

    def __init__(self, design, d, n, rho):
        self.design, self.d, self.n, self.rho = design, d, n, rho

    def features(self, rng):
        n, d = self.n, self.d
        if self.design == "correlated":
            from logistic_correlated import simulate

            X, _, _ = simulate(rng, n)
            return X
        if self.design == "unit":
            return rng.random((n, d))
        if self.design == "heavy":
            return rng.standard_t(3, (n, d)) / math.sqrt(3.0)
        z = rng.standard_normal((n, d))
        return math.sqrt(1 - self.rho) * z + math.sqrt(self.rho) * rng.standard_normal((n, 1))

    def __call__(self, rng):
        X = self.features(rng)
        theta = rng.standard_normal(X.shape[1] + 1)
        logits = X @ theta[:-1] + theta[-1]
        y = (rng.random(len(X)) < 1 / (1 + np.exp(-logits))).astype(int)
        if y.min() == y.max():  # a single class cannot be fitted: flip one label
            y[0] = 1 - y[0]
        return theta, X, y


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", default="gaussian",
                        choices=["gaussian", "correlated", "unit", "heavy"])
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--rho", type=float, default=0.0)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--n-sim", type=int, default=200)
    parser.add_argument("--variants", nargs="+", default=["auto", "fixed"],
                        help="auto, fixed, or exact (the non-private exact posterior, "
                             "importance-resampled: the yardstick on the same simulations)")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", nargs="*", default=[], metavar="PARAM=VALUE",
                        help="estimator parameters for every variant (e.g. inference=emcee "
                             "error_model=diagonal); they name the results file")
    parser.add_argument("--tag", default="", help="appended to the results file's name")
    parser.add_argument("--onehot", action="store_true",
                        help="correlated design: declare its one-hot block (onehot_blocks)")
    args = parser.parse_args()
    if args.design == "correlated":
        args.d, args.n = 10, 10_000
    sim = Simulator(args.design, args.d, args.n, args.rho)
    n_params = args.d + 1
    cell = (f"{args.design}_d{args.d}_n{args.n}" + (f"_rho{args.rho:g}" if args.rho else "")
            + f"_eps{args.epsilon:g}" + ("_onehot" if args.onehot else "")
            + "".join(f"_{kv.replace('=', '-')}" for kv in args.set)
            + (f"_{args.tag}" if args.tag else ""))
    extra = {}
    for kv in args.set:
        key, value = kv.split("=", 1)
        try:
            extra[key] = float(value)
        except ValueError:
            extra[key] = value
    floor = rmse_floor(args.n_sim)
    payload = {"machine": machine(), "n_sim": args.n_sim, "floor": floor, "cell": cell,
               "variants": {}}
    rng = np.random.default_rng(12345)
    prior_refs = rng.standard_normal((args.n_sim, n_params))
    print(f"{cell}: K = {args.n_sim}; a calibrated method gets {floor['mean']:.3f} "
          f"(90 % {floor['q05']:.3f}-{floor['q95']:.3f})")
    clips = []
    for k in range(20):  # the clipping norms "auto" chooses on this design
        _, X, _ = sim(np.random.default_rng(1000 + k))
        settings = DPBayesianLogisticRegression(epsilon=args.epsilon)._engine_settings(
            len(X), X.shape[1], X, k)
        clips.append(settings.engine["clip_norm"])
    payload["auto_clip_norms"] = clips
    print(f"  auto clip norms (20 data sets): {min(clips):.3g}-{max(clips):.3g}, "
          f"fixed {2.0 * math.sqrt(n_params):.3g}")
    for variant in args.variants:
        clip = "auto" if variant == "auto" else 2.0 * math.sqrt(n_params)
        blocks = [[6, 7, 8, 9]] if args.onehot else None
        est = DPBayesianLogisticRegression(epsilon=args.epsilon, clip_norm=clip,
                                           onehot_blocks=blocks, **extra)
        if variant == "exact":  # the non-private exact posterior on the same simulations
            from laplace_yardstick import ExactLogistic
            est = ExactLogistic()
        start = time.perf_counter()
        study = run_tarp_study(est, sim, n_simulations=args.n_sim, n_jobs=args.n_jobs,
                               random_state=args.seed)
        seconds = time.perf_counter() - start
        prior = tarp_coverage(study.samples, study.theta_true, references=prior_refs).rmse
        cover = study.interval_coverage(0.9)
        z = study.z_scores()
        row = {"tarp_posterior": float(study.rmse), "tarp_prior": float(prior),
               "coverage_90": [float(cover.min()), float(cover.max())],
               "z_sd": [float(z.std(0).min()), float(z.std(0).max())],
               "z_mean": [float(z.mean(0).min()), float(z.mean(0).max())],
               "coverage_90_per_param": cover.tolist(), "z_sd_per_param": z.std(0).tolist(),
               "ellipsoid_coverage_90": study.ellipsoid_coverage(0.9), "seconds": seconds}
        payload["variants"][variant] = row
        print(f"  {variant:<6} TARP {row['tarp_posterior']:.3f} / {row['tarp_prior']:.3f}, "
              f"coverage {cover.min():.2f}-{cover.max():.2f}, z sd "
              f"{row['z_sd'][0]:.2f}-{row['z_sd'][1]:.2f}, z mean {row['z_mean'][0]:+.2f}-"
              f"{row['z_mean'][1]:+.2f}, 90 % ellipsoids cover {row['ellipsoid_coverage_90']:.2f} "
              f"({seconds:.0f} s)", flush=True)
        save(f"ablation_logistic_private_clip_{cell}", payload)


if __name__ == "__main__":
    main()
