"""Speed of the lockstep engine (run_dpvi_batched) against one run_dpvi per data set.

The TARP problems: the 10-D linear regression of Table 2 (N = 5000, 12 parameters)
and the Gamma-Exponential model of Table 1 (N = 5000, 1 parameter), kappa = 0.1, on
one thread (as the benchmark workers run). For each problem: milliseconds per
simulation-step of sequential run_dpvi calls (timed on 8 data sets: a single run's
cost does not depend on R) and of one run_dpvi_batched call on R data sets, measured
in the same process, one after the other.

Run: python benchmarks/bench_batched.py [--steps 1000] [--runs 8 32 64]
"""

import argparse
import time

import numpy as np
import torch

from _common import machine, save
from skdpvi.datasets import make_gamma_exponential, make_nig_linear_regression
from skdpvi.dpvi import run_dpvi, run_dpvi_batched
from skdpvi.models import GammaExponentialModel, LinearRegressionModel

PROBLEMS = {
    "linear (Table 2)": (LinearRegressionModel(10),
                         lambda k: make_nig_linear_regression(5000, random_state=k)[:2], 61.3),
    "gamma-exponential (Table 1)": (GammaExponentialModel(),
                                    lambda k: (make_gamma_exponential(5000, random_state=k)[0],),
                                    2.0),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--runs", type=int, nargs="+", default=[8, 32, 64])
    args = parser.parse_args()
    torch.set_num_threads(1)
    payload = {"machine": machine(), "steps": args.steps, "rows": []}
    print(f"{'problem':<30}{'R':>4}{'sequential ms/sim-step':>25}{'batched':>10}{'speed-up':>10}")
    for name, (model, simulate, clip) in PROBLEMS.items():
        kwargs = dict(noise_multiplier=100.0, clip_norm=clip, sampling_rate=0.1,
                      n_steps=args.steps, burn_in=args.steps // 5, preconditioner=1e3)
        data = [simulate(k) for k in range(max(args.runs))]
        # a single run's cost does not depend on R: time it once, on 8 data sets
        n_seq = min(8, len(data))
        start = time.perf_counter()
        for k in range(n_seq):
            run_dpvi(model, data[k], random_state=k, **kwargs)
        sequential = (time.perf_counter() - start) / (n_seq * args.steps) * 1e3
        for n_runs in args.runs:
            start = time.perf_counter()
            run_dpvi_batched(model, data[:n_runs], random_states=range(n_runs), **kwargs)
            batched = (time.perf_counter() - start) / (n_runs * args.steps) * 1e3
            print(f"{name:<30}{n_runs:>4}{sequential:>25.3f}{batched:>10.3f}"
                  f"{sequential / batched:>9.1f}x")
            payload["rows"].append({"problem": name, "runs": n_runs, "sequential_ms": sequential,
                                    "batched_ms": batched})
    save("bench_batched", payload)


if __name__ == "__main__":
    main()
