"""The noise-aware posterior of a full-rank DPVI run (:func:`~skdpvi.dpvi.run_dpvi_full_rank`).

**The curvature from the stationarity of the scales.** For a quadratic negative log
joint with Hessian H, the negative ELBO of ``q = N(m, L L^T)`` has the gradient
``G = H L - L^-T`` in L. With ``L = diag(s) A``, ``A = I + U``, the run releases
``s_j G_jk`` for U_jk (k < j) and ``sigmoid(rho_j) sum_k G_jk A_jk`` for rho_j, and
constant-step SGD settles where their averages over the window vanish:

    sum_l H_jl E[s_j L_lk] = 0                                   (k < j)
    sum_l H_jl E[sigmoid(rho_j) (L A^T)_lj] = E[sigmoid(rho_j) / s_j]

``n (n + 1) / 2`` linear equations in the symmetric H (:func:`full_rank_curvature`),
whose coefficients are window averages the run accumulates. Reading H as
``(L_bar L_bar^T)^-1`` instead, from the window's mean of L, ignores the wander of U
(``E[L L^T]`` is larger than ``L_bar L_bar^T``), which made the curvature's diagonal
1.2-1.9 times too stiff on issue 14's design at epsilon 1. The mean-field analogue is
:func:`~skdpvi.noise_aware.mean_field_curvature` with ``wander=True``.

**The posterior.** With ``K = kappa H`` (the released gradient's curvature in m) the
optimum of the means is ``m_bar - K^-1 g_bar`` with error ``K^-1 Q K^-1 / n``
(Q the DP noise's variance, n the window's steps), combined with the gradient model's
prior ``N(m_bar, prior_sd^2 I)`` as in :mod:`~skdpvi.noise_aware.linear_response`; the
mixture's components are ``N(m*, H^-1)``, the full-rank optimum's covariance (its own
linear-response covariance: mean-field's under-statement of the marginal variances
does not arise). Post-processing only: it reads the release's window averages, so it
costs no privacy and does not grow with T.

**The curvature's noise.** The window averages carry DP noise, which spreads the
solved curvature's eigenvalues (too wide along some directions, too narrow along
others). ``shrinkage`` shrinks its off-diagonal part by its noise share, measured by
the two halves of the window (:func:`shrink_to_diagonal`); the estimator uses the
"radial" target (the diagonal plus the part along the means), measured as good or
better on six designs (results pages, "The full-rank default on the public API's
hold-outs, and in lockstep").

**Known limits** (results pages, "Clipping the full-rank blocks apart, and the full
rank as the default"): the wander correction through this curvature moves the
centre past the truth along the coefficient vector (radial z +0.43 -> -0.31 on ten
Gaussian features), yet it gives the best prior-reference TARP of the corrections
measured (none: 0.13-0.15; half of it: 0.06-0.09; it: 0.01-0.05); and where the
engine clips many scale rows (a fifth or more on 1,000-5,000 rows) the curvature
reads soft and the intervals lean wide (z sds down to 0.82). Against the exact
variational optimum (results pages, "What the full-rank curvature reads wrong") the
window's curvature is too stiff along the coefficients, where the trace has not
settled within 10,000 steps (``moments="late"`` reads the settled half), and too soft
across them, from the scale block's clipping; the two partly cancel, and neither
repair alone measured better.

**The prior and the DP error** (``prior_once``; results pages, "Settling the full-rank
trace, and the prior a noise-aware posterior leaves out"): the mixture adds the DP
error of the optimum around its estimate, while the prior sits only inside each
component; where that error dominates, the posterior given the release pulls the
centre towards 0 (:func:`_prior_once`). Exact for an error that does not depend on
the coefficients (a synthetic model: prior references 0.020-0.036 against the
mixture's 0.069-0.181); on logistic releases, whose error grows along the
coefficient vector, measured worse than the mixture, so an option.
"""

import numpy as np

from ..models.components import GaussianComponents
from ..utils.validation import check_int, check_positive_real
from .statistics_sampling import _psd_cholesky
from .wander_bias import remove_wander_bias

__all__ = ["full_rank_curvature", "full_rank_posterior", "full_rank_wander_width",
           "shrink_to_diagonal"]


