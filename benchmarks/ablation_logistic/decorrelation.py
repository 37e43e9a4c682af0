"""``DPBayesianLogisticRegression(decorrelation=share)`` against the default, per cell.

Every cell of ``release_cache.py`` (its designs, sizes, budgets and priors: issue
14's benchmark with and without its one-hot block declared, the equicorrelated,
AR(1), nearly collinear, heavy-tailed, uncentred and rare-outcome designs, the
hold-outs) fitted through the public :func:`~skdpvi.metrics.run_tarp_study` (the
lockstep path), the default estimator and the same with ``decorrelation`` on the
same simulations. TARP with the authors' and prior references (the prior's own
scale), per-coordinate 90 % coverage, z sds, the 90 % ellipsoids, and the z-score sd
along the posterior's narrowest and widest directions (the joint check).

Variants: ``default``; ``eps<value>`` (the default at another budget);
``dec<share>`` (the option); ``dec<share>s<signal>`` (only the released Gram
matrix's eigenvectors above ``signal`` times its noise's spectral norm);
``dec<share>nk`` (the option with a shrunk model that keeps no direction above the
bulk's edge); ``<variant>:<error_model>`` (another inner error model). Results merge
into ``results/ablation_logistic_decorrelation_<cell><tag>.json`` when K matches.

Run: python benchmarks/ablation_logistic/decorrelation.py rho07d10 corrb --n-sim 200 \
         --variants default dec0.1
"""

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import machine, rmse_floor, save  # noqa: E402
from release_cache import CELLS, _rule_cell, estimator, prior_scale, simulate  # noqa: E402
from skdpvi.metrics import run_tarp_study, tarp_coverage  # noqa: E402


class CellSimulator:
    """``release_cache.simulate(cell, seed)`` with the seed drawn from the study's rng."""

    def __init__(self, cell):
        self.cell = cell

    def __call__(self, rng):
        return simulate(_rule_cell(self.cell), int(rng.integers(2**31 - 1)))


class SignalOnly:
    """Estimator classes whose decorrelation rotates only the released Gram matrix's
    eigenvectors above ``signal`` times its noise's spectral norm."""

    cache = {}

    @classmethod
    def of(cls, signal):
        from skdpvi import DPBayesianLogisticRegression

        if signal not in cls.cache:
            cls.cache[signal] = type(f"SignalOnly{signal:g}".replace(".", "_"),
                                     (DPBayesianLogisticRegression,),
                                     {"_decorrelation_signal": signal, "__module__": __name__})
        return cls.cache[signal]


for _signal in (1.0, 2.0, 3.0):
    globals()[SignalOnly.of(_signal).__name__] = SignalOnly.of(_signal)


def _nothing_kept_class():
    """The estimator whose shrunk error model keeps no direction above the bulk's edge
    (``release_cache._shrunk_nothing_kept``), in every process that unpickles it."""
    from skdpvi import DPBayesianLogisticRegression

    class NothingKept(DPBayesianLogisticRegression):
        def _posterior_from_draws(self, *args, **kwargs):
            from release_cache import _shrunk_nothing_kept

            with _shrunk_nothing_kept():
                return super()._posterior_from_draws(*args, **kwargs)

    NothingKept.__module__ = __name__
    NothingKept.__qualname__ = "NothingKept"
    return NothingKept


NothingKept = _nothing_kept_class()


def make(cell, variant):
    variant, _, error_model = variant.partition(":")  # dec0.1:dense, the inner model
    if error_model:
        est = make(cell, variant)
        return est.set_params(error_model=error_model)
    if variant == "default":
        return estimator(cell)
    if variant.startswith("eps"):  # eps<epsilon>: the default at another budget
        return estimator(cell).set_params(epsilon=float(variant[3:]))
    if variant.startswith("dec") and "s" in variant[3:]:  # dec<share>s<signal>
        share, signal = variant[3:].split("s")
        est = estimator(cell, decorrelation=float(share))
        return SignalOnly.of(float(signal))(**est.get_params())
    if variant.startswith("dec") and variant.endswith("nk"):  # dec<share>nk
        est = estimator(cell, decorrelation=float(variant[3:-2]))
        return NothingKept(**est.get_params())
    if variant.startswith("dec"):
        return estimator(cell, decorrelation=float(variant[3:]))
    raise ValueError(f"unknown variant {variant!r}")


def eigen_z_sds(samples, truths):
    """z-score sds along each fit's posterior eigen-directions, narrowest first."""
    z = []
    for draws, theta in zip(samples, truths):
        w, Q = np.linalg.eigh(np.cov(draws.T))
        z.append(((draws.mean(0) - theta) @ Q) / np.sqrt(w))
    return np.asarray(z).std(0)


