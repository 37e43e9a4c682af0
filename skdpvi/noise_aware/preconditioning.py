"""A recording-phase step matrix from the released burn-in: the soft directions of a
correlated design relax as fast as uncorrelated coordinates.

With correlated features the curvature of the linear model's ELBO in the coefficient
means, ``E[1/sigma^2] X^T X``, has soft directions (equicorrelation 0.9 over ten
features: eigenvalues 0.1 N against 9 N). DP-SGD with a per-coordinate step relaxes
along them tens of times more slowly than along the stiff ones, so they barely wander
in the recording window and the trace identifies ``X^T X`` poorly exactly where the
posterior is most sensitive to it: the statistics posterior of such a design was more
than twice too wide (results pages).

The fix is a post-processing of the release: at burn-in, the released pairs give an
estimate ``G`` of ``X^T X`` (the statistics regression of
:mod:`skdpvi.noise_aware.statistics` on the pairs from half the burn-in on), and from
then on the features' means step by ``M = D^1/2 R_c^-1 D^-1/2`` times the plain step,
``D`` the diagonal of the features' block of ``G``, ``R_c`` its correlation matrix with
the eigenvalues clipped to ``[floor, 1]`` (the intercept keeps the plain step: with
uncentred features, speeding up the direction it shares with them made its intervals
too narrow): every soft direction relaxes at the rate of an uncorrelated coordinate, the
stiff ones keep their faster rate, none is slowed down. ``M`` is re-estimated from
all pairs so far at each tenth of the recording window, as the larger wander along
the soft directions identifies them better. For an uncorrelated design ``R = I`` and
nothing changes.

A cap on the relaxation rate. DP-SGD's step along a direction of curvature h relaxes
the means by the fraction ``lambda kappa h`` per step; above 2 it diverges (the
clipping bounds it to an oscillation), and h grows with the data: with N rows and
the noise variance sigma^2 a feature of root mean square s has ``h = N s^2 /
sigma^2``, and along the common direction of p features at equicorrelation rho
``N (1 + (p - 1) rho) / sigma^2``. One feature at sd 10 among unit-scale ones put
that fraction at 16, N = 100,000 rows of the paper's design at epsilon 3 at 3.6,
50,000 rows at equicorrelation 0.9 at 4.4 (results pages). So the matrix also damps every
direction of the rate matrix ``K = M lambda kappa H`` (H the curvature of the negative
ELBO in all the means, the intercept included, at the trace's latest point and the
released statistics) by ``f(K) = (I + (K / r)^4)^-1/4``: a direction relaxing at
rate k relaxes at ``k / (1 + (k / r)^4)^1/4``, the same below r / 2 (within 1.5 %)
and at most r = :data:`MAX_RELAXATION_RATE` above it. The Table 2 configurations
relax below 0.53 per step, where the cap slows a direction by at most 2 %. The
mechanism (sampling, clipping, noise) is untouched, so the
privacy guarantee is the same; the statistics posterior is exact along any path of
phi, so it needs no change either.
"""

import numpy as np

from ..utils.validation import is_real
from .statistics_fit import _shrinkage_fit

__all__ = ["recording_step_matrix", "correlation_step_matrix", "rate_cap"]

#: Smallest eigenvalue of the estimated correlation matrix: the step along a direction
#: grows by at most 1 / this.
EIGENVALUE_FLOOR = 0.05
#: The largest fraction of its distance to the optimum that the means cover per step
#: along any direction (the rate cap of the module docstring): at 1 a step lands on
#: the optimum (up to noise), at 2 DP-SGD diverges.
MAX_RELAXATION_RATE = 1.0


def rate_cap(rates, max_rate=MAX_RELAXATION_RATE):
    """``(I + (K / r)^4)^-1/4`` of a rate matrix K: multiplied into the step, every
    direction's rate k becomes ``k / (1 + (k / r)^4)^1/4`` (at most r).

    Parameters
    ----------
    rates : ndarray of shape (p, p)
        K, the fraction of the distance to the optimum that one step covers, as a
        matrix (its eigenvalues are the rates of its directions; real and positive
        for a positive definite curvature and step matrix).
    max_rate : float, default=MAX_RELAXATION_RATE

    Returns
    -------
    ndarray of shape (p, p)
        The identity where every rate is far below ``max_rate``.

    Examples
    --------
    >>> import numpy as np
    >>> np.round(rate_cap(np.diag([0.1, 16.0])), 3)
    array([[1.   , 0.   ],
           [0.   , 0.062]])
    """
    rates = np.asarray(rates, float)
    p = len(rates)
    if not np.all(np.isfinite(rates)):
        return np.eye(p)
    values, vectors = np.linalg.eig(rates / max_rate)
    if np.max(np.abs(values.imag)) > 1e-8 * max(np.max(np.abs(values)), 1.0) or \
            np.linalg.cond(vectors) > 1e8:
        # not a diagonalisable positive rate matrix: the rational cap k / (1 + k / r)
        return np.linalg.solve(np.eye(p) + rates / max_rate, np.eye(p))
    damping = (1.0 + np.maximum(values.real, 0.0) ** 4) ** -0.25
    return ((vectors * damping) @ np.linalg.inv(vectors)).real


