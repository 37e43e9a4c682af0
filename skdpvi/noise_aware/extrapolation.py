"""The optimum of the means when the window's curvature is known only roughly.

:func:`~skdpvi.noise_aware.linear_response_posterior` extrapolates the window's mean
along its mean gradient with one curvature K read off the wander; this module draws
the optimum with K uncertain as a window of few relaxation times leaves it (option
``curvature_uncertainty``). Measured on the results pages ("The extrapolation's
curvature uncertainty"), not the estimator's default.
"""

import numpy as np

__all__ = ["uncertain_extrapolation"]


def uncertain_extrapolation(curvature, stats, steps, noise_var, c, floor, prior_sd, n_draws,
                            random_state=None, max_sd=1.0, mode="shift"):
    """Draws of the means' optimum with the window's curvature known only roughly.

    The optimum of the means is the window's mean extrapolated along its mean gradient,
    ``x_bar - K^-1 g_bar``, combined with the gradient model's prior N(x_bar,
    prior_sd^2 I) (:func:`linear_response_posterior`). Where the window holds few
    relaxation times of a direction (a coefficient vector still relaxing outward, the
    *lag*), the extrapolation is long and K along it poorly known: the sample variance
    of an OU path over N relaxation times has a relative sd of about ``sqrt(2 / N)``,
    and the inverted reading is skewed towards stiff (``E[1 / s^2] > 1 / E[s^2]``), so
    the point estimate extrapolates too short. Along each eigen-direction i of the
    step-scaled curvature ``Gamma^1/2 K Gamma^1/2`` (rate r_i, ``N_i = n r_i``
    relaxation times) each draw takes the rate ``r_i exp(s_i z - s_i^2 / 2)``, z
    standard normal, ``s_i^2 = c / N_i`` (at most ``max_sd^2``); directions at the
    prior's floor (curvature known) keep the point estimate. Two ways to use the drawn
    rate, both measured on the results pages ("The extrapolation's curvature
    uncertainty"; neither is the estimator's default):

    - ``"shift"``: the point estimate's draws, each moved by the change of its
      extrapolation, ``e_i (r_i / r_i' - 1)``, longer on average;
    - ``"posterior"``: the linear-Gaussian posterior of the optimum at the drawn
      rate, its extrapolation, DP-noise error and the prior's gain all recomputed: a
      draw that reads a direction as soft errs widely and is pulled back to x_bar.

    The steps and the noise of the means are the same for every coordinate (the
    package's models precondition only the scales), so the step-scaled problem is
    diagonal in that eigenbasis.

    Parameters
    ----------
    curvature : ndarray of shape (p, p)
        K (:func:`window_curvature`).
    stats : TraceStatistics
        The window's sums; the first p coordinates are the means.
    steps, noise_var : ndarray of shape (p,)
        The diagonal of Gamma and of the released gradient's noise variance Q.
    c : float
        Variance multiplier (2 for the OU path's sample variance; 0: the point estimate).
    floor : float
        The prior's share of the curvature (``kappa / prior_scale^2``).
    prior_sd : float
        The gradient model's prior sd of the optimum around x_bar.
    n_draws : int
    random_state : int, Generator or None
    max_sd : float or None, default=1.0
        Upper bound of ``s_i`` (None: none; a direction read off a fraction of a
        relaxation time then gets factors with astronomically heavy tails).
    mode : {"shift", "posterior"}, default="shift"

    Returns
    -------
    draws : ndarray of shape (n_draws, p)
        Draws of the optimum of the means.
    """
    if mode not in ("shift", "posterior"):
        raise ValueError(f"mode must be 'shift' or 'posterior', got mode={mode!r}.")
    rng = np.random.default_rng(random_state)
    p, n = len(curvature), stats.count
    steps = np.asarray(steps, float)[:p]
    root = np.sqrt(steps)
    innovation = float(np.exp(np.mean(np.log(steps * np.asarray(noise_var, float)[:p]))))
    prior_var = float(prior_sd) ** 2 / float(np.exp(np.mean(np.log(steps))))
    rate, V = np.linalg.eigh(root[:, None] * np.asarray(curvature, float) * root[None, :])
    x_bar = V.T @ (stats.shift[:p] / root + stats.sum_x[:p] / (n * root))
    extrapolation = (V.T @ (root * stats.sum_g[:p] / n)) / rate
    data = rate > 1.0001 * float(floor) * (V**2).T @ steps
    s = np.where(data, np.sqrt(float(c) / np.maximum(rate * n, 1e-3)), 0.0)
    if max_sd is not None:
        s = np.minimum(s, float(max_sd))
    error = innovation / (n * rate**2)  # of the extrapolation, per direction

    def posterior(ratio):
        # x_bar - e, errs by `error`, combined with N(x_bar, prior_var) (gain form)
        gain = error * ratio**2 / (error * ratio**2 + prior_var)
        return x_bar - (1.0 - gain) * extrapolation * ratio, error * ratio**2 * (1.0 - gain)

    z = rng.standard_normal((int(n_draws), p))
    ratio = np.exp(-s * rng.standard_normal((int(n_draws), p)) + 0.5 * s**2)  # r / r'
    if mode == "posterior":
        mean, var = posterior(ratio)
    else:
        mean, var = posterior(np.ones(p))
        mean = mean - (ratio - 1.0) * extrapolation
    return ((mean + z * np.sqrt(var)) @ V.T) * root
