"""Is the private posterior calibrated? A TARP simulation study, noise-aware vs naive.

Repeats, for k = 1..K: draw a true parameter from the normal-inverse-gamma prior
and a 10-D linear regression data set from it
(``skdpvi.datasets.make_nig_linear_regression``), fit
``DPBayesianLinearRegression`` under epsilon=0.3 and draw from its posterior.
``skdpvi.metrics.run_tarp_study`` runs the simulations in parallel (joblib)
and measures the expected coverage of the posterior credible regions with TARP
in the unconstrained parameter space, with bootstrap error bars.

Two reference-point schemes are reported from the same fits: "prior" (one
prior draw per simulation, made inside the study) and "posterior" (the
authors' scheme, computed afterwards from the stored draws with
``tarp_coverage``). The whole study is run twice: with the noise-aware
posterior (``inference="exact"``) and with the naive last iterate of DP-SGD
(``inference="last_iterate"``), which ignores the DP noise. A calibrated
posterior has coverage RMSE near 0 and its curve on the diagonal.

Prints the coverage RMSE (+- bootstrap standard error) of each combination and
saves the coverage curves to tarp_study.png in the working directory; the
per-parameter (marginal) RMSEs show which parameters are off. The full run (the
paper's setting: N=5,000 rows, T=10,000 steps; 100 simulations per study,
2 jobs) takes about half an hour on 2 cores; scale it with --n-simulations,
--max-iter and --n-jobs.

Run: python examples/tarp_study.py [--quick] [--n-simulations K] [--max-iter T] [--n-jobs J]
"""

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from skdpvi import DPBayesianLinearRegression  # noqa: E402
from skdpvi.datasets import make_nig_linear_regression  # noqa: E402
from skdpvi.metrics import run_tarp_study, tarp_coverage  # noqa: E402
from skdpvi.plotting import plot_coverage  # noqa: E402


class Simulator:
    """``simulator(rng) -> (theta, X, y)``: a prior draw and data given it.

    theta is ordered like the estimator's ``param_names_``: the coefficients,
    the intercept, then the noise variance. A module-level class, so that it
    pickles for the parallel workers.
    """

    def __init__(self, n_samples):
        self.n_samples = n_samples

    def __call__(self, rng):
        X, y, theta = make_nig_linear_regression(self.n_samples, random_state=rng)
        return theta, X, y


def prior_sampler(n, rng):
    """``n`` draws of theta from the same NIG prior, shape (n, 12)."""
    return np.array([make_nig_linear_regression(1, random_state=rng)[2] for _ in range(n)])


def main(quick=False, n_simulations=None, steps=None, n_jobs=None):
    start = time.perf_counter()
    if quick:  # a smoke run: TARP needs >= 21 simulations with the default grid
        defaults = dict(n_simulations=21, n_rows=500, steps=150, n_draws=200, n_jobs=1,
                        n_bootstrap=50)
    else:
        defaults = dict(n_simulations=100, n_rows=5000, steps=10_000, n_draws=1000, n_jobs=2,
                        n_bootstrap=500)
    n_simulations = n_simulations or defaults["n_simulations"]
    steps = steps or defaults["steps"]
    n_jobs = n_jobs or defaults["n_jobs"]
    n_rows, n_draws, n_bootstrap = (defaults[k] for k in ("n_rows", "n_draws", "n_bootstrap"))
    print(f"TARP study: {n_simulations} simulations of {n_rows} rows, {steps} DP-SGD "
          f"steps per fit, {n_draws} posterior draws, n_jobs={n_jobs}")

    curves, marginals, coverage90 = {}, {}, {}
    for inference in ("exact", "last_iterate"):
        t0 = time.perf_counter()
        study = run_tarp_study(
            DPBayesianLinearRegression(
                epsilon=0.3, max_iter=steps, inference=inference,
                n_posterior_samples=n_draws,
            ),
            Simulator(n_rows),
            n_simulations=n_simulations,
            n_draws=n_draws,
            references="prior",
            prior_sampler=prior_sampler,
            unconstrained=True,
            n_jobs=n_jobs,
            random_state=0,
            n_bootstrap=n_bootstrap,
        )
        curves[inference, "prior"] = study.tarp
        marginals[inference] = study.marginal
        coverage90[inference] = study.interval_coverage(0.9)
        curves[inference, "posterior"] = tarp_coverage(
            study.samples, study.theta_true, references="posterior",
            n_bootstrap=n_bootstrap, random_state=1,
        )
        print(f"  {inference}: {time.perf_counter() - t0:.1f}s, epsilon spent per fit "
              f"{np.nanmax(study.epsilons):.4f}")

    print("\njoint TARP coverage RMSE (lower is better; +- bootstrap standard error)")
    print(f"{'inference':<14} {'references':<11} {'coverage RMSE':>20}")
    for (inference, refs), res in curves.items():
        print(f"{inference:<14} {refs:<11} {f'{res.rmse:.4f} +- {res.rmse_se:.4f}':>20}")
    print('\nmarginal TARP coverage RMSE per parameter (references="prior")')
    print(f"{'parameter':<15} {'noise-aware':>20} {'naive':>20}")
    names = marginals["exact"].param_names or [str(j) for j in range(len(marginals["exact"]))]
    for j, name in enumerate(names):
        cells = "".join(
            f" {f'{m.rmse[j]:.4f} +- {m.rmse_se[j]:.4f}':>20}"
            for m in (marginals["exact"], marginals["last_iterate"])
        )
        print(f"{name:<15}{cells}")
    print("\n90% central intervals covering the truth (calibrated: 0.90)")
    for inference, label in (("exact", "noise-aware"), ("last_iterate", "naive")):
        print(f"{label:<15} " + " ".join(f"{c:.2f}" for c in coverage90[inference]))

    fig, axes = plt.subplots(1, 2, figsize=(10, 5.3), layout="constrained")
    for ax, refs in zip(axes, ("posterior", "prior")):
        for inference, label in (("exact", "noise-aware"), ("last_iterate", "naive")):
            plot_coverage(curves[inference, refs], ax=ax, label=label)
        ax.set_title(f'references="{refs}"')
    fig.suptitle(f"TARP coverage, DPBayesianLinearRegression, epsilon=0.3, "
                 f"{n_simulations} simulations")
    path = Path("tarp_study.png").resolve()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot saved to {path}")
    print(f"total time {time.perf_counter() - start:.1f}s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small, fast run")
    parser.add_argument("--n-simulations", type=int, help="simulations per study (>= 21)")
    parser.add_argument("--max-iter", type=int, help="DP-SGD steps per fit")
    parser.add_argument("--n-jobs", type=int, help="parallel joblib workers")
    args = parser.parse_args()
    main(args.quick, args.n_simulations, args.max_iter, args.n_jobs)