def correlation_step_matrix(gram, floor=EIGENVALUE_FLOOR):
    """``D^1/2 R^-1 D^-1/2`` of a symmetric curvature estimate ``gram``, with the
    eigenvalues of the correlation matrix R clipped to ``[floor, 1]``.

    In units of the diagonal D, the drift of the means becomes ``R_c^-1 R``: a soft
    direction (eigenvalue below 1) relaxes at the rate of an uncorrelated coordinate,
    a stiff one (above 1) keeps its faster rate; no direction is slowed down.

    Parameters
    ----------
    gram : ndarray of shape (p, p)
        The estimate of the coefficients' curvature (``X^T X``).
    floor : float, default=EIGENVALUE_FLOOR
        The correlation matrix's eigenvalues are raised to at least this.

    Returns
    -------
    ndarray of shape (p, p)
        The identity where ``gram`` is diagonal (or unusable).

    Examples
    --------
    >>> import numpy as np
    >>> correlation_step_matrix(np.diag([4.0, 9.0]))
    array([[1., 0.],
           [0., 1.]])
    """
    gram = np.asarray(gram, float)
    if gram.ndim != 2 or gram.shape[0] != gram.shape[1]:
        raise ValueError(f"gram must be a square matrix, got shape {gram.shape}.")
    if not (is_real(floor) and 0 < floor <= 1):
        raise ValueError(f"floor must be a number in (0, 1], got {floor!r}.")
    gram = 0.5 * (gram + gram.T)
    p = len(gram)
    diag = np.diag(gram)
    if not (np.all(np.isfinite(gram)) and np.all(diag > 0)):
        return np.eye(p)
    root = np.sqrt(diag)
    corr = gram / np.outer(root, root)
    try:
        values, vectors = np.linalg.eigh(corr)
    except np.linalg.LinAlgError:
        return np.eye(p)
    inverse = (vectors / np.clip(values, floor, 1.0)) @ vectors.T
    return root[:, None] * inverse / root[None, :]


def recording_step_matrix(data_statistics, *, sampling_rate, noise_std, floor=EIGENVALUE_FLOOR,
                          learning_rate=None, max_rate=MAX_RELAXATION_RATE):
    """The ``step_matrix`` callable of :func:`~skdpvi.dpvi.run_dpvi` for a linear model.

    Parameters
    ----------
    data_statistics : LinearRegressionStatistics
        ``model.data_statistics(n_examples)``.
    sampling_rate : float
        kappa.
    noise_std : float or ndarray of shape (d,)
        The DP noise's standard deviation in each coordinate of the release
        (``noise_multiplier * clip_norm / preconditioner``).
    floor : float, default=EIGENVALUE_FLOOR
    learning_rate : float or ndarray of shape (d,), optional
        The plain step of each coordinate (``lambda * beta``). Given, the matrix also
        caps the means' relaxation rate (:func:`rate_cap`, the module docstring).
    max_rate : float or None, default=MAX_RELAXATION_RATE
        The cap; None: no cap.

    Returns
    -------
    callable
        ``(trace_phi, trace_grad) -> M`` of shape (d, d): the identity except the
        means' block: :func:`correlation_step_matrix` of the features' block of
        ``X^T X`` estimated from the released pairs it is given (the engine passes
        those from half the burn-in on) by the statistics regression with the
        mechanism's noise, times the rate cap at the trace's latest point.
        The engine calls it with ever longer arrays of the same run; the normal
        equations of the pairs already seen are kept (per run), so that all calls
        of a run together cost one pass over its pairs.
    """
    kappa = float(sampling_rate)
    seen = {}  # first pair of a run -> (pairs seen, P, h)

    def step_matrix(trace_phi, trace_grad):
        n, d = np.shape(trace_phi)
        matrix = np.eye(d)
        diverged = not (np.all(np.isfinite(trace_phi[-1]))
                        and np.all(np.isfinite(trace_grad[-1])))
        if n < 8 or diverged:  # a diverged run: the post-processing says so
            return matrix
        precision = np.broadcast_to((kappa / np.asarray(noise_std, float)) ** 2, (d,)).copy()
        precision[data_statistics.unused_coordinates()] = 0.0
        key = np.asarray(trace_phi[0]).tobytes() + np.asarray(trace_grad[0]).tobytes()
        start, P, h = seen.get(key, (0, 0.0, 0.0))
        if start > n:
            start, P, h = 0, 0.0, 0.0
        if start < n:  # only the pairs not seen before
            P_new, h_new, _ = data_statistics.normal_equations(
                np.asarray(trace_phi[start:], float),
                np.asarray(trace_grad[start:], float) / kappa, precision)
            P, h = P + P_new, h + h_new
        seen[key] = (n, P, h)
        try:
            eta = _shrinkage_fit(data_statistics, P, h)[0].mean
        except np.linalg.LinAlgError:
            return matrix
        block, curvature = data_statistics.step_curvature(eta)
        matrix[np.ix_(block, block)] = correlation_step_matrix(curvature, floor)
        if learning_rate is not None and max_rate is not None:
            block, hessian = data_statistics.mean_curvature(eta, np.asarray(trace_phi[-1], float))
            steps = np.broadcast_to(np.asarray(learning_rate, float), (d,))[block]
            square = np.ix_(block, block)
            rates = matrix[square] @ (steps[:, None] * kappa * hessian)
            matrix[square] = rate_cap(rates, max_rate) @ matrix[square]
        return matrix

    return step_matrix
