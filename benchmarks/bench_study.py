"""Time of a TARP study through the public API: batched tasks against one fit per job.

The Table 2 cell: ``DPBayesianLinearRegression()`` with its defaults (epsilon 1,
T = 10,000, the statistics posterior, ...), data from
``skdpvi.datasets.make_nig_linear_regression(5000)``, TARP in the unconstrained space.
With ``--model logistic``: issue 14's design (``logistic_correlated.simulate``: six
equicorrelated features and a one-hot block of four, 10,000 rows, 11 parameters)
with ``DPBayesianLogisticRegression(onehot_blocks=[[6, 7, 8, 9]])``'s defaults, which fit the full-rank family
there (lockstep: ``run_dpvi_full_rank_batched``).
``run_tarp_study`` runs K simulations in tasks of ``batch_size`` (default "auto",
64): each task fits its simulations together (DP-SGD in lockstep,
``run_dpvi_batched``). The one-fit-per-job path (``batch_size=1``) is timed on a
smaller K in the same run and extrapolated linearly to K (its simulations are
independent and equally expensive). Besides the wall time, the CPU time of all the
processes (the workers included) is reported: on a machine shared with other jobs it
says what the study costs, and divided by the number of workers, how long it takes
on idle cores.

With ``--dask`` the batched study runs on a ``distributed.LocalCluster`` (one
single-threaded worker process per job) through ``joblib.parallel_backend("dask")``,
as on a real cluster; its results are checked against a local run when
``--check`` is given.

Run: python benchmarks/bench_study.py [--n-sim 500] [--slow-n-sim 16] [--n-jobs 2] [--dask]
     python benchmarks/bench_study.py --model logistic --n-sim 128 --slow-n-sim 8
"""

import argparse
import os
import time

import numpy as np

from _common import machine, save
from skdpvi import DPBayesianLinearRegression, DPBayesianLogisticRegression
from skdpvi.datasets import make_nig_linear_regression
from skdpvi.metrics import run_tarp_study


class Simulator:
    """Table 2's simulator: theta from the NIG prior, N = 5000 rows given theta."""

    def __init__(self, n_samples=5000):
        self.n_samples = n_samples

    def __call__(self, rng):
        X, y, theta = make_nig_linear_regression(self.n_samples, random_state=rng)
        return theta, X, y


def cpu_seconds():
    """CPU time (user + system) of this process and all its children, alive or not."""
    import resource

    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total + ended.ru_utime + ended.ru_stime


def logistic_simulator(rng):
    """Issue 14's design (``logistic_correlated.simulate``), as (theta, X, y)."""
    from logistic_correlated import simulate

    X, y, theta = simulate(rng)
    return theta, X, y


def study(n_sim, batch_size, n_jobs, steps, seed=0, alpha_grid=None, model="linear"):
    """(result, wall seconds, CPU seconds of all processes) of one study."""
    if model == "linear":
        est, simulator = DPBayesianLinearRegression(max_iter=steps), Simulator()
    else:
        # the design's one-hot block declared, as issue 14's benchmark fits it
        est = DPBayesianLogisticRegression(max_iter=steps, onehot_blocks=[[6, 7, 8, 9]])
        simulator = logistic_simulator
    cpu, start = cpu_seconds(), time.perf_counter()
    result = run_tarp_study(est, simulator, n_simulations=n_sim, n_draws=1000,
                            unconstrained=True, n_jobs=n_jobs, random_state=seed,
                            batch_size=batch_size, alpha_grid=alpha_grid)
    return result, time.perf_counter() - start, cpu_seconds() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-sim", type=int, default=500)
    parser.add_argument("--slow-n-sim", type=int, default=16,
                        help="simulations timed on the one-fit-per-job path (0: skip)")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--batch-size", default="auto")
    parser.add_argument("--model", choices=["linear", "logistic"], default="linear")
    parser.add_argument("--dask", action="store_true", help="run on a LocalCluster")
    parser.add_argument("--check", action="store_true",
                        help="with --dask: also run locally and compare the results")
    args = parser.parse_args()
    batch = args.batch_size if args.batch_size == "auto" else int(args.batch_size)
    payload = {"machine": machine(), "n_sim": args.n_sim, "steps": args.steps,
               "n_jobs": args.n_jobs, "batch_size": args.batch_size, "dask": args.dask,
               "model": args.model, "load_before": os.getloadavg()}
    print(f"load average before: {payload['load_before']}")
    if args.dask:
        import joblib
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=args.n_jobs, threads_per_worker=1,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            print(f"cluster: {client}")
            with joblib.parallel_backend("dask"):
                fast, seconds, cpu = study(args.n_sim, batch, -1, args.steps)
        print(f"batched study on the LocalCluster ({args.n_jobs} workers): K={args.n_sim} "
              f"in {seconds:.1f} s, {cpu:.0f} CPU-s; TARP RMSE {fast.rmse:.4f}")
        payload.update(dask_seconds=seconds, dask_cpu_seconds=cpu, rmse=float(fast.rmse))
        if args.check:
            local, local_seconds, _ = study(args.n_sim, batch, args.n_jobs, args.steps)
            same = np.array_equal(local.samples, fast.samples)
            print(f"local run: {local_seconds:.1f} s, RMSE {local.rmse:.4f}; "
                  f"identical draws: {same}")
            payload.update(local_seconds=local_seconds, identical=bool(same))
    else:
        fast, seconds, cpu = study(args.n_sim, batch, args.n_jobs, args.steps,
                                   model=args.model)
        print(f"batched study: K={args.n_sim} in {seconds:.1f} s ({seconds / 60:.2f} min), "
              f"{cpu:.0f} CPU-s (= {cpu / args.n_jobs / 60:.2f} min on {args.n_jobs} idle "
              f"cores); TARP RMSE {fast.rmse:.4f}")
        payload.update(batched_seconds=seconds, batched_cpu_seconds=cpu, rmse=float(fast.rmse))
        if args.slow_n_sim:
            slow_k = max(args.slow_n_sim, 2 * args.n_jobs)
            # fewer simulations than the 21 credibility levels: a coarser TARP grid
            _, slow, slow_cpu = study(slow_k, 1, args.n_jobs, args.steps,
                                      alpha_grid=np.linspace(0, 1, min(slow_k, 21)),
                                      model=args.model)
            per_sim, per_cpu = slow / slow_k, slow_cpu / slow_k
            print(f"one fit per job: K={slow_k} in {slow:.1f} s, {slow_cpu:.0f} CPU-s: "
                  f"{per_sim:.2f} s and {per_cpu:.2f} CPU-s per simulation -> K={args.n_sim} "
                  f"extrapolated: {per_sim * args.n_sim:.0f} s, {per_cpu * args.n_sim:.0f} "
                  f"CPU-s; speed-up of the batched path {per_sim * args.n_sim / seconds:.1f}x "
                  f"(wall), {per_cpu * args.n_sim / cpu:.1f}x (CPU)")
            payload.update(slow_n_sim=slow_k, slow_seconds=slow, slow_cpu_seconds=slow_cpu,
                           slow_extrapolated=per_sim * args.n_sim,
                           slow_cpu_extrapolated=per_cpu * args.n_sim,
                           speedup=per_sim * args.n_sim / seconds,
                           speedup_cpu=per_cpu * args.n_sim / cpu)
    payload["load_after"] = os.getloadavg()
    print(f"load average after: {payload['load_after']}")
    save("bench_study" + ("_dask" if args.dask else "")
         + ("_logistic" if args.model == "logistic" else ""), payload)


if __name__ == "__main__":
    main()
