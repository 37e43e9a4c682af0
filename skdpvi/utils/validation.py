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
    return is_real(x) and bool(np.isfinite(x)) and x > 0


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
