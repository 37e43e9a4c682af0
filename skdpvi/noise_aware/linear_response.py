"""The dense posterior of the means: one curvature for the errors and the widths.

Mean-field variational inference reports the conditional variance ``1 / H_jj`` of
each coefficient where the posterior has the marginal ``(H^-1)_jj``, larger wherever
the curvature H couples the coefficients (correlated features, and in logistic
regression every design through ``p (1 - p) x x^T``); the linear-response covariance
(Giordano, Broderick & Jordan, JMLR 2018) is ``H^-1`` itself. DP-SGD's released
trace carries H: near the optimum the means follow
``x_{t+1} = x_t - Gamma (K (x_t - phi*) + e_t)`` with ``K = kappa H`` (H of the
negative ELBO, the prior's precision included) and gradient noise e_t of the
mechanism's known covariance Q, so the wander's covariance S is tied to K
(:func:`~skdpvi.noise_aware.wander_curvature`). One K then gives both parts of the
mixture posterior:

- the optimum of the means, ``x_bar - K^-1 g_bar``, which errs by
  ``K^-1 Q K^-1 / n`` (coupled coordinates err together), combined with the
  gradient model's prior N(x_bar, prior_sd^2 I);
- the components' covariance ``kappa K^-1 = H^-1``.

**The finite window.** A direction that relaxes over N relaxation times in the n
steps of the recording window shows a sample variance below its stationary value
(the mean of the window absorbs part of it), by the factor
``1 - 2 / N + 2 (1 - e^-N) / N^2`` of an Ornstein-Uhlenbeck path; read with the
stationary formula it overstates the curvature, and where the window holds less
than a relaxation time (a direction that only the prior restrains, e.g. a one-hot
block beside the intercept) the trace is a random walk whose variance says only
that the curvature is small. :func:`window_curvature` inverts the finite-window
factor per eigen-direction of the wander (steps and noise are isotropic in the
means of the package's models, so S and K share eigenvectors) and bounds the
curvature below by the prior's.

Measured (``doc/results.rst``, "Dense errors with linear-response widths"): with the
true curvature this structure is calibrated in every direction of a strongly coupled
design; read off the trace it halves the default's TARP error where the window holds
many relaxation times of every direction (10,000 rows, correlated features; UCI Adult,
calibration RMSE 0.015 against 0.028 at epsilon 1) and is too wide where it holds few
(2,000 rows, epsilon 0.1, 21 parameters), where the noise of the sample variances
becomes curvatures that are too small. **Known bias:** the per-eigen-direction
inversion is right in expectation, not for one window. Where several directions relax
only a few times, the sample covariance of the wander spreads its eigenvalues like a
random walk's (roughly as 1 / k^2), and most eigen-directions read as much stiffer
than any direction of the process: on UCI Adult a median of 77 relaxations where the
true curvature gives 1.2, reproduced by simulating the linear process with the true
curvature (``doc/results.rst``, "Where the curvature can come from"). The posterior
is then too narrow along the weakly restrained directions; predictions, which live
on the stiff ones, are little affected. Post-processing only: it reads the released
trace's sums (``sum_xxt`` of :class:`~skdpvi.dpvi.TraceStatistics`), so it costs no
privacy and does not grow with T.
"""

import numpy as np
from scipy.optimize import brentq

from ..models.components import GaussianComponents
from ..utils.validation import check_int, check_positive_array, check_positive_real, is_real
from .coupling import _optimum_of_means, check_wander_inputs
from .diagonal_matching import matched_curvature
from .extrapolation import uncertain_extrapolation
from .statistics_sampling import _psd_cholesky

__all__ = ["window_curvature", "shrink_wander_covariance", "linear_response_posterior"]


def _window_factor(n_relax):
    """E[sample variance of an OU path over the window] / its stationary variance,
    for ``n_relax`` (>= 1e-2, array or float) relaxation times in the window."""
    return 1 - 2 / n_relax + 2 * -np.expm1(-n_relax) / n_relax**2


