"""Large N: time per DP-SGD step and peak memory of a fit against the size of the input.

Fits ``DPBayesianLogisticRegression`` (defaults but for max_iter, and the exact
post-processing) on simulated float32 data with N = 10^5, 10^6, 10^7 rows and
d = 20, 100 features, each in a fresh process: the data are drawn in memory
(float32, kept float32), a small fit warms up the imports and the accountant, then
the fit is timed. Reported: seconds per 1,000 DP-SGD steps (the engine's share of
the fit, measured on ``--steps`` steps: fewer for the largest data, see the table),
the expected batch kappa N, and the peak resident memory of the process during
the fit above what it used before, as a multiple of the input array's size. One
more run reads the 10^7 x 100 data from a ``numpy.memmap`` (written to --tmp), and
one shows the progress bar of ``verbose=1``. ``--decorrelation SHARE`` fits with
that option (the Gram release and the fit in its eigenbasis) instead of the default.

glibc keeps freed blocks of the per-step temporaries for reuse, so the resident
size exceeds the live memory; ``--malloc-trim`` reruns with
``MALLOC_MMAP_THRESHOLD_=65536``, under which freed blocks return to the system, to
show the live peak.

Run: python benchmarks/bench_scaling.py [--sizes 1e5 1e6 1e7] [--dims 20 100] [--plot]
"""

import argparse
import json
import os
import subprocess
import sys

from _common import RESULTS_DIR, machine, save

DEFAULT_STEPS = {10**5: 2000, 10**6: 200, 10**7: 30}


def child(n, d, steps, memmap_path, verbose, n_threads, decorrelation=None):
    """One measurement, in a fresh process; prints a JSON line."""
    import resource
    import time

    import numpy as np
    import psutil

    import skdpvi.linear_model._base as base
    from skdpvi import DPBayesianLogisticRegression

    rng = np.random.default_rng(0)
    w = (rng.normal(size=d) / np.sqrt(d)).astype(np.float32)
    if memmap_path:
        if not os.path.exists(memmap_path):
            mm = np.lib.format.open_memmap(memmap_path, mode="w+", dtype=np.float32,
                                           shape=(n, d))
            for s in range(0, n, 10**6):
                mm[s:s + 10**6] = rng.standard_normal((min(10**6, n - s), d), dtype=np.float32)
            mm.flush()
            del mm
        X = np.load(memmap_path, mmap_mode="r")
    else:
        X = rng.standard_normal((n, d), dtype=np.float32)
    y = np.empty(n, dtype=np.float32)
    for s in range(0, n, 10**6):
        y[s:s + 10**6] = X[s:s + 10**6] @ w + rng.logistic(size=len(y[s:s + 10**6])) > 0
    kwargs = dict(max_iter=steps, inference="exact", n_posterior_samples=200, random_state=0,
                  decorrelation=decorrelation)
    if n_threads:
        os.environ["SKDPVI_NUM_THREADS"] = str(n_threads)
    DPBayesianLogisticRegression(**kwargs).fit(X[:5000], y[:5000])  # imports, accountant
    engine = {}
    run_dpvi = base.run_dpvi

    def timed(**kw):
        start = time.perf_counter()
        out = run_dpvi(**kw)
        engine["seconds"] = time.perf_counter() - start
        return out

    base.run_dpvi = timed
    before = psutil.Process().memory_info().rss
    start = time.perf_counter()
    DPBayesianLogisticRegression(**kwargs, verbose=verbose).fit(X, y)
    total = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(dict(n=n, d=d, steps=steps, memmap=bool(memmap_path), fit_seconds=total,
                          engine_seconds=engine["seconds"],
                          per_1000_steps=engine["seconds"] * 1000 / steps,
                          batch=0.1 * n, input_bytes=int(X.nbytes),
                          rss_before=before, rss_peak=peak,
                          extra_over_input=(peak - before) / X.nbytes,
                          threads=n_threads or "default", decorrelation=decorrelation)))


