"""The compiled logistic kernel against the engine's torch step, across problem shapes.

For each design, ``run_dpvi`` with the default estimator's engine settings (mean
field, 10 Monte Carlo draws, its clip norm and step), on one thread, once with the
kernel (:mod:`skdpvi.dpvi.logistic_kernel`, forced on whatever its cost model says)
and once with the torch step, alternating ``--reps`` times; ms per step (minimum),
the rows per step B, the columns n and the kernel's stored row width w, what the cost
model chooses, and the largest difference of the final phi between the two. The cost
model's constants (``KERNEL_NS``, ``TORCH_NS``) were read off this table.

Run: python benchmarks/bench_logistic_kernel.py [--steps 1000] [--reps 2]
"""

import argparse
import os
import time

import numpy as np
import torch

import skdpvi.dpvi.logistic_kernel as kernel
import skdpvi.dpvi.loop as loop
from _common import machine, save
from skdpvi import DPBayesianLogisticRegression
from skdpvi.datasets import load_adult
from skdpvi.dpvi import run_dpvi


def gaussian(n_rows, n_features, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    y = (rng.random(n_rows) < 1 / (1 + np.exp(-0.3 * X @ rng.normal(size=n_features))))
    return X, y.astype(float)


def one_hot(n_rows, blocks, seed=0):
    rng = np.random.default_rng(seed)
    X = np.hstack([np.eye(b)[rng.integers(b, size=n_rows)] for b in blocks])
    y = rng.random(n_rows) < 1 / (1 + np.exp(-X @ rng.normal(scale=0.5, size=X.shape[1])))
    return X, y.astype(float)


def designs():
    X, y = load_adult(return_X_y=True)
    yield "Adult (56 features, 9-11 non-zeros a row)", X, y, 0.1
    for n_rows, n_features, rate in ((1000, 5, 0.1), (5000, 10, 0.1), (20000, 20, 0.1),
                                     (50000, 30, 0.02), (30000, 56, 0.1), (20000, 100, 0.05)):
        yield f"Gaussian, {n_features} features, {n_rows} rows", *gaussian(n_rows, n_features), rate
    yield "one-hot, 5 blocks of 8, 20000 rows", *one_hot(20000, (8,) * 5), 0.1
    yield "one-hot, 10 blocks of 10, 50000 rows", *one_hot(50000, (10,) * 10), 0.02
    # not prepared up front (above 32 MB as float32): the chunked row-sparse copy
    X, y = one_hot(400_000, (10,) * 10)
    yield "one-hot, 10 blocks of 10, 400000 rows", X.astype(np.float32), y, 0.005


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    chosen = kernel.kernel_layout
    rows = []
    for name, X, y, rate in designs():
        estimator = DPBayesianLogisticRegression(sampling_rate=rate,
                                                 variational_family="mean_field")
        settings = estimator._engine_settings(*X.shape, X=X, seed=0).engine
        settings = {**settings, "n_steps": args.steps, "burn_in": args.steps // 5}
        picked = []

        def spy(*a):
            picked.append(chosen(*a))
            return picked[-1]

        def forced(model, engine, data):
            return kernel._layout(data, lambda width, n: True)

        times, phis = {"kernel": [], "torch": []}, {}
        for path, layout in (("warm", forced), ("choice", spy)):
            loop.kernel_layout = layout
            run_dpvi(data=(X, y), random_state=0, **{**settings, "n_steps": 20, "burn_in": 4})
        for _ in range(args.reps):
            for path, layout in (("kernel", forced), ("torch", lambda *a: None)):
                loop.kernel_layout = layout
                start = time.perf_counter()
                phis[path] = run_dpvi(data=(X, y), random_state=0, **settings).phi
                times[path].append(1e3 * (time.perf_counter() - start) / args.steps)
        loop.kernel_layout = chosen
        width = int((X != 0).sum(1).max()) + 1
        row = dict(design=name, rows_per_step=len(X) * rate, n=X.shape[1] + 1,
                   width=width if width <= kernel.SPARSE_SHARE * (X.shape[1] + 1)
                   else X.shape[1] + 1,
                   kernel_ms=min(times["kernel"]), torch_ms=min(times["torch"]),
                   chooses="kernel" if picked and picked[0] is not None else "torch",
                   max_phi_difference=float(np.abs(phis["kernel"] - phis["torch"]).max()))
        rows.append(row)
        print(f"{name:<44} B {row['rows_per_step']:7.0f}  n {row['n']:3d}  w {row['width']:3d}  "
              f"kernel {row['kernel_ms']:6.3f}  torch {row['torch_ms']:6.3f} ms/step  "
              f"chooses {row['chooses']:<6}  |dphi| {row['max_phi_difference']:.1e}", flush=True)
    save("bench_logistic_kernel", {"machine": machine(), "steps": args.steps,
                                   "load": os.getloadavg(), "rows": rows})


if __name__ == "__main__":
    main()
