"""How many threads torch, and NumPy's BLAS, may use while DP-SGD runs.

A DP-SGD step is a few dozen tensor operations; split over several threads, every one
of them ends at a barrier where the threads wait for each other. On a machine whose
other cores are busy, one thread always waits for a core another job holds: a
default Adult fit took 380.8 s with torch's two default threads on a 2-core machine
with another job running, and 31.7 s with one (the same numbers). Large batches do
not escape it: with 10^7 rows (10^6 per step) one thread was 1.5-2x faster than two
on the same busy machine (doc/performance.rst, "Threads"). So the engine runs on one
thread, unless told otherwise by its ``n_threads`` argument or, for the estimators,
by the environment variable ``SKDPVI_NUM_THREADS``; the caller's setting is restored
afterwards. Parallelism across fits (joblib, dask) uses the other cores.

NumPy's BLAS gets the same limit for the run (through threadpoolctl): the linear
estimator's step matrix solves small regressions (77 x 77 for ten features) inside
the loop while the draw thread runs, and OpenBLAS's two spinning threads on a 2-core
machine made them about 35x slower (5.5 ms instead of 0.15; the default 10-D linear
fit's DP-SGD 5.9-6.4 s before, 5.0-5.4 s after; doc/performance.rst, "Threads").
joblib's workers already run on one BLAS thread each.

The compiled logistic steps (:mod:`~skdpvi.dpvi.logistic_kernel`) run on one thread
whatever this setting says.
"""

import os
import threading
from contextlib import contextmanager

import torch

from ..utils.blas import _blas_limiter

_lock = threading.Lock()
_state = {"users": 0, "saved": None, "blas": None}


def _resolve_threads(n_threads):
    """The thread count of a run: ``n_threads``, else ``$SKDPVI_NUM_THREADS``, else 1."""
    if n_threads is None:
        n_threads = os.environ.get("SKDPVI_NUM_THREADS", "1")
    try:
        value = int(n_threads)
    except (TypeError, ValueError):
        value = 0
    if value < 1:
        raise ValueError(
            f"n_threads (or $SKDPVI_NUM_THREADS) must be an integer >= 1, got {n_threads!r}."
        )
    return value


@contextmanager
def _limit_threads(n_threads):
    """Let torch and NumPy's BLAS use ``n_threads`` threads in the block.

    Runs in several Python threads at once share the setting: the first to enter
    sets it, the last to leave restores the caller's.
    """
    with _lock:
        if _state["users"] == 0:
            _state["saved"] = torch.get_num_threads()
            if _state["saved"] != n_threads:
                torch.set_num_threads(n_threads)
            _state["blas"] = _blas_limiter(n_threads)
        _state["users"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["users"] -= 1
            if _state["users"] == 0:
                if torch.get_num_threads() != _state["saved"]:
                    torch.set_num_threads(_state["saved"])
                _state["blas"].restore_original_limits()
                _state["blas"] = None
