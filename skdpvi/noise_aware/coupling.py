"""The coupled error model of the means: phi* from the covariance of the wander.

The paper's gradient model is diagonal: it regresses each coordinate's released
gradient on that coordinate alone and treats the errors of phi* as independent. Where
the curvature H of the ELBO couples the coordinates (correlated features, and in
logistic regression every design, through p(1 - p) x x^T), the error of the trace mean
is correlated, and larger along the directions of low curvature.

Near the optimum the mean coordinates follow
``x_{t+1} = x_t - Gamma (K (x_t - phi*) + e_t)`` with K = kappa H the curvature of the
released gradient, Gamma the diagonal steps and e_t the gradient noise of known
covariance Q (the mechanism's (sigma C / beta)^2). The stationary covariance Sigma of
the wander then solves the Lyapunov equation
``Gamma K Sigma + Sigma K Gamma - Gamma K Sigma K Gamma = Gamma Q Gamma``: with Sigma
measured on the released trace it is a linear (Sylvester) equation for K, so the
dense curvature comes from the wander itself, without regressing gradients on
parameters. The trace mean errs by the long-run covariance of the process over the
window, ``K^-1 Q K^-1 / n``, and ``x_bar - K^-1 g_bar`` is the optimum's estimate
(the second term corrects for a trace that is still moving). For one step size and
isotropic noise this is ``K^-1 = 2 Sigma / (gamma tau^2)``: covariance
``4 Sigma^2 / (n gamma^2 tau^2)``.

Measured (``doc/results.rst``, "The coupled error model"): on UCI Adult it halves the
calibration error of the predictive probabilities at epsilon 1 and 0.3 (0.013 and
0.022 against 0.029 and 0.030, 10 repetitions), but on simulated designs with known
coefficients it is no better or worse than the diagonal model (K = 200; too narrow
at epsilon 0.1, where the window holds few relaxation times and the measured
covariance is noisy), so it is an option (``error_model="coupled"`` of
:class:`~skdpvi.DPBayesianLogisticRegression`), not the default. Post-processing
only: it reads the released trace's sums (``sum_xxt`` of
:class:`~skdpvi.dpvi.TraceStatistics`), so it costs no privacy and does not grow
with T.
"""

import numpy as np
from scipy.linalg import solve_sylvester

from ..utils.validation import (check_positive_array, check_positive_real, check_square_matrix,
                                is_real)

__all__ = ["coupled_means", "wander_curvature"]


def check_wander_inputs(covariance, steps, noise_var, n_steps=None, floor=None):
    """The wander's covariance S (p, p), steps and noise variances (p,) as float arrays,
    each finite and the vectors > 0, with a ValueError naming a bad one; ``n_steps``
    (a positive int) and ``floor`` (finite, >= 0) checked when given. Shared by the
    curvature readers of the wander (:func:`wander_curvature`,
    :func:`~skdpvi.noise_aware.window_curvature`, ...), which otherwise return NaN or
    a curvature of the wrong sign."""
    S = check_square_matrix("covariance", covariance)
    p = S.shape[0]
    steps = check_positive_array("steps", steps, shape=(p,))
    noise_var = check_positive_array("noise_var", noise_var, shape=(p,))
    if n_steps is not None and not (is_real(n_steps) and n_steps >= 1 and np.isfinite(n_steps)):
        raise ValueError(f"n_steps must be a number >= 1, got {n_steps!r}.")
    if floor is not None and not (is_real(floor) and 0 <= floor < np.inf):
        raise ValueError(f"floor must be a finite number >= 0, got {floor!r}.")
    return S, steps, noise_var


