"""Mean-field in the eigenbasis of the design: a probe of a rotated parametrisation.

Mean-field reports the conditional variance 1 / H_jj where the posterior has the
marginal (H^-1)_jj, and every error model reads the missing coupling off the wander.
If the coefficients are rotated into the eigenbasis of the Gram matrix of the rows
(intercept column included), the data's curvature is nearly diagonal there and
mean-field nearly exact; the isotropic prior N(0, tau^2 I) stays isotropic under a
rotation, and so do the rows' norms (the clipping is unchanged). ``RotatedLogistic``
fits the default ``DPBayesianLogisticRegression(fit_intercept=False)`` on ``Z = [X, 1]
V`` and maps its draws back, ``beta = V gamma``.

Variants: ``default`` (the estimator as it is), ``oracle`` (V from the exact Gram
matrix: not private, the upper bound of the idea), ``private<share>`` (the Gram
matrix of the rows clipped to C_g released by the Gaussian mechanism with that share
of the budget's mu^2, the DP-SGD run given epsilon sqrt(1 - share); an
approximation of the composition, good enough for a probe).

Run: python benchmarks/ablation_logistic/rotation_probe.py --design correlated --epsilon 1 --n-sim 200
"""

import argparse
import math
import os
import sys
import time

import numpy as np
from sklearn.base import BaseEstimator

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from _common import machine, rmse_floor, save  # noqa: E402
from private_clip import Simulator  # noqa: E402
from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.accounting import noise_multiplier  # noqa: E402
from skdpvi.metrics import run_tarp_study, tarp_coverage  # noqa: E402


def gram_rotation(X, gram, share, epsilon, delta, seed):
    """Eigenvectors of the (noisy) Gram matrix of [X, 1], and the DP-SGD's epsilon."""
    Xt = np.c_[X, np.ones(len(X))]
    if gram == "oracle":
        G = Xt.T @ Xt
        eps_sgd = epsilon
    else:
        p = Xt.shape[1]
        bound = 1.5 * math.sqrt(p)  # public: standardised features
        norms = np.linalg.norm(Xt, axis=1)
        Xc = Xt * np.minimum(1.0, bound / norms)[:, None]
        sigma_all, _ = noise_multiplier(epsilon, delta, 1.0, 1)
        noise_sd = sigma_all / math.sqrt(share) * bound**2
        rng = np.random.default_rng([int(seed), 0x6772616D])
        E = np.triu(rng.standard_normal((p, p)) * noise_sd)
        G = Xc.T @ Xc + E + np.triu(E, 1).T
        eps_sgd = epsilon * math.sqrt(1 - share)
    _, V = np.linalg.eigh(G)
    return Xt @ V, V, eps_sgd


#: The probe measured the mean-field default of its session (the default is now "auto",
#: which fits the full rank on designs this small).
MF = "mean_field"


class RotatedLogistic(BaseEstimator):
    def __init__(self, epsilon=1.0, delta=1e-5, gram="oracle", share=0.1, error_model="auto",
                 random_state=None):
        self.epsilon, self.delta, self.gram, self.share = epsilon, delta, gram, share
        self.error_model = error_model
        self.random_state = random_state

    def _inner(self, eps_sgd):
        return DPBayesianLogisticRegression(epsilon=eps_sgd, delta=self.delta,
                                            fit_intercept=False, variational_family=MF,
                                            error_model=self.error_model,
                                            random_state=self.random_state)

    def fit(self, X, y):
        Z, self.rotation_, eps_sgd = gram_rotation(X, self.gram, self.share, self.epsilon,
                                                   self.delta, self.random_state or 0)
        self.inner_ = self._inner(eps_sgd).fit(Z, y)
        return self

    def _batch_fit_supported(self):
        return True

    def _fit_batch(self, datasets, random_states, verbose=0):
        out, inputs, inners = [], [], []
        for (X, y), s in zip(datasets, random_states):
            est = self.__class__(**self.get_params()).set_params(random_state=int(s))
            Z, est.rotation_, eps_sgd = gram_rotation(X, self.gram, self.share,
                                                      self.epsilon, self.delta, int(s))
            out.append(est)
            inputs.append((Z, y))
            inners.append(eps_sgd)
        fitted = self._inner(inners[0])._fit_batch(inputs, random_states, verbose)
        for est, inner in zip(out, fitted):
            est.inner_ = inner
        return out

    def sample_posterior(self, n_samples, *, random_state=None, unconstrained=False):
        gamma = self.inner_.sample_posterior(n_samples, random_state=random_state)
        return gamma @ self.rotation_.T


