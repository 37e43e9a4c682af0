"""Type checks of user-supplied parameters, shared by the accountant and the estimators.

Both reject booleans, which Python counts as integers: ``max_iter=True`` or
``epsilon=False`` is a mistake, not a number.
"""

import numbers

import numpy as np

__all__ = ["is_int", "is_real", "is_positive_real", "check_positive_real", "check_int"]


def is_int(x):
    """Whether ``x`` is an integer (Python or NumPy), and not a boolean.

    Examples
    --------
    >>> import numpy as np
    >>> is_int(3), is_int(np.int64(3)), is_int(3.0), is_int(True)
    (True, True, False, False)
    """
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def is_real(x):
    """Whether ``x`` is a real number (Python or NumPy, integers included), and not a boolean.

    Examples
    --------
    >>> import numpy as np
    >>> is_real(0.5), is_real(np.float32(0.5)), is_real(2), is_real("0.5"), is_real(False)
    (True, True, True, False, False)
    """
    return isinstance(x, (numbers.Real, np.floating)) and not isinstance(x, (bool, np.bool_))


def is_positive_real(x):
    """Whether ``x`` is a finite real number > 0 (Python or NumPy, not a boolean).

    Examples
    --------
    >>> import numpy as np
    >>> is_positive_real(np.int64(2)), is_positive_real(0.0), is_positive_real(np.inf)
    (True, False, False)
    """
    return bool(is_real(x) and np.isfinite(x) and x > 0)


def check_positive_real(name, value):
    """``value`` as a float if it is a finite real number > 0, else a ValueError naming
    ``name``.

    Examples
    --------
    >>> check_positive_real("prior_scale", 2)
    2.0
    """
    if not is_positive_real(value):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}.")
    return float(value)


def check_int(name, value, low=1):
    """``value`` as an int if it is an integer >= ``low`` (not a boolean), else a
    ValueError naming ``name``.

    Examples
    --------
    >>> check_int("n_components", 1000)
    1000
    """
    if not is_int(value) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}.")
    return int(value)


def check_positive_array(name, value, shape=None, allow_zero=False):
    """``value`` as a float array whose entries are finite and > 0 (>= 0 with
    ``allow_zero``), of ``shape`` when given; else a ValueError naming ``name``.

    Examples
    --------
    >>> check_positive_array("steps", [0.1, 0.2], shape=(2,))
    array([0.1, 0.2])
    """
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of numbers, got {value!r}.") from None
    if shape is not None and array.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {array.shape}.")
    low_ok = array >= 0 if allow_zero else array > 0
    if not np.all(np.isfinite(array) & low_ok):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound} everywhere, got {value!r}.")
    return array


def check_square_matrix(name, value, size=None):
    """``value`` as a finite float array of shape (p, p) (p = ``size`` when given);
    else a ValueError naming ``name``.

    Examples
    --------
    >>> check_square_matrix("covariance", [[1.0, 0.0], [0.0, 1.0]]).shape
    (2, 2)
    """
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of numbers, got {value!r}.") from None
    if array.ndim != 2 or array.shape[0] != array.shape[1] or (
            size is not None and array.shape[0] != size):
        want = "(p, p)" if size is None else f"({size}, {size})"
        raise ValueError(f"{name} must be a square matrix of shape {want}, got shape "
                         f"{array.shape}.")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    return array