def wander_curvature(covariance, steps, noise_var, n_iter=50, rtol=1e-10):
    """The dense curvature K of the released gradient implied by the wander's covariance.

    Solves ``Gamma K S + S K Gamma - Gamma K S K Gamma = Gamma Q Gamma`` for a
    symmetric K (the stationary covariance S of constant-step SGD with steps Gamma
    and gradient noise Q on a quadratic with curvature K), by a few fixed-point
    rounds of the continuous-time (Sylvester) equation ``A K + K A^T = Q + K S K``
    with ``A = Gamma^-1 S`` (the correction is O(step); the rounds converge
    geometrically at the same rate).

    Parameters
    ----------
    covariance : ndarray of shape (p, p)
        S, the covariance of the coordinates over the recording window.
    steps : ndarray of shape (p,)
        The diagonal of Gamma (learning rate times preconditioner).
    noise_var : ndarray of shape (p,)
        The diagonal of Q.
    n_iter : int, default=50
        At most this many rounds of the discrete-time correction (0: the
        continuous-time solution).
    rtol : float, default=1e-10
        Stop when a round changes K by less than this, relative to its largest entry.

    Returns
    -------
    ndarray of shape (p, p)
        K, symmetric positive definite.

    Examples
    --------
    >>> import numpy as np
    >>> K = np.array([[2.0, 0.5], [0.5, 1.0]])
    >>> S = np.linalg.inv(K) * 0.01 * 1.0 / 2    # gamma tau^2 / 2 K^-1
    >>> np.round(wander_curvature(S, np.full(2, 0.01), np.ones(2), n_iter=0), 6)
    array([[2. , 0.5],
           [0.5, 1. ]])
    """
    S, steps, noise_var = check_wander_inputs(covariance, steps, noise_var)
    Q = np.diag(noise_var)
    A = S / steps[:, None]
    K = solve_sylvester(A, A.T, Q)
    for _ in range(n_iter):
        new = solve_sylvester(A, A.T, Q + K @ S @ K)
        new = 0.5 * (new + new.T)
        done = np.abs(new - K).max() <= rtol * np.abs(new).max()
        K = new
        if done:
            break
    return 0.5 * (K + K.T)


def coupled_means(phi_star, stats, *, n_means, learning_rate, noise_std, prior_sd=1.0,
                  random_state=None):
    """Redraw the mean coordinates of phi* draws from the coupled error model.

    Parameters
    ----------
    phi_star : ndarray of shape (n_samples, d)
        Draws of phi* from any backend (only columns ``n_means:`` are kept).
    stats : TraceStatistics
        With cross sums (``sum_xxt``), as every run of the engine records.
    n_means : int
        The first ``n_means`` coordinates of phi are the variational means.
    learning_rate : ndarray of shape (d,)
        Steps of the recording window (``DPVIResult.learning_rate``).
    noise_std : ndarray of shape (d,)
        Standard deviation of the DP noise of the released gradient per coordinate.
    prior_sd : float, default=1.0
        phi* ~ N(trace mean, prior_sd^2) per coordinate, the prior of the paper's
        gradient model.
    random_state : int, Generator or None

    Returns
    -------
    phi : ndarray of shape (n_samples, d)
        The draws with their first ``n_means`` columns replaced.
    info : dict
        ``curvature`` (K, (p, p)) and ``covariance`` (of the means of phi*).
    """
    check_positive_real("prior_sd", prior_sd)
    rng = np.random.default_rng(random_state)
    p = int(n_means)
    noise_var = np.asarray(noise_std, float)[:p] ** 2
    K = wander_curvature(stats.wander_covariance()[:p, :p],
                         np.asarray(learning_rate, float)[:p], noise_var)
    post_mean, post_cov = _optimum_of_means(stats, np.linalg.inv(K), noise_var, prior_sd)
    out = np.array(phi_star, dtype=float, copy=True)
    out[:, :p] = post_mean + rng.standard_normal((len(out), p)) @ np.linalg.cholesky(post_cov).T
    return out, {"curvature": K, "covariance": post_cov}


def _optimum_of_means(stats, K_inv, noise_var, prior_sd):
    """Posterior (mean, covariance) of the means' optimum given the curvature.

    The trace mean corrected by the mean gradient, ``x_bar - K^-1 g_bar``, errs by
    ``K^-1 Q K^-1 / n``; combined with the gradient model's prior N(x_bar, prior_sd^2 I)
    (in gain form, stable where the error is huge along a weakly restrained
    direction). ``K_inv`` is (p, p) for the first p coordinates of the trace.
    """
    p, n = len(K_inv), stats.count
    x_bar = stats.shift[:p] + stats.sum_x[:p] / n
    estimate = x_bar - K_inv @ (stats.sum_g[:p] / n)
    error = K_inv @ (noise_var[:, None] * K_inv) / n
    error = 0.5 * (error + error.T)
    gain = error @ np.linalg.inv(error + prior_sd**2 * np.eye(p))
    cov = error - gain @ error
    return estimate + gain @ (x_bar - estimate), 0.5 * (cov + cov.T)
