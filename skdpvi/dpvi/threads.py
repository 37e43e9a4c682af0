"""How many threads torch may use while DP-SGD runs.

A DP-SGD step is a few dozen small tensor operations (a batch of a few thousand rows
at most, in typical use); split over several threads, every one of them ends at a
barrier where the threads wait for each other. On a 2-core machine with another job
running, one of the two threads is always waiting for the core the other job holds:
the Adult fit took 380.8 s with torch's default two threads and 31.7 s with one (the
same numbers). So the engine runs on one thread by default and gives torch more only
for large batches, where each operation has enough work to share
(``n_threads="auto"``, see doc/performance.rst, "Threads"); the caller's setting is
restored afterwards.
"""

import threading
from contextlib import contextmanager

import torch

#: Expected gradient block (batch rows x weights per run, summed over runs) from
#: which ``n_threads="auto"`` lets torch use all its threads.
_MULTITHREAD_MIN_BLOCK = 1 << 24

_lock = threading.Lock()
_state = {"users": 0, "saved": None}


def _resolve_threads(n_threads, expected_block):
    """The thread count of a run: ``n_threads`` or, for "auto", 1 or torch's default."""
    if n_threads is None or n_threads == "auto":
        return None if expected_block >= _MULTITHREAD_MIN_BLOCK else 1
    n_threads = int(n_threads)
    if n_threads < 1:
        raise ValueError(f"n_threads must be 'auto' or an integer >= 1, got {n_threads}.")
    return n_threads


@contextmanager
def _limit_threads(n_threads):
    """Let torch use ``n_threads`` threads in the block (None: leave it as it is).

    Runs in several Python threads at once share the setting: the first to enter
    sets it, the last to leave restores the caller's.
    """
    if n_threads is None:
        yield
        return
    with _lock:
        if _state["users"] == 0:
            _state["saved"] = torch.get_num_threads()
            if _state["saved"] != n_threads:
                torch.set_num_threads(n_threads)
        _state["users"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["users"] -= 1
            if _state["users"] == 0 and torch.get_num_threads() != _state["saved"]:
                torch.set_num_threads(_state["saved"])
