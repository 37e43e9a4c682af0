"""Time of a TARP study through the public API: batched tasks against one fit per job.

The Table 2 cell: ``DPBayesianLinearRegression()`` with its defaults (epsilon 1,
T = 10,000, emcee post-processing, ...), data from
``skdpvi.datasets.make_nig_linear_regression(5000)``, TARP in the unconstrained space.
``run_tarp_study`` runs K simulations in tasks of ``batch_size`` (default "auto",
32): each task fits its simulations together (DP-SGD in lockstep,
``run_dpvi_batched``). The one-fit-per-job path (``batch_size=1``) is timed on a
smaller K in the same run and extrapolated linearly to K (its simulations are
independent and equally expensive).

With ``--dask`` the batched study runs on a ``distributed.LocalCluster`` (one
single-threaded worker process per job) through ``joblib.parallel_backend("dask")``,
as on a real cluster; its results are checked against a local run when
``--check`` is given.

Run: python benchmarks/bench_study.py [--n-sim 500] [--slow-n-sim 16] [--n-jobs 2] [--dask]
"""

import argparse
import os
import time

import numpy as np

from _common import machine, save
from skdpvi import DPBayesianLinearRegression
from skdpvi.datasets import make_nig_linear_regression
from skdpvi.metrics import run_tarp_study


class Simulator:
    """Table 2's simulator: theta from the NIG prior, N = 5000 rows given theta."""

    def __init__(self, n_samples=5000):
        self.n_samples = n_samples

    def __call__(self, rng):
        X, y, theta = make_nig_linear_regression(self.n_samples, random_state=rng)
        return theta, X, y


def study(n_sim, batch_size, n_jobs, steps, seed=0):
    est = DPBayesianLinearRegression(max_iter=steps)
    start = time.perf_counter()
    result = run_tarp_study(est, Simulator(), n_simulations=n_sim, n_draws=1000,
                            unconstrained=True, n_jobs=n_jobs, random_state=seed,
                            batch_size=batch_size)
    return result, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-sim", type=int, default=500)
    parser.add_argument("--slow-n-sim", type=int, default=16,
                        help="simulations timed on the one-fit-per-job path (0: skip)")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--batch-size", default="auto")
    parser.add_argument("--dask", action="store_true", help="run on a LocalCluster")
    parser.add_argument("--check", action="store_true",
                        help="with --dask: also run locally and compare the results")
    args = parser.parse_args()
    batch = args.batch_size if args.batch_size == "auto" else int(args.batch_size)
    payload = {"machine": machine(), "n_sim": args.n_sim, "steps": args.steps,
               "n_jobs": args.n_jobs, "batch_size": args.batch_size, "dask": args.dask,
               "load_before": os.getloadavg()}
    print(f"load average before: {payload['load_before']}")
    if args.dask:
        import joblib
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=args.n_jobs, threads_per_worker=1,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            print(f"cluster: {client}")
            with joblib.parallel_backend("dask"):
                fast, seconds = study(args.n_sim, batch, -1, args.steps)
        print(f"batched study on the LocalCluster ({args.n_jobs} workers): K={args.n_sim} "
              f"in {seconds:.1f} s; TARP RMSE {fast.rmse:.4f}")
        payload.update(dask_seconds=seconds, rmse=float(fast.rmse))
        if args.check:
            local, local_seconds = study(args.n_sim, batch, args.n_jobs, args.steps)
            same = np.array_equal(local.samples, fast.samples)
            print(f"local run: {local_seconds:.1f} s, RMSE {local.rmse:.4f}; "
                  f"identical draws: {same}")
            payload.update(local_seconds=local_seconds, identical=bool(same))
    else:
        fast, seconds = study(args.n_sim, batch, args.n_jobs, args.steps)
        print(f"batched study: K={args.n_sim} in {seconds:.1f} s "
              f"({seconds / 60:.2f} min); TARP RMSE {fast.rmse:.4f}")
        payload.update(batched_seconds=seconds, rmse=float(fast.rmse))
        if args.slow_n_sim:
            slow_k = max(args.slow_n_sim, 2 * args.n_jobs)
            # n_simulations must reach the 21 credibility levels: time the first
            # slow_k fits of a 21-simulation study through a coarse grid instead
            est = DPBayesianLinearRegression(max_iter=args.steps)
            start = time.perf_counter()
            run_tarp_study(est, Simulator(), n_simulations=slow_k, n_draws=1000,
                           unconstrained=True, n_jobs=args.n_jobs, random_state=0,
                           batch_size=1, alpha_grid=np.linspace(0, 1, min(slow_k, 21)))
            slow = time.perf_counter() - start
            per_sim = slow / slow_k
            print(f"one fit per job: K={slow_k} in {slow:.1f} s, {per_sim:.2f} s per "
                  f"simulation -> K={args.n_sim} extrapolated: {per_sim * args.n_sim:.0f} s; "
                  f"speed-up of the batched path {per_sim * args.n_sim / seconds:.1f}x")
            payload.update(slow_n_sim=slow_k, slow_seconds=slow,
                           slow_extrapolated=per_sim * args.n_sim,
                           speedup=per_sim * args.n_sim / seconds)
    payload["load_after"] = os.getloadavg()
    print(f"load average after: {payload['load_after']}")
    save("bench_study" + ("_dask" if args.dask else ""), payload)


if __name__ == "__main__":
    main()
