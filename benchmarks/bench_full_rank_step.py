"""Cost per step of the full-rank engine: Monte Carlo draws against closed-form gradients.

Issue 14's design (``logistic_correlated.simulate``: 10,000 rows, six equicorrelated
features and a one-hot block of four, 11 parameters) with the default estimator's
full-rank mechanism (``DPBayesianLogisticRegression(onehot_blocks=[[6, 7, 8, 9]])``,
epsilon 1), :func:`~skdpvi.dpvi.run_dpvi_full_rank` on one torch thread, the two
kinds of gradient interleaved ``--reps`` times in one process (the closed form's
Monte Carlo draws are still made, so the two runs see the same subsamples and noise).

Run: python benchmarks/bench_full_rank_step.py [--steps 2000] [--reps 3]
"""

import argparse
import time

import numpy as np
import torch

from _common import machine, save
from logistic_correlated import simulate
from skdpvi import DPBayesianLogisticRegression
from skdpvi.dpvi import run_dpvi_full_rank


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    X, y, _ = simulate(np.random.default_rng(0))
    est = DPBayesianLogisticRegression(onehot_blocks=[[6, 7, 8, 9]], epsilon=1.0,
                                       variational_family="full_rank", random_state=0)
    X_checked, y01 = est._fit_inputs(X, y)
    settings = est._engine_settings(X_checked.shape[0], X_checked.shape[1], X_checked,
                                    est._fit_seeds().engine)
    kw = {**est._full_rank_engine(settings), "n_steps": args.steps,
          "burn_in": args.steps // 2}
    rows = est._full_rank_rows(X_checked)
    times = {"monte_carlo": [], "closed_form": []}
    for rep in range(args.reps):
        for kind in times:
            start = time.perf_counter()
            run_dpvi_full_rank(rows, y01, random_state=rep,
                               **{**kw, "elbo_gradients": kind})
            times[kind].append((time.perf_counter() - start) / args.steps * 1e3)
    for kind, ms in times.items():
        print(f"{kind:<12} {np.median(ms):.3f} ms per step (runs: "
              f"{', '.join(f'{t:.3f}' for t in ms)})")
    ratio = np.median(times["closed_form"]) / np.median(times["monte_carlo"])
    print(f"closed form / Monte Carlo: {ratio:.2f}")
    save("bench_full_rank_step", {"machine": machine(), "args": vars(args),
                                  "ms_per_step": times, "ratio": float(ratio)})


if __name__ == "__main__":
    main()