def _window_variance_ratio(n_relax):
    """E[sample variance of an OU path over the window] / (its random-walk value n s^2 / 6).

    ``n_relax`` relaxation times in the window; 1 for a random walk (0), 3 / N for
    large N.
    """
    n_relax = float(n_relax)
    if n_relax < 1e-2:  # the series: the closed form cancels catastrophically here
        return 1.0 - n_relax / 4 + n_relax**2 / 20 - n_relax**3 / 120
    return 3 / n_relax * _window_factor(n_relax)


def _relaxation_times(ratio):
    """The N whose expected window variance ratio is ``ratio`` (0 for ratio >= 1)."""
    if ratio >= 1.0:
        return 0.0
    if ratio <= _window_variance_ratio(1e9):  # no variance: stiffer than resolvable
        return 1e9
    return brentq(lambda n: _window_variance_ratio(n) - ratio, 1e-9, 1e9, xtol=1e-12,
                  rtol=1e-10)


def window_curvature(covariance, steps, noise_var, n_steps, floor=0.0):
    """The curvature K implied by the wander over a finite window of constant-step SGD.

    Parameters
    ----------
    covariance : ndarray of shape (p, p)
        S, the sample covariance of the coordinates over the window.
    steps : ndarray of shape (p,)
        The diagonal of Gamma (learning rate times preconditioner).
    noise_var : ndarray of shape (p,)
        The diagonal of Q, the released gradient's noise variance. ``steps *
        noise_var`` should be (about) the same for every coordinate (the per-step
        innovation of ``Gamma^-1/2 x``); its geometric mean is used.
    n_steps : int
        n, the steps in the window.
    floor : float, default=0.0
        Lower bound of K along every direction (the prior's share of the curvature,
        ``kappa / prior_scale^2``).

    Returns
    -------
    K : ndarray of shape (p, p)
        Symmetric positive definite (for ``floor > 0``).
    n_relax : ndarray of shape (p,)
        Relaxation times in the window per eigen-direction (before the floor).

    Examples
    --------
    Steps 0.01, unit noise, 1,000 steps: a random walk's sample variance (n gamma q / 6,
    a direction without curvature) gives the floor; a direction with K = 0.5 relaxes
    5 times in the window, where its sample variance is 0.68 of the stationary
    gamma q / (2 K) = 0.01:

    >>> import numpy as np
    >>> S = np.diag([1000 * 0.01 / 6, 0.00679])
    >>> K, n_relax = window_curvature(S, np.full(2, 0.01), np.ones(2), 1000, floor=0.1)
    >>> np.round(np.diag(K), 2)
    array([0.1, 0.5])
    """
    S, steps, noise_var = check_wander_inputs(covariance, steps, noise_var, n_steps, floor)
    root = np.sqrt(steps)
    innovation = float(np.exp(np.mean(np.log(steps * noise_var))))
    lam, U = np.linalg.eigh(S / root[:, None] / root[None, :])
    ratio = np.maximum(lam, 0.0) / (n_steps * innovation / 6)
    n_relax = np.array([_relaxation_times(r) for r in ratio])
    # per-step rate along u: u^T Gamma^1/2 K Gamma^1/2 u, floored at the prior's
    rate = np.maximum(n_relax / n_steps, floor * (U**2).T @ steps)
    M = (U * rate) @ U.T
    K = M / root[:, None] / root[None, :]
    return 0.5 * (K + K.T), n_relax


