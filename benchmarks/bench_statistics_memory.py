"""Peak memory and time of the statistics posterior at 40 features (tracemalloc).

``python benchmarks/bench_statistics_memory.py`` fits the default linear estimator's
DP-SGD (2,000 steps, 10,000 rows, 40 features, ``make_nig_linear_regression``) and
measures the post-processing alone: tracemalloc's peak of Python-allocated memory
(NumPy arrays included) during :func:`~skdpvi.noise_aware.statistics_posterior`.
``--keep-all`` keeps the covariance of every shrinkage-grid point and evaluates the
prior predictive in one call (the behaviour before the thirteenth session), for the
comparison in ``doc/performance.rst``.
"""

import argparse
import time
import tracemalloc
import warnings

import numpy as np

import skdpvi.noise_aware.statistics_fit as statistics_fit
import skdpvi.noise_aware.statistics_sampling as statistics_sampling
from skdpvi import DPBayesianLinearRegression
from skdpvi.datasets import make_nig_linear_regression
from skdpvi.dpvi import run_dpvi
from skdpvi.noise_aware import statistics_posterior


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep-all", action="store_true")
    args = parser.parse_args()
    if args.keep_all:
        statistics_fit._NEGLIGIBLE_LOG_WEIGHT = np.inf
        statistics_sampling._LOG_PRIOR_CHUNK = 10**9
    X, y, _ = make_nig_linear_regression(10_000, 40, random_state=0)
    est = DPBayesianLinearRegression(max_iter=2000, random_state=0)
    settings = est._engine_settings(*X.shape)
    result = run_dpvi(data=(X.astype(np.float32), y.astype(np.float32)), random_state=0,
                      **settings.engine)
    statistics = settings.engine["model"].data_statistics(len(X))
    tracemalloc.start()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, diagnostics = statistics_posterior(result, statistics, 1000, random_state=0)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    kept = int(np.sum(diagnostics["gamma_weights"] > 0))
    print(f"{'keep all' if args.keep_all else 'default'}: peak {peak / 1e6:.0f} MB, "
          f"{seconds:.1f} s, grid points with weight > 0: {kept} of "
          f"{len(diagnostics['gamma_weights'])}")


if __name__ == "__main__":
    main()
