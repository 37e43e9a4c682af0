"""The wander's second-order (Jensen) bias of logistic regression's means, removed.

Constant-step DP-SGD never settles: over the recording window the variational means
wander around their average with a covariance S. The gradient models of phi* (the
diagonal one of the paper, the coupled and the dense one) are linear in phi, so they
read the *average* released gradient as the gradient at the average point; where the
gradient is not linear in phi the two differ by a second-order term, and the fitted
optimum is shifted by it. For logistic regression the term has a closed structure:
averaged over a Gaussian wander of the means, example i's expected sigmoid
``E_q sigma(x_i . theta)`` sees its logit's variance grow from ``v_i`` to
``v_i + w_i`` with ``w_i = x_i^T S x_i``, so the trace behaves as if the variational
posterior were wider, and a wider posterior's optimum has larger logits (the
sigmoid's average flattens; the probit approximation scales a logit by
``(1 + pi v / 8)^(-1/2)``). The means come out biased *outward*.

The shift, to first order in S. The mean released gradient of the negative ELBO
carries ``b = 1/2 sum_i E[sigma''_i] w_i x_i``. With the probit approximation
``sigma'' ~ -(pi / 8) m sigma'`` (exact for the Gaussian CDF, whose second
derivative is ``-m phi(m)``) and ``w_i`` replaced by its ``sigma'``-weighted average
``w = sum_i sigma'_i w_i / sum_i sigma'_i = tr(S H_lik) / H_lik,00`` (the intercept's
curvature is ``sum_i sigma'_i``)::

    b ~ -(pi / 16) w H_lik mu,      phi*_means = fitted + H^-1 b
                                               ~ fitted - (pi / 16) w (I - H^-1 / tau^2) mu

a shrink of the means by the relative amount ``pi w / 16`` (the prior's share
excepted). Everything in it comes from the release: ``tr(S H)`` is the covariance of
the released gradients with the means over the window, summed over the means'
coordinates (``kappa tr(H S) = sum_j Cov_t(g_j, mu_j)`` for a gradient linear near
the optimum; the per-coordinate sums ``sum g x`` that every run keeps), and
``H_00`` follows from the intercept's variational scale (``s_0^-2 = H_00 +
1 / tau^2`` at the mean-field optimum). No third derivative is estimated: the probit
structure ties it to the curvature, which is why this works where regressing the
released scale gradients on the means (a p x p estimate of the third derivatives
from DP noise) did not (results pages, "Logistic regression beyond Adult").

Measured (``benchmarks/ablation_logistic/wander_bias.py`` and ``designs.py``, results
page, "The wander's bias read off the release"): against the shift computed from the
private data's own third derivatives and S, cosine 0.99-1.00 and norm ratio 0.81-1.54
(medians 0.92-1.13 on four designs).

**Read through a curvature.** Over a finite window, ``Cov(g, x)`` is not ``K S``: the
noise of step t moves every later point of the window and so the window's mean,
which adds a term of the size of ``Q K^-1 / n`` (Q the noise covariance, n the
window's steps; measured 1.0-2.1 times it), about ``2 / n_relax`` of ``K S`` for a
window of ``n_relax`` relaxation times. On DP-SGD's traces of logistic regression the
coordinates' ``Cov(g_j, x_j)`` are 1.2-1.8 times ``(K S)_jj`` (medians; the more, the
fewer relaxations the window holds; the scales' coupling to the means adds under
1 %), and the stationary formula removes 1.7-10 times the outward overshoot of the
extrapolation where the trace still relaxes along the coefficient vector (15 Gaussian
features at epsilon 0.3: radial z-score -3.0, -3.9 with a faster burn-in, with the
dense posterior matched to the diagonal). Given the dense posterior's curvature ``K = kappa (H + I / tau^2)``,
``logistic_wander_width(..., curvature=K)`` reads ``tr(H S)`` as
``sum_jk (K / kappa - I / tau^2)_jk S_jk`` with S the window's covariance of the means
(trend included: a still-relaxing window's trend shifts the extrapolation as a wander
of the same covariance would, to first order; the extrapolation's own second-order
error, in the square of the window's lag, is not modelled, and removing it as well
was no better on these runs). Measured on cached runs of six designs, K = 200
(results pages, "The Jensen width read through the curvature"): with
``error_model="dense_matched"``, TARP with prior references 0.026-0.134 against
0.026-0.382 for the stationary formula; it under-corrects instead where a four times
faster burn-in removed the lag (0.282 against 0.411). Without a curvature (the
diagonal and coupled models) the stationary formula is used. **Known limit:** radial
z-scores of -1.3 to 0.0 remain on those designs, the most negative where the trace
lags most.
Post-processing only; no privacy cost, independent of T.
"""