def run_child(n, d, steps, memmap_path="", verbose=0, n_threads="", env=None,
              decorrelation=None):
    cmd = [sys.executable, __file__, "--child", str(n), str(d), str(steps),
           memmap_path or "-", str(verbose), n_threads or "-", str(decorrelation or "-")]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env,
                         cwd=os.path.dirname(os.path.abspath(__file__)))
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    for d, marker in ((20, "o"), (100, "s")):
        sel = sorted((r for r in rows if r["d"] == d and not r["memmap"]
                      and r["threads"] == "default"), key=lambda r: r["n"])
        if not sel:
            continue
        ax1.loglog([r["batch"] for r in sel], [r["per_1000_steps"] for r in sel],
                   marker=marker, label=f"d = {d}")
        ax2.semilogx([r["n"] for r in sel], [1 + r["extra_over_input"] for r in sel],
                     marker=marker, label=f"d = {d}")
    xs = [r["batch"] for r in rows]
    if xs:
        lo, hi = min(xs), max(xs)
        ref = min(r["per_1000_steps"] for r in rows if r["batch"] == lo)
        ax1.loglog([lo, hi], [ref, ref * hi / lo], "k:", label="linear in kappa N")
    ax1.set_xlabel("expected batch kappa N (rows)")
    ax1.set_ylabel("seconds per 1,000 steps")
    ax1.legend()
    ax2.axhline(1.5, color="k", ls=":", label="1.5x the input")
    ax2.set_xlabel("N (rows)")
    ax2.set_ylabel("peak memory / input size")
    ax2.set_ylim(0.9, None)
    ax2.legend()
    fig.suptitle("DPBayesianLogisticRegression on N x d float32 data (kappa = 0.1)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6, 1e7])
    parser.add_argument("--dims", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--steps", type=int, default=None,
                        help="steps per fit (default: 2000, 200, 20 for 1e5, 1e6, 1e7)")
    parser.add_argument("--tmp", default="/tmp", help="where the memmap file goes")
    parser.add_argument("--threads", action="store_true",
                        help="also run the largest sizes on two torch threads")
    parser.add_argument("--malloc-trim", action="store_true")
    parser.add_argument("--plot", default=None, help="save the scaling plot here")
    parser.add_argument("--decorrelation", type=float, default=None,
                        help="fit with decorrelation=SHARE; only the size grid runs "
                             "(no memmap or progress-bar runs)")
    parser.add_argument("--name", default="bench_scaling", help="results file name")
    args = parser.parse_args()
    payload = {"machine": machine(), "load_before": os.getloadavg(), "rows": []}
    print(f"load average before: {payload['load_before']}")
    print(f"{'N':>9} {'d':>4} {'steps':>6} {'s/1000 steps':>13} {'fit s':>7} "
          f"{'input MB':>9} {'peak/input':>11}  notes")

    def show(row, note=""):
        payload["rows"].append(row)
        print(f"{row['n']:>9.0e} {row['d']:>4} {row['steps']:>6} {row['per_1000_steps']:>13.2f} "
              f"{row['fit_seconds']:>7.1f} {row['input_bytes'] / 2**20:>9.0f} "
              f"{1 + row['extra_over_input']:>10.2f}x  {note}", flush=True)

    for n in (int(s) for s in args.sizes):
        for d in args.dims:
            steps = args.steps or DEFAULT_STEPS.get(n, 200)
            show(run_child(n, d, steps, decorrelation=args.decorrelation)[0],
                 f"decorrelation={args.decorrelation}" if args.decorrelation else "")
            if args.malloc_trim:
                env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
                show(run_child(n, d, steps, env=env)[0], "MALLOC_MMAP_THRESHOLD_=65536")
            if args.threads and n == max(int(s) for s in args.sizes):
                show(run_child(n, d, steps, n_threads="2")[0], "2 threads")
    if args.decorrelation:
        save(args.name, payload)
        return
    n, d = int(max(args.sizes)), max(args.dims)
    path = os.path.join(args.tmp, f"skdpvi_bench_{n}x{d}.npy")
    row, _ = run_child(n, d, args.steps or DEFAULT_STEPS.get(n, 200), memmap_path=path)
    show(row, "numpy.memmap input (mapped pages count as resident)")
    small = int(min(args.sizes))
    _, err = run_child(small, min(args.dims), args.steps or DEFAULT_STEPS.get(small, 200),
                       verbose=1)
    bar = [line for line in err.replace("\r", "\n").splitlines() if "DP-SGD" in line]
    middle = [line for line in bar if "<00:00" not in line and "?" not in line]
    payload["progress_bar"] = (middle[-1:] if middle else []) + bar[-1:]
    print("verbose=1 progress bar (stderr):", *payload["progress_bar"], sep="\n  ")
    payload["load_after"] = os.getloadavg()
    print(f"load average after: {payload['load_after']}")
    save(args.name, payload)
    if args.plot:
        plot(payload["rows"], args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        n, d, steps, path, verbose, threads, dec = sys.argv[2:9]
        child(int(n), int(d), int(steps), None if path == "-" else path, int(verbose),
              None if threads == "-" else threads, None if dec == "-" else float(dec))
    else:
        main()
