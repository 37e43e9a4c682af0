"""NumPy's and SciPy's BLAS on a given number of threads, for a block of code.

Small matrices gain nothing from a second BLAS thread, and on a busy machine its
spinning costs 10-100x (doc/performance.rst, "Threads"). The number of threads also
changes the rounding of some results: the accountant's noise multiplier differed in
its 15th digit with one and two BLAS threads, and through the noise scale a whole fit
did, so a study run serially gave other numbers than one run by single-threaded
workers. The accountant, DP-SGD and the statistics posterior therefore run on one.
"""

from contextlib import contextmanager

from threadpoolctl import ThreadpoolController

__all__ = ["limit_blas_threads"]


def _blas_limiter(n_threads):
    """Limit NumPy's and SciPy's BLAS to ``n_threads``; ``.restore_original_limits()``
    undoes it.

    Scoped to the BLAS libraries: ``threadpoolctl.threadpool_limits(user_api="blas")``
    would restore *every* library on exit, torch's OpenMP included, to its value when
    the limit was set, which left torch's OpenMP and MKL thread counts disagreeing
    after a fit (the next fit's small operations 2x slower, measured).
    """
    return ThreadpoolController().select(user_api="blas").limit(limits=n_threads)


@contextmanager
def limit_blas_threads(n_threads=1):
    """Run the block with NumPy's and SciPy's BLAS on ``n_threads`` threads.

    Small matrices gain nothing from a second BLAS thread, and on a busy machine its
    spinning costs 10-100x (doc/performance.rst, "Threads").
    """
    limiter = _blas_limiter(n_threads)
    try:
        yield
    finally:
        limiter.restore_original_limits()