def full_rank_curvature(release, prior_scale=None, flat_directions=None, shrinkage=False,
                        moments="window"):
    """The Hessian H of the negative log joint read off a full-rank run's stationarity.

    Parameters
    ----------
    release : FullRankRelease
    prior_scale : float, optional
        Floors every eigenvalue at the prior's precision ``1 / prior_scale^2`` (H is
        that plus a positive semi-definite likelihood term).
    flat_directions : ndarray of shape (k, n), optional
        Orthonormal directions the likelihood is flat along (declared one-hot blocks
        beside the intercept), where H is the prior's precision: the window does not
        relax along them.
    shrinkage : {False, True, "radial"}, default=False
        Shrink H's off-diagonal part by its noise share (:func:`shrink_to_diagonal`),
        the noise measured by the disagreement of the two halves of the window
        (``release.half_moments``): towards 0 (True), or towards the part along the
        window's mean of the means ("radial").
    moments : {"window", "late"}, default="window"
        Solve the stationarity with the whole window's moments, or with its second
        half's ("late": where the trace still drifts along its slowest direction,
        the first half reads the curvature of where the means were, not of where
        they settle; twice the noise, which the shrinkage then takes into account).

    Returns
    -------
    H : ndarray of shape (n, n)
        Symmetric positive definite when ``prior_scale`` is given.
    """
    if prior_scale is not None:
        check_positive_real("prior_scale", prior_scale)
    n = int(release.n_params)
    halves = getattr(release, "half_moments", None)
    if moments not in ("window", "late"):
        raise ValueError(f"moments must be 'window' or 'late', got {moments!r}.")
    if moments == "late" and halves is None:
        raise ValueError("moments='late' needs the release's half_moments.")
    if moments == "late":
        H = _stationarity_curvature(n, **halves[1])
    else:
        H = _stationarity_curvature(n, release.scale_moments, release.diagonal_moments,
                                    release.entropy)
    if shrinkage and halves is not None:
        H_halves = [_stationarity_curvature(n, **m) for m in halves]
        direction = np.asarray(release.mean_phi, float)[:n] if shrinkage == "radial" else None
        H = shrink_to_diagonal(H, *H_halves, direction=direction,
                               noise_scale=2.0 if moments == "late" else 1.0)
    if flat_directions is not None and len(flat_directions):
        Fd = np.asarray(flat_directions, float)
        P = np.eye(n) - Fd.T @ Fd
        floor = 0.0 if prior_scale is None else 1.0 / float(prior_scale) ** 2
        H = P @ H @ P + floor * Fd.T @ Fd
    if prior_scale is not None:
        lam, V = np.linalg.eigh(0.5 * (H + H.T))
        H = (V * np.maximum(lam, 1.0 / float(prior_scale) ** 2)) @ V.T
    return 0.5 * (H + H.T)


def _stationarity_curvature(n, scale_moments, diagonal_moments, entropy):
    """The symmetric H solving the window's stationarity equations (module text)."""
    # M1[j, k, l]: the coefficient of H_jl in equation (j, k)
    M1 = np.transpose(np.asarray(scale_moments, float), (0, 2, 1)).copy()
    j = np.arange(n)
    M1[j, j, :] = np.asarray(diagonal_moments, float).T
    jj, kk = np.tril_indices(n)
    n_pairs = len(jj)
    pair = np.empty((n, n), dtype=int)
    pair[jj, kk] = pair[kk, jj] = np.arange(n_pairs)
    # equation (j, k): sum_l H_{jl} M1[j, k, l], H_{jl} stored at pair[j, l]
    system = np.zeros((n_pairs, n_pairs))
    np.add.at(system, (np.repeat(np.arange(n_pairs), n), pair[jj].ravel()),
              M1[jj, kk, :].ravel())
    rhs = np.where(jj == kk, np.asarray(entropy, float)[jj], 0.0)
    h = np.linalg.lstsq(system, rhs, rcond=None)[0]
    H = np.empty((n, n))
    H[jj, kk] = H[kk, jj] = h
    return H