import math

import numpy as np

from ..utils.validation import check_positive_real, is_real

__all__ = ["logistic_wander_width", "remove_wander_bias"]


def logistic_wander_width(stats, *, n_means, sampling_rate, prior_scale=1.0,
                          intercept_index=-1, curvature=None):
    """The wander's logit variance ``w = tr(S H_lik) / H_lik,00`` from a run's sums.

    Parameters
    ----------
    stats : TraceStatistics
        The run's sums over the recording window (``DPVIResult.stats``).
    n_means : int
        The first ``n_means`` coordinates of phi are the means, the next ``n_means``
        the scales' unconstrained parameters (softplus).
    sampling_rate : float
        kappa: the released gradient is ``kappa`` times the gradient of the negative
        ELBO.
    prior_scale : float, default=1.0
        Prior standard deviation tau of every parameter.
    intercept_index : int, default=-1
        Position of the intercept among the means (its curvature is
        ``sum_i sigma'_i``).
    curvature : ndarray of shape (n_means, n_means), optional
        A curvature ``K = kappa (H + I / tau^2)`` of the released gradients (e.g. the
        dense posterior's). Given, ``tr(S H)`` is read through it and the window's
        covariance S of the means (needs the cross sums ``sum_xxt``); without it,
        from the release's ``Cov(g, x)`` (module docstring).

    Returns
    -------
    float
        ``w`` >= 0, the typical extra logit variance that the wander adds
        (0 when the window's sums say nothing: no wander or no positive curvature).
    """
    p, n = int(n_means), stats.count
    kappa, tau2 = float(sampling_rate), float(prior_scale) ** 2
    mean_x = stats.sum_x[:p] / n
    if curvature is None:
        cov_gx = stats.sum_gx[:p] / n - (stats.sum_g[:p] / n) * mean_x
        var_x = stats.sum_xx[:p] / n - mean_x**2
        tr_hs = cov_gx.sum() / kappa - var_x.sum() / tau2
    else:
        H_lik = np.asarray(curvature, dtype=float) / kappa - np.eye(p) / tau2
        tr_hs = float(np.sum(H_lik * stats.wander_covariance()[:p, :p]))
    rho = stats.shift[p:2 * p] + stats.sum_x[p:2 * p] / n
    h00 = 1.0 / np.logaddexp(0.0, rho[intercept_index]) ** 2 - 1.0 / tau2  # s_0^-2 - 1/tau^2
    if not (np.isfinite(tr_hs) and np.isfinite(h00)) or tr_hs <= 0 or h00 <= 0:
        return 0.0
    return float(tr_hs / h00)


def remove_wander_bias(means, width, *, prior_scale=1.0, variances=None, covariance=None):
    """Means with the wander's outward bias removed: ``mu - (pi/16) w (mu - V mu / tau^2)``.

    Parameters
    ----------
    means : ndarray of shape (m, p)
        Draws of the optimum of the means, or mixture components' means.
    width : float
        ``w`` of :func:`logistic_wander_width`.
    prior_scale : float, default=1.0
    variances : ndarray of shape (m, p) or (p,), optional
        ``V`` as a variance per coordinate (mean-field components: ``s^2``).
    covariance : ndarray of shape (p, p), optional
        ``V`` as a full matrix (linear-response components' ``H^-1``). With neither,
        the prior's share ``V mu / tau^2`` is neglected.

    Returns
    -------
    ndarray of shape (m, p)
    """
    means = np.asarray(means, dtype=float)
    if not (is_real(width) and 0 <= width < np.inf):
        raise ValueError(f"width must be a finite number >= 0, got {width!r}.")
    check_positive_real("prior_scale", prior_scale)
    if variances is not None:
        prior_part = np.asarray(variances, dtype=float) * means
    elif covariance is not None:
        prior_part = means @ np.asarray(covariance, dtype=float).T
    else:
        prior_part = np.zeros_like(means)
    prior_part = prior_part / float(prior_scale) ** 2
    return means - (math.pi / 16.0) * float(width) * (means - prior_part)