def shrink_wander_covariance(covariance, steps, noise_var, n_steps, diagonal_curvature,
                             effective_relaxations=2.0, keep=None):
    """The wander's covariance with its noise bulk shrunk towards an uncorrelated target.

    A window that holds N relaxation times of p directions estimates their covariance
    from about N independent looks, and with N not much larger than p the sample
    eigenvalues spread like a Marchenko-Pastur bulk: the per-direction inversion of
    :func:`window_curvature` then reads some directions as much stiffer and others as
    much softer than any direction of the process (on 10 features and 2,000 rows,
    true relaxation counts 6-9 read as 0-80), and the soft misreadings make the
    posterior too wide. Ledoit-Wolf shrinkage towards the covariance the window would
    show without correlations (each coordinate's stationary variance ``gamma_j q_j /
    (2 K_jj)`` times the finite-window factor, with ``K_jj`` known from the released
    mean-field scales, ``kappa / s_j^2``) removes most of that spread. Directions whose
    variance clears the bulk's edge, ``(1 + sqrt(p / N))^2`` times the target, are real
    (a direction only the prior restrains random-walks far beyond it) and are kept.

    Measured (``doc/results.rst``, "Shrinking the wander's noise bulk"; not the
    estimator's default): on simulated logistic designs with roughly uncorrelated
    features it brings the coefficients' z-score sds towards 1 and lowers TARP with
    the authors' references (10 features, 2,000 rows: 0.142 to 0.072), but where the
    coefficient vector's direction lags inward the narrower intervals expose the lag
    (15 features at epsilon 0.3: prior references 0.132 to 0.208), and on UCI Adult,
    whose one-hot blocks make the curvature strongly correlated, the predictive
    calibration gets worse at epsilon 0.1 and 0.3 (0.039 to 0.062, 0.021 to 0.030).

    Parameters
    ----------
    covariance : ndarray of shape (p, p)
        S, the sample covariance of the means over the window.
    steps, noise_var : ndarray of shape (p,)
        As in :func:`window_curvature`.
    n_steps : int
        Steps in the window.
    diagonal_curvature : ndarray of shape (p,)
        ``K_jj`` (the released gradient's curvature per coordinate).
    effective_relaxations : float, default=2.0
        The shrinkage intensity's number of independent looks per relaxation time
        (1 is the continuous-time value; 2 shrinks half as much; 1.5-3 were
        measured).
    keep : ndarray of shape (p,), optional
        A further direction to leave unshrunk (e.g. the means' own direction).

    Returns
    -------
    covariance : ndarray of shape (p, p)
        The shrunk covariance, for :func:`window_curvature`.
    info : dict
        ``intensity`` (the shrinkage weight in [0, 1]) and ``n_kept`` (directions kept
        as real).
    """
    S, steps, noise_var = check_wander_inputs(covariance, steps, noise_var, n_steps)
    p = len(S)
    k_diag = check_positive_array("diagonal_curvature", diagonal_curvature, shape=(p,))
    check_positive_real("effective_relaxations", effective_relaxations)
    n_relax = np.maximum(n_steps * steps * k_diag, 1e-2)
    target = _window_factor(n_relax) * steps * noise_var / (2 * k_diag)
    w = 1 / np.sqrt(target)
    W = S * np.outer(w, w)  # the target is the identity here
    lam, U = np.linalg.eigh(W)
    kept = lam > (1 + np.sqrt(p / np.median(n_relax))) ** 2
    basis = U[:, kept]
    if keep is not None:
        extra = np.atleast_2d(np.asarray(keep, float)).T / w[:, None]
        basis = np.linalg.qr(np.column_stack([basis, extra]))[0]
    P = np.eye(p) - basis @ basis.T
    bulk = P @ W @ P
    d = np.diag(bulk)
    looks = effective_relaxations * np.sqrt(np.outer(n_relax, n_relax))
    error = ((np.outer(d, d) + bulk**2) / np.maximum(looks, 1.0)).sum()
    spread = ((bulk - P) ** 2).sum()
    intensity = min(1.0, error / spread) if spread > 0 else 1.0
    # a convex combination of W and the PSD target (kept block, identity on the bulk):
    # stays PSD also when a kept direction is not an eigenvector of W
    Q = np.eye(p) - P
    W = (1 - intensity) * W + intensity * (Q @ W @ Q + P)
    W = 0.5 * (W + W.T)
    return W / np.outer(w, w), {"intensity": intensity, "n_kept": int(kept.sum())}