def shrink_to_diagonal(H, H_first, H_second, direction=None, noise_scale=1.0):
    """``(1 - a) H + a T``: H's off-diagonal part shrunk towards a target T by its noise share.

    ``H_first`` and ``H_second`` are the same estimate from each half of the window;
    with the halves about independent, ``(H_first - H_second) / 2`` has the noise
    variance of H's entries. In the scale of H's diagonal (``R = D^-1/2 H D^-1/2``), the
    intensity is the Ledoit-Wolf ratio of the off-diagonal entries' noise to the mean
    square of their distance from the target, ``a = min(1, sum (R_1 - R_2)^2 / 4 /
    sum (R - T)^2)``: 1 when the off-diagonal part is all noise, small when its
    structure stands out of it. Noise in a curvature's off-diagonal entries spreads its
    eigenvalues (a Marchenko-Pastur spread), which makes the posterior too wide along
    some directions and too narrow along others.

    The target is H's diagonal, or with a ``direction`` v, the diagonal plus the
    rank-one part along v that keeps H's curvature along it: ``T = I + c (u u^T -
    diag(u u^T))`` in the scaled metric, ``u = D^1/2 v / |D^1/2 v|``, with c such that
    ``u^T T u = u^T R u``. (A logistic likelihood's curvature differs along the
    coefficient vector from across it: for Gaussian rows it is ``a I + b theta
    theta^T`` in the features' metric, by Stein's lemma.)

    ``noise_scale`` multiplies the noise variance: 2 when H is one half's estimate
    rather than the whole window's.
    """
    n = len(H)
    d = np.sqrt(np.maximum(np.diag(H), 1e-300))
    scale = np.outer(d, d)
    R = H / scale
    off = ~np.eye(n, dtype=bool)
    T = np.eye(n)
    if direction is not None:
        u = d * np.asarray(direction, float)
        norm = np.linalg.norm(u)
        if norm > 0 and n > 1:
            u = u / norm
            outer = np.outer(u, u)
            spread = 1.0 - np.sum(u**4)
            if spread > 1e-12:
                T = T + (u @ R @ u - 1.0) / spread * np.where(off, outer, 0.0)
    noise = float(noise_scale) * np.sum(((H_first - H_second) / scale)[off] ** 2) / 4.0
    total = np.sum((R - T)[off] ** 2)
    a = 1.0 if total <= 0 else min(1.0, noise / total)
    return ((1.0 - a) * R + a * T) * scale


def full_rank_wander_width(release, H, prior_scale):
    """The wander's logit variance ``w = tr(S H_lik) / H_lik,00`` of a full-rank run.

    As :func:`~skdpvi.noise_aware.logistic_wander_width` with a curvature: S the
    window's covariance of the means, ``H_lik = H - I / prior_scale^2`` and the
    intercept (last) its reference; 0 when the release says nothing.
    """
    n = int(release.n_params)
    H_lik = np.asarray(H, float) - np.eye(n) / float(prior_scale) ** 2
    tr_hs = float(np.sum(H_lik * release.wander_covariance))
    h00 = float(H_lik[-1, -1])
    if not (np.isfinite(tr_hs) and np.isfinite(h00)) or tr_hs <= 0 or h00 <= 0:
        return 0.0
    return tr_hs / h00