def released_vif(X, epsilon, seed, share=0.1):
    """The largest variance inflation factor among the features that the released Gram
    matrix shows (centred with its intercept row; eigenvalues floored at 1e-3 of the
    largest): a statistic a release-side gate could read."""
    from skdpvi.linear_model import _logistic_decorrelation as dec

    noise = dec.gram_noise_multiplier(epsilon, 1e-5, share)
    V, lam = dec.private_gram_rotation(X, True, noise, np.random.default_rng(seed))
    G = (V * lam) @ V.T
    n = G[-1, -1]
    m = G[-1, :-1] / n
    C = G[:-1, :-1] / n - np.outer(m, m)
    w, Q = np.linalg.eigh(C)
    C = (Q * np.maximum(w, 1e-3 * w.max())) @ Q.T
    sd = np.sqrt(np.diag(C))
    return float(np.diag(np.linalg.inv(C / np.outer(sd, sd))).max())


def print_released_vifs(cells, n=20):
    for cell in cells:
        v = [released_vif(simulate(_rule_cell(cell), s)[1], CELLS[cell][4], s) for s in range(n)]
        print(f"{cell}: released max VIF median {np.median(v):.2f} "
              f"({min(v):.2f}-{max(v):.2f}, {n} data sets)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", choices=sorted(CELLS))
    parser.add_argument("--variants", nargs="+", default=["default", "dec0.1"])
    parser.add_argument("--n-sim", type=int, default=200)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tag", default="",
                        help="suffix of the results file (runs of another K or seed apart)")
    parser.add_argument("--released-vif", action="store_true",
                        help="only print the released Gram matrix's largest VIF per cell")
    args = parser.parse_args()
    if args.released_vif:
        return print_released_vifs(args.cells)
    floor = rmse_floor(args.n_sim)
    for cell in args.cells:
        n_params = CELLS[cell][1] + 1
        refs = prior_scale(cell) * np.random.default_rng(12345).standard_normal(
            (args.n_sim, n_params))
        payload = {"machine": machine(), "n_sim": args.n_sim, "floor": floor, "cell": cell,
                   "design": CELLS[cell], "variants": {}}
        name = f"ablation_logistic_decorrelation_{cell}{args.tag}"
        earlier = os.path.join(HERE, "..", "results", f"{name}.json")
        if os.path.exists(earlier):  # variants of earlier runs on the same seeds stay
            with open(earlier) as f:
                kept = json.load(f)
            if kept.get("n_sim") == args.n_sim:
                payload["variants"].update(kept["variants"])
        print(f"{cell} {CELLS[cell]}: K = {args.n_sim}; calibrated {floor['mean']:.3f} "
              f"(90 % {floor['q05']:.3f}-{floor['q95']:.3f})", flush=True)
        for variant in args.variants:
            start = time.perf_counter()
            study = run_tarp_study(make(cell, variant), CellSimulator(cell),
                                   n_simulations=args.n_sim, n_jobs=args.n_jobs,
                                   random_state=args.seed)
            seconds = time.perf_counter() - start
            prior = tarp_coverage(study.samples, study.theta_true, references=refs).rmse
            cover = study.interval_coverage(0.9)
            z = study.z_scores()
            eig = eigen_z_sds(study.samples, study.theta_true)
            row = {"tarp_posterior": float(study.rmse), "tarp_prior": float(prior),
                   "coverage_90_per_param": cover.tolist(),
                   "z_sd_per_param": z.std(0).tolist(), "z_mean_per_param": z.mean(0).tolist(),
                   "eigen_z_sd": eig.tolist(),
                   "ellipsoid_coverage_90": study.ellipsoid_coverage(0.9), "seconds": seconds,
                   "fit_warnings": [{k: w[k] for k in ("category", "count", "message")}
                                    for w in study.fit_warnings]}
            payload["variants"][variant] = row
            print(f"  {variant:<8} TARP {study.rmse:.3f} / {prior:.3f}, coverage "
                  f"{cover.min():.2f}-{cover.max():.2f}, z sd {z.std(0).min():.2f}-"
                  f"{z.std(0).max():.2f}, ellipsoids {row['ellipsoid_coverage_90']:.2f}, "
                  f"eigen z sd narrowest {eig[0]:.2f} widest {eig[-1]:.2f} "
                  f"({seconds:.0f} s)", flush=True)
            save(name, payload)


if __name__ == "__main__":
    main()