def linear_response_posterior(stats, *, n_means, learning_rate, noise_std, sampling_rate,
                              prior_scale=1.0, prior_sd=1.0, n_components=1000,
                              diagonal_curvature=None, effective_relaxations=2.0,
                              curvature_uncertainty=0.0, max_log_sd=1.0, curvature_mode="shift",
                              match_diagonal=False, flat_directions=None,
                              shrink_before_matching=None, random_state=None):
    """Mixture posterior of the parameters with dense errors and linear-response widths.

    Parameters
    ----------
    stats : TraceStatistics
        With cross sums (``sum_xxt``), as every run of the engine records.
    n_means : int
        The first ``n_means`` coordinates of phi are the variational means.
    learning_rate : ndarray of shape (d,)
        Steps of the recording window (``DPVIResult.learning_rate``).
    noise_std : ndarray of shape (d,)
        Standard deviation of the DP noise of the released gradient per coordinate.
    sampling_rate : float
        kappa: the released gradient's curvature is ``kappa H``.
    prior_scale : float, default=1.0
        The model's prior standard deviation of every parameter (the floor of the
        curvature is its precision).
    prior_sd : float, default=1.0
        The gradient model's prior of the optimum, N(x_bar, prior_sd^2 I).
    n_components : int, default=1000
        Draws of the optimum of the means, one mixture component each.
    diagonal_curvature : ndarray of shape (n_means,), optional
        ``K_jj`` per mean coordinate (:func:`mean_field_curvature`). Given, the
        wander's covariance is shrunk towards the uncorrelated target it implies
        (:func:`shrink_wander_covariance`) before the curvature is read off it.
    effective_relaxations : float, default=2.0
        The shrinkage's looks per relaxation time (:func:`shrink_wander_covariance`).
    curvature_uncertainty : float, default=0.0
        c of :func:`uncertain_extrapolation`: each component's optimum is taken at a
        curvature drawn around the window's, log-normal with variance ``c / N`` along
        a direction read off N relaxation times (0: the point estimate; measured, not
        the estimator's default).
    max_log_sd : float or None, default=1.0
        ``max_sd`` of :func:`uncertain_extrapolation`.
    curvature_mode : {"shift", "posterior"}, default="shift"
        ``mode`` of :func:`uncertain_extrapolation`.
    match_diagonal : bool, default=False
        Read the curvature with :func:`matched_curvature` (its diagonal fixed to
        ``diagonal_curvature``, which is then required) instead of shrinking.
    flat_directions : ndarray of shape (k, n_means), optional
        With ``match_diagonal``: orthonormal directions the likelihood is flat along
        (:func:`~skdpvi.noise_aware.onehot_flat_directions`), whose curvature is the
        prior's.
    shrink_before_matching : (float, float) or None, default=None
        With ``match_diagonal``: ``(min_relaxations, max_means_per_relaxation)``.
        Where the window holds at least ``min_relaxations`` relaxation times of the
        median mean coordinate (``n * steps * diagonal_curvature``) and at most
        ``max_means_per_relaxation`` means per relaxation, the wander's noise bulk
        is shrunk first (:func:`shrink_wander_covariance`, one look per relaxation
        time) and the matching reads the shrunk covariance; None: never. Shrinking
        narrows the posterior: right where the window's reading is too wide, wrong
        where it holds few relaxations or many means per relaxation (results pages,
        "Designs not seen before, and where the joint gap sits").
    random_state : int, Generator or None

    Returns
    -------
    components : GaussianComponents
        ``N(mean_m, kappa K^-1)`` over the means' coordinates (the parameters).
    info : dict
        ``curvature`` (K), ``relaxation_times`` (per eigen-direction of the wander),
        ``covariance`` (of the optimum), ``component_covariance`` and, with
        ``diagonal_curvature``, the shrinkage's ``intensity`` and ``n_kept`` (or,
        with ``match_diagonal``, the matching's ``converged``, ``iterations`` and
        ``constraint_error``, and the bulk shrinkage's ``intensity`` and ``n_kept``
        where ``shrink_before_matching`` applied).
    """
    check_positive_real("prior_scale", prior_scale)
    check_positive_real("prior_sd", prior_sd)
    check_int("n_components", n_components)
    check_int("n_means", n_means)
    if n_means > stats.dim:
        raise ValueError(f"n_means ({n_means}) exceeds the statistics' {stats.dim} "
                         "coordinates.")
    if not (is_real(sampling_rate) and 0 < sampling_rate <= 1):
        raise ValueError(f"sampling_rate must be a number in (0, 1], got {sampling_rate!r}.")
    if curvature_mode not in ("shift", "posterior"):
        raise ValueError("curvature_mode must be 'shift' or 'posterior', got "
                         f"{curvature_mode!r}.")
    if not (is_real(curvature_uncertainty) and 0 <= curvature_uncertainty < np.inf):
        raise ValueError("curvature_uncertainty must be a finite number >= 0, got "
                         f"{curvature_uncertainty!r}.")
    check_positive_real("effective_relaxations", effective_relaxations)
    rng = np.random.default_rng(random_state)
    p, n = int(n_means), stats.count
    steps = np.asarray(learning_rate, float)[:p]
    noise_var = np.asarray(noise_std, float)[:p] ** 2
    kappa = float(sampling_rate)
    S = stats.wander_covariance()[:p, :p]
    shrinkage = {}
    if match_diagonal:
        if diagonal_curvature is None:
            raise ValueError("match_diagonal needs diagonal_curvature.")
        bulk = {}
        if shrink_before_matching is not None:
            min_relaxations, max_means_per_relaxation = shrink_before_matching
            relaxations = np.median(n * steps * np.asarray(diagonal_curvature, float))
            if relaxations >= min_relaxations and p <= max_means_per_relaxation * relaxations:
                S, bulk = shrink_wander_covariance(S, steps, noise_var, n, diagonal_curvature,
                                                   effective_relaxations=1.0)
        K, shrinkage = matched_curvature(S, steps, noise_var, diagonal_curvature,
                                         floor=kappa / prior_scale**2,
                                         flat_directions=flat_directions)
        shrinkage.update(bulk)
        root = np.sqrt(steps)
        n_relax = n * np.linalg.eigvalsh(root[:, None] * K * root[None, :])
    else:
        if diagonal_curvature is not None:
            S, shrinkage = shrink_wander_covariance(S, steps, noise_var, n,
                                                    diagonal_curvature, effective_relaxations)
        K, n_relax = window_curvature(S, steps, noise_var, n, floor=kappa / prior_scale**2)
    lam, U = np.linalg.eigh(K)
    K_inv = (U / lam) @ U.T
    if curvature_uncertainty:
        means = uncertain_extrapolation(K, stats, steps, noise_var, curvature_uncertainty,
                                        kappa / prior_scale**2, prior_sd, n_components, rng,
                                        max_sd=max_log_sd, mode=curvature_mode)
        cov = np.cov(means.T)
    else:
        mean, cov = _optimum_of_means(stats, K_inv, noise_var, prior_sd)
        means = mean + rng.standard_normal((int(n_components), p)) @ _psd_cholesky(cov).T
    component_cov = kappa * K_inv
    component_cov = 0.5 * (component_cov + component_cov.T)
    return (GaussianComponents(means, _psd_cholesky(component_cov)),
            {"curvature": K, "relaxation_times": n_relax, "covariance": cov,
             "component_covariance": component_cov, **shrinkage})
