"""Credible intervals of private linear regression: noise-aware vs naive, one run.

Simulates the paper's 10-D Bayesian linear regression (5,000 rows, a
normal-inverse-gamma prior; ``skdpvi.datasets.make_nig_linear_regression``),
fits ``DPBayesianLinearRegression`` once under epsilon=0.3, and compares the
90% credible intervals of two posteriors built from the SAME private run:

- the noise-aware posterior (``est.posterior_``, the default post-processing),
  which also carries the uncertainty added by the DP noise;
- the naive last iterate of DP-SGD (``inference="last_iterate"``), which
  ignores that noise and is typically too narrow.

Prints a table (parameter, true value, both intervals, covered?) and saves a
plot of the intervals with the true values to linear_credible_intervals.png in
the working directory.

Run: python examples/linear_credible_intervals.py [--quick]
"""

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from skdpvi import DPBayesianLinearRegression, NoiseAwarePosterior  # noqa: E402
from skdpvi.datasets import make_nig_linear_regression  # noqa: E402
from skdpvi.noise_aware import sample_phi_star  # noqa: E402

CREDIBILITY = 0.9


def main(quick=False):
    start = time.perf_counter()
    X, y, theta = make_nig_linear_regression(5000, random_state=0)
    steps = 1000 if quick else 10_000
    est = DPBayesianLinearRegression(
        epsilon=0.3, max_iter=steps, random_state=0
    ).fit(X, y)
    print(f"10-D linear regression, {len(y)} rows: {steps} DP-SGD steps, "
          f"epsilon spent {est.epsilon_:.4f} (delta={est.delta_:g})")

    # The naive posterior from the same private run: phi* = last iterate.
    phi, _ = sample_phi_star(est.dpvi_result_, "last_iterate", 1000)
    naive = NoiseAwarePosterior(phi, est.posterior_.model, "last_iterate")
    posteriors = {"noise-aware": est.posterior_, "naive": naive}
    intervals = {name: post.interval(CREDIBILITY) for name, post in posteriors.items()}
    covered = {name: (lo <= theta) & (theta <= hi) for name, (lo, hi) in intervals.items()}

    names = list(est.param_names_)
    pct = int(round(100 * CREDIBILITY))
    print(f"\n{pct}% credible intervals")
    print(f"{'parameter':<15} {'true':>8} {'noise-aware interval':>22} {'covered':>8} "
          f"{'naive interval':>22} {'covered':>8}")
    for j, name in enumerate(names):
        row = f"{name:<15} {theta[j]:>8.4f}"
        for method in posteriors:
            lo, hi = intervals[method]
            mark = "yes" if covered[method][j] else "NO"
            row += f" {f'[{lo[j]:.4f}, {hi[j]:.4f}]':>22} {mark:>8}"
        print(row)
    for method in posteriors:
        lo, hi = intervals[method]
        print(f"{method}: {covered[method].sum()}/{len(names)} true values covered, "
              f"mean width {np.mean(hi - lo):.4f}")

    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.5))
    pos = np.arange(len(names))
    for offset, (method, color) in zip((-0.15, 0.15), zip(posteriors, ("C0", "C1"))):
        lo, hi = intervals[method]
        ax.hlines(pos + offset, lo, hi, color=color, linewidth=3, label=f"{method} {pct}% CI")
    ax.plot(theta, pos, "kx", label="true value")
    ax.set_yticks(pos, names)
    ax.invert_yaxis()
    ax.set_xlabel("parameter value")
    ax.set_title(f"DPBayesianLinearRegression, epsilon={est.epsilon}")
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    path = Path("linear_credible_intervals.png").resolve()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot saved to {path}")
    print(f"total time {time.perf_counter() - start:.1f}s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small, fast run")
    main(parser.parse_args().quick)