def full_rank_posterior(release, *, prior_scale, n_components=1000, prior_sd=1.0,
                        flat_directions=None, wander_correction=False,
                        curvature_shrinkage=False, curvature_moments="window",
                        prior_once=False, random_state=None):
    """Mixture posterior of the parameters from a full-rank DPVI run.

    Parameters
    ----------
    release : FullRankRelease
    prior_scale : float
        The model's prior standard deviation of every parameter.
    n_components : int, default=1000
        Draws of the optimum of the means, one mixture component each.
    prior_sd : float, default=1.0
        The gradient model's prior of the optimum, ``N(m_bar, prior_sd^2 I)``.
    flat_directions : ndarray of shape (k, n), optional
        See :func:`full_rank_curvature`.
    wander_correction : bool, default=False
        Remove the wander's outward (Jensen) bias from the optimum's draws
        (:func:`~skdpvi.noise_aware.remove_wander_bias` with
        :func:`full_rank_wander_width`; the intercept must be the last parameter).
    curvature_shrinkage : {False, True, "radial"}, default=False
        Shrink the curvature's off-diagonal part by its noise share
        (:func:`shrink_to_diagonal`; see :func:`full_rank_curvature`).
    curvature_moments : {"window", "late"}, default="window"
        The moments the curvature is read from (:func:`full_rank_curvature`'s
        ``moments``).
    prior_once : bool, default=False
        Combine the release's estimate of the optimum with the model's prior
        ``N(0, prior_scale^2 I)`` once (:func:`_prior_once`): the optimum is the
        posterior mode, the prior already in it, so its DP error is an error of the
        likelihood's part. False: the paper's mixture, ``N(m*_i, H^-1)`` with ``m*_i``
        drawn around the estimate (the gradient model's prior ``prior_sd``), which
        counts the prior inside each component but not against the DP error.
        Measured worse than the mixture on logistic releases (module text).
        With ``prior_once``, ``prior_sd`` is not used and the wander correction is
        applied to the estimate before the prior.
    random_state : int, Generator or None

    Returns
    -------
    components : GaussianComponents
        ``N(m*_i, H^-1)``.
    info : dict
        ``curvature`` (H), ``covariance`` (of the optimum) and
        ``component_covariance`` (and ``wander_width`` with ``wander_correction``).
    """
    check_positive_real("prior_scale", prior_scale)
    check_positive_real("prior_sd", prior_sd)
    check_int("n_components", n_components)
    rng = np.random.default_rng(random_state)
    n = int(release.n_params)
    H = full_rank_curvature(release, prior_scale, flat_directions, curvature_shrinkage,
                            curvature_moments)
    lam, V = np.linalg.eigh(H)
    H_inv = (V / lam) @ V.T
    kappa = float(release.sampling_rate)
    K_inv = H_inv / kappa
    noise_var = float(release.noise_std[0]) ** 2
    x_bar = np.asarray(release.mean_phi, float)[:n]
    estimate = x_bar - K_inv @ np.asarray(release.mean_gradient, float)
    # error K^-1 Q K^-1 / n, in K's eigenbasis
    error = noise_var / (kappa * lam) ** 2 / release.count
    if prior_once:
        info = {"curvature": H, "component_covariance": H_inv}
        if wander_correction:
            info["wander_width"] = full_rank_wander_width(release, H, prior_scale)
            estimate = remove_wander_bias(estimate[None], info["wander_width"],
                                          prior_scale=prior_scale, covariance=H_inv)[0]
        mean, cov = _prior_once(estimate, (V * error) @ V.T, H, prior_scale)
        info["covariance"] = cov - H_inv
        means = mean + rng.standard_normal((int(n_components), n)) \
            @ _psd_cholesky(info["covariance"]).T
        return GaussianComponents(means, _psd_cholesky(H_inv)), info
    # combined with the gradient model's prior N(x_bar, prior_sd^2 I)
    var = 1.0 / (1.0 / error + 1.0 / prior_sd**2)
    mean = x_bar + V @ (var / error * (V.T @ (estimate - x_bar)))
    cov = (V * var) @ V.T
    means = mean + (rng.standard_normal((int(n_components), n)) * np.sqrt(var)) @ V.T
    info = {"curvature": H, "covariance": cov, "component_covariance": H_inv}
    if wander_correction:
        info["wander_width"] = full_rank_wander_width(release, H, prior_scale)
        means = remove_wander_bias(means, info["wander_width"], prior_scale=prior_scale,
                                   covariance=H_inv)
    return GaussianComponents(means, _psd_cholesky(H_inv)), info


def _prior_once(estimate, error, H, prior_scale):
    """The posterior ``N(M, V)`` from a noisy estimate of the posterior mode.

    The mode ``m* = H^-1 H_lik m_lik`` carries the prior (``H = H_lik + I / tau^2``);
    the likelihood alone says ``theta ~ N(m_lik, H_lik^-1)``, and the release's
    estimate of it, ``H_lik^-1 H estimate``, errs by ``H_lik^-1 H E H H_lik^-1``
    (E the estimate's error). The prior applied once to their sum:

        V^-1 = I / tau^2 + H_lik B^-1 H_lik,   M = V H_lik B^-1 H estimate,
        B = H_lik + H E H,

    which needs no inverse of H_lik (flat along declared one-hot directions; where
    both H_lik and E vanish along a direction, B's pseudo-inverse leaves the prior
    there). With ``E = 0`` it is ``N(estimate, H^-1)`` (the estimate's part along flat
    directions, where the mode is the prior's 0, dropped); ``V >= H^-1`` always.
    """
    n = len(estimate)
    tau2 = float(prior_scale) ** 2
    H_lik = H - np.eye(n) / tau2
    B = H_lik + H @ error @ H
    H_lik_B = H_lik @ np.linalg.pinv(0.5 * (B + B.T), hermitian=True)
    precision = np.eye(n) / tau2 + H_lik_B @ H_lik
    cov = np.linalg.inv(0.5 * (precision + precision.T))
    return cov @ (H_lik_B @ (H @ estimate)), 0.5 * (cov + cov.T)
