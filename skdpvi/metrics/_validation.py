"""Input checks shared by the metrics modules.

Private to :mod:`skdpvi.metrics`; the checks of one metric's own inputs stay with it.
"""

import numpy as np

from ..utils.validation import is_int

_INT_KINDS = {0: "a non-negative int", 1: "a positive int"}


def _seed_sequence(random_state):
    """Turn ``random_state`` into a :class:`numpy.random.SeedSequence`.

    Accepts None (fresh OS entropy, never NumPy's global state), a
    non-negative int, a SeedSequence (used as is), a Generator or a
    RandomState (one draw from it seeds the sequence).
    """
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(
            random_state.integers(0, 2**32, size=4, dtype=np.uint64).tolist()
        )
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(
            random_state.randint(0, 2**32, size=4, dtype=np.uint64).tolist()
        )
    if is_int(random_state):
        if random_state < 0:
            raise ValueError(
                f"random_state must be a non-negative int, got {random_state}."
            )
        return np.random.SeedSequence(int(random_state))
    raise ValueError(
        "random_state must be None, a non-negative int, a numpy SeedSequence, "
        f"Generator or RandomState; got {random_state!r}."
    )


def _as_float_array(x, name, ndim=None):
    """Convert to a finite float array, optionally checking its number of dims."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric array: {exc}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    return arr


def _check_int(value, name, minimum):
    """``value`` as an int if it is an integer (not a bool) >= ``minimum``."""
    if not is_int(value) or value < minimum:
        kind = _INT_KINDS.get(minimum, f"an int >= {minimum}")
        raise ValueError(f"{name} must be {kind}, got {value!r}.")
    return int(value)


def _check_n_bootstrap(n_bootstrap):
    """``n_bootstrap`` as an int: 0 (no bootstrap) or at least 2 (the spread of one
    replicate is 0, which would report a standard error of 0)."""
    n_bootstrap = _check_int(n_bootstrap, "n_bootstrap", 0)
    if n_bootstrap == 1:
        raise ValueError("n_bootstrap must be 0 (no bootstrap) or at least 2: one "
                         "replicate has no spread, got 1.")
    return n_bootstrap


def _check_in_unit_interval(arr, message):
    """Raise ``ValueError(message)`` unless every value of ``arr`` lies in [0, 1]."""
    if np.any((arr < 0) | (arr > 1)):
        raise ValueError(message)


def _check_levels(values, name):
    """Validate a 1-D grid of probabilities in [0, 1]; return it sorted."""
    arr = _as_float_array(values, name, ndim=1)
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty.")
    _check_in_unit_interval(arr, f"{name} must lie in [0, 1], got {arr}.")
    if np.unique(arr).size != arr.size:
        raise ValueError(f"{name} must not contain duplicates.")
    return np.sort(arr)