def make(variant, epsilon):
    if variant == "default":
        return DPBayesianLogisticRegression(epsilon=epsilon, variational_family=MF)
    if variant == "default_onehot":  # issue 14's design with its one-hot block declared
        return DPBayesianLogisticRegression(epsilon=epsilon, onehot_blocks=[[6, 7, 8, 9]],
                                            variational_family=MF)
    if variant.startswith("default:"):
        return DPBayesianLogisticRegression(epsilon=epsilon, error_model=variant[8:])
    if variant.startswith("default_clip"):  # a fixed clipping norm (e.g. one that clips no row)
        return DPBayesianLogisticRegression(epsilon=epsilon, variational_family=MF,
                                            clip_norm=float(variant[len("default_clip"):]))
    variant, _, error_model = variant.partition(":")
    error_model = error_model or "auto"
    if variant == "oracle":
        return RotatedLogistic(epsilon=epsilon, gram="oracle", error_model=error_model)
    return RotatedLogistic(epsilon=epsilon, gram="private", error_model=error_model,
                           share=float(variant[len("private"):]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", default="correlated",
                        choices=["gaussian", "correlated", "unit", "heavy"])
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--rho", type=float, default=0.0)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--n-sim", type=int, default=200)
    parser.add_argument("--variants", nargs="+", default=["default", "oracle", "private0.1"])
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.design == "correlated":
        args.d, args.n = 10, 10_000
    sim = Simulator(args.design, args.d, args.n, args.rho)
    n_params = args.d + 1
    cell = (f"{args.design}_d{args.d}_n{args.n}" + (f"_rho{args.rho:g}" if args.rho else "")
            + f"_eps{args.epsilon:g}")
    floor = rmse_floor(args.n_sim)
    payload = {"machine": machine(), "n_sim": args.n_sim, "floor": floor, "cell": cell,
               "variants": {}}
    prior_refs = np.random.default_rng(12345).standard_normal((args.n_sim, n_params))
    print(f"{cell}: K = {args.n_sim}; calibrated {floor['mean']:.3f} "
          f"(90 % {floor['q05']:.3f}-{floor['q95']:.3f})", flush=True)
    for variant in args.variants:
        start = time.perf_counter()
        study = run_tarp_study(make(variant, args.epsilon), sim, n_simulations=args.n_sim,
                               n_jobs=args.n_jobs, random_state=args.seed)
        seconds = time.perf_counter() - start
        prior = tarp_coverage(study.samples, study.theta_true, references=prior_refs).rmse
        cover = study.interval_coverage(0.9)
        z = study.z_scores()
        row = {"tarp_posterior": float(study.rmse), "tarp_prior": float(prior),
               "coverage_90_per_param": cover.tolist(), "z_sd_per_param": z.std(0).tolist(),
               "z_mean_per_param": z.mean(0).tolist(),
               "ellipsoid_coverage_90": study.ellipsoid_coverage(0.9), "seconds": seconds}
        payload["variants"][variant] = row
        print(f"  {variant:<12} TARP {row['tarp_posterior']:.3f} / {prior:.3f}, coverage "
              f"{cover.min():.2f}-{cover.max():.2f}, z sd {z.std(0).min():.2f}-"
              f"{z.std(0).max():.2f}, z mean {z.mean(0).min():+.2f}-{z.mean(0).max():+.2f}, "
              f"ellipsoids {row['ellipsoid_coverage_90']:.2f} ({seconds:.0f} s)", flush=True)
        save(f"ablation_logistic_rotation_{cell}", payload)


if __name__ == "__main__":
    main()
