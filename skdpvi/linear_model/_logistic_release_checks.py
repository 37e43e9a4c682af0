"""Checks of a logistic fit on its release: the posterior against the prior, the
features' scale and centring, and the batch against the DP noise.

After a logistic fit, the posterior may not be wider than the prior
(:func:`check_within_prior`), the released scales say whether the features are of
unit scale (:func:`check_logistic_scales`), the window's wander whether they are
centred where ``error_model="dense_matched"`` needs it (:func:`check_matched_centred`,
:func:`wander_intercept_inflation`), and the public settings whether the expected
batch is large enough against the DP noise (:func:`check_logistic_batch_noise`).
Each check warns (:class:`~skdpvi.exceptions.IdentifiabilityWarning`) and records
its estimate in ``inference_diagnostics_``; and the run's length whether the
variational scales had time to reach their optimum (:func:`check_scale_relaxations`,
a :class:`~sklearn.exceptions.ConvergenceWarning`). The linear estimator's checks are in
:mod:`._release_checks`.
"""

import math
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..dpvi.schedule import _default_preconditioning, heuristic_learning_rate
from ..exceptions import IdentifiabilityWarning

#: The same for logistic regression, on the release's estimate lowered by its wander
#: (:func:`check_logistic_scales`). Lower than the linear model's: with coefficients
#: from the prior, features of scale 2 already bias the posterior outward and 3
#: miscalibrate it (3 features, 5,000 rows, epsilon 1, K = 100: TARP with prior
#: references 0.122 at scale 2, 0.207 at 3, 0.327 at 5, against 0.024 at unit scale).
_LARGEST_LOGISTIC_SCALE = 1.5
#: Above this inflation of the intercept's variance, as the window curvature of a
#: logistic release reads it, ``error_model="dense_matched"`` warns that the
#: features are not centred (:func:`check_matched_centred`; 10 features, 5,000 rows,
#: epsilon 1, 4 fits each: 0.9-2.0 for Gaussian features, 1.2-2.7 for uniform ones
#: centred, 54-436 for uniform ones on [0, 1], whose true inflation is about 31).
#: Over 200 fits each (twenty-fourth session) it is noisier: above 6 in 31 % of the
#: fits on 10 Gaussian features, 79 % on equicorrelated ones, 93 % on [0, 1]; the
#: default's choice reads :func:`wander_intercept_inflation` instead.
_MATCHED_CENTRED_INFLATION = 6.0


def matched_intercept_inflation(result, n_params, prior_scale, flat_directions=None):
    """The intercept's variance inflation ``(K^-1)_00 K_00`` a logistic release implies.

    K is the window curvature (:func:`~skdpvi.noise_aware.window_curvature`), which
    reads the contrast between an uncentred feature and the intercept as soft, and
    ``K_00`` the intercept's mean-field curvature. About 1-3 for centred features,
    tens to hundreds for features uniform on [0, 1] (the curvature matched to the
    mean-field diagonal fails there). Directions the one-hot blocks leave flat
    (``flat_directions``) are excluded. Post-processing of the release only; None
    without the cross sums. The intercept is the last mean coordinate.
    """
    from ..noise_aware import mean_field_curvature, window_curvature

    stats = result.stats
    if stats is None or stats.sum_xxt is None or not stats.count:
        return None
    p = int(n_params)
    steps = np.asarray(result.learning_rate, float)[:p]
    noise_var = np.asarray(result.noise_std, float)[:p] ** 2
    K, _ = window_curvature(stats.wander_covariance()[:p, :p], steps, noise_var,
                            stats.count, floor=result.sampling_rate / prior_scale**2)
    if flat_directions is not None and len(flat_directions):
        # the flat directions' prior variance is no inflation: make them stiff here
        F = np.atleast_2d(flat_directions)
        P = np.eye(p) - F.T @ F
        K = P @ K @ P + np.linalg.eigvalsh(K)[-1] * 1e6 * F.T @ F
    diagonal = mean_field_curvature(stats, p, result.sampling_rate, wander=False)
    return float(np.linalg.inv(K)[-1, -1] * diagonal[-1])


def wander_intercept_inflation(result, n_params, flat_directions=None):
    """The intercept's variance inflation the window's wander itself shows.

    ``S_00 (S^-1)_00`` with S the recording window's covariance of the means: one over
    one minus the squared multiple correlation of the intercept's wander with the
    coefficients'. The stationary wander's covariance is the curvature's inverse in
    the step-scaled frame, so this is ``(K^-1)_00 K_00`` (invariant to the steps)
    without reading a curvature: about 1-3 for centred features, more for uncentred
    ones, whose contrast with the intercept the wander explores slowly. Directions
    the one-hot blocks leave flat are excluded. None without the cross sums.
    """
    stats = result.stats
    if stats is None or stats.sum_xxt is None or not stats.count:
        return None
    p = int(n_params)
    S = stats.wander_covariance()[:p, :p]
    basis = np.eye(p)
    if flat_directions is not None and len(flat_directions):
        # the same inflation within the complement of the flat directions: the part of
        # the intercept the one-hot blocks do not share, against the rest
        F = np.atleast_2d(flat_directions)
        values, vectors = np.linalg.eigh(np.eye(p) - F.T @ F)
        basis = vectors[:, values > 0.5]
    S = basis.T @ S @ basis
    intercept = basis[-1] / np.linalg.norm(basis[-1])
    return float((intercept @ S @ intercept) * (intercept @ np.linalg.pinv(S) @ intercept))


def check_matched_centred(est, result, n_params, flat_directions=None):
    """Warn when ``error_model="dense_matched"`` meets features far from centred.

    The matched curvature takes each coordinate's conditional curvature from the
    mean-field scales; where uncentred features make the intercept and the
    coefficients nearly collinear, the marginal curvature along their contrast is far
    smaller, the window cannot resolve it and the matching pushes the coordinates'
    stiffness into it: intervals far too narrow (features uniform on [0, 1]: 90 %
    intervals covering 48-73 %; results pages, "A curvature matched to the mean-field
    diagonal"). :func:`matched_intercept_inflation` flags the design.
    """
    if not est.fit_intercept:
        return
    inflation = matched_intercept_inflation(result, n_params, est.prior_scale,
                                            flat_directions)
    if inflation is None:
        return
    est.inference_diagnostics_["intercept_inflation"] = inflation
    if inflation > _MATCHED_CENTRED_INFLATION:
        warnings.warn(
            "The released DP-SGD trace shows features far from centred (they inflate "
            f"the intercept's variance about {inflation:.0f}-fold), where "
            "error_model='dense_matched' gives credible intervals far too narrow. "
            "Centre the features with public values (for example the midpoints of "
            "public bounds) before fitting, or use the default error_model; "
            "inference_diagnostics_['intercept_inflation'] holds the estimate.",
            IdentifiabilityWarning, stacklevel=4)


def check_logistic_scales(est, result, n_params, prior_sd):
    """Warn when a logistic release shows features far above unit scale.

    At the mean-field optimum each coefficient's scale satisfies ``s_j^-2 = E_q[sum_i
    p_i (1 - p_i) x_ij^2] + prior_sd^-2``, and the intercept's column is 1, so
    ``(s_j^-2 - prior_sd^-2) / (s_0^-2 - prior_sd^-2)`` is feature j's mean square
    weighted by ``p (1 - p)``, relative to the intercept's: about 1 for features of
    unit scale, the square of the scale otherwise. Read off the recording window's
    mean of the released scales (a post-processing); it warns where the estimate,
    lowered by the window's wander of the two scales (``exp(-(sd_j + sd_0))`` of the
    rho trace), exceeds 1.5. Only with an intercept and the default clip norm, which
    assumes unit scale: larger features get clipped, which pushes every coefficient
    outward (10 x X: coefficients about twice too large, z-scores up to 16; 3 x X:
    radial z-score +0.9, TARP with prior references 0.21). Measured at the present
    threshold (``doc/results.rst``, "A scale check for logistic regression"; K = 100
    fits per row, Gaussian features, coefficients from the prior): 3 x X warned in
    100 % of the fits at 5,000 rows and epsilon 1, 5 x X in 100 %, 2 x X in 37 %;
    unit-scale features in none at 5,000 rows (epsilon 1), 2,000 rows (10 features,
    epsilon 0.3) or 500 rows (epsilon 0.3), where the largest lowered estimate was
    0.93-1.13. (The threshold was 4 before the nineteenth session: 5 x X read 4.5-5.6,
    lowered 3.3-3.8, and passed silently.)
    """
    stats = result.stats
    if not est.fit_intercept or est.clip_norm != "auto" or stats is None or not stats.count:
        return
    rho = stats.shift[n_params:] + stats.sum_x[n_params:] / stats.count
    curvature = np.logaddexp(0.0, rho) ** -2.0 - prior_sd ** -2.0
    if not curvature[-1] > 0:  # no measurable curvature in the intercept: no reference
        return
    scales = np.sqrt(np.maximum(curvature[:-1], 0.0) / curvature[-1])
    est.inference_diagnostics_["feature_scales"] = scales
    # a scale is log-linear in rho (s^-2 ~ e^-2 rho): the window's wander of rho,
    # feature's and intercept's, is allowed for before the ratio counts as large
    wander = np.sqrt(np.maximum(stats.sum_xx[n_params:] / stats.count
                                - (stats.sum_x[n_params:] / stats.count) ** 2, 0.0))
    low = scales * np.exp(-(wander[:-1] + wander[-1]))
    _warn_far_from_unit_scale(est, scales, low)


def check_full_rank_scales(est, curvature, prior_sd):
    """:func:`check_logistic_scales` for a full-rank fit: each feature's scale from the
    diagonal of the curvature read off its release
    (:func:`~skdpvi.noise_aware.full_rank_curvature`), ``(H_jj - prior_sd^-2) /
    (H_00 - prior_sd^-2)`` being the same ``p (1 - p)``-weighted mean square relative
    to the intercept's. The full-rank release keeps no wander of the scales, so no
    allowance is subtracted; its curvature's diagonal reads the data's to 0.6-1.5
    (results pages, "A full-rank variational family"); at the defaults unit-scale
    features read at most 0.89-1.16 and twice unit scale 1.95-2.05 (results pages,
    "Clipping the full-rank blocks apart, and the full rank as the default")."""
    if not est.fit_intercept or est.clip_norm != "auto":
        return
    diagonal = np.diag(np.asarray(curvature, float)) - prior_sd ** -2.0
    if not diagonal[-1] > 0:
        return
    scales = np.sqrt(np.maximum(diagonal[:-1], 0.0) / diagonal[-1])
    est.inference_diagnostics_["feature_scales"] = scales
    _warn_far_from_unit_scale(est, scales, scales)


def _warn_far_from_unit_scale(est, scales, low):
    """Warn (IdentifiabilityWarning) where ``low``, a feature's scale estimate lowered
    by its uncertainty, exceeds :data:`_LARGEST_LOGISTIC_SCALE`."""
    outside = np.flatnonzero(low > _LARGEST_LOGISTIC_SCALE)
    if len(outside):
        shown = ", ".join(f"{j}: {scales[j]:.3g}" for j in outside[:5])
        warnings.warn(
            "The released DP-SGD trace shows features far from unit scale (scale "
            f"relative to the intercept's column of ones: feature {shown}), which the "
            "default clip_norm assumes; their gradients get clipped, which pushes the "
            "coefficients outward. Scale the features with public values (for example "
            "public bounds) before fitting, or choose clip_norm from public ranges. "
            "(With a few hundred rows and a small epsilon the estimate is noisy and "
            "can fire on unit-scale features.) inference_diagnostics_['feature_scales'] "
            "holds the estimate.",
            IdentifiabilityWarning, stacklevel=5)


#: A logistic posterior's marginal sd above this multiple of the prior's is reported.
#: Given the data, a Gaussian prior and a log-concave likelihood give a posterior
#: narrower than the prior along every direction (Brascamp-Lieb); given only the
#: release, the posterior is narrower on average over releases (total variance), so
#: a posterior much wider than the prior is a failure of the inference, not the data.
#: The margin leaves room for single releases, the Monte Carlo error of the draws and
#: the one-hot blocks' prior components.
_WIDER_THAN_PRIOR = 1.5


def check_within_prior(est, draws, prior_sd):
    """Warn when the posterior draws are wider than the prior in some coordinate."""
    ratio = np.std(draws, axis=0) / prior_sd
    est.inference_diagnostics_["sd_over_prior_sd"] = ratio
    if np.max(ratio) > _WIDER_THAN_PRIOR:
        default = est.inference == "exact" and getattr(est, "error_model", None) == "auto"
        remedy = ("a larger budget" if default else
                  "the default post-processing (inference='exact', error_model='auto') "
                  "or a larger budget")
        warnings.warn(
            f"The posterior is up to {np.max(ratio):.1f} times wider than the prior "
            f"(parameters {np.flatnonzero(ratio > _WIDER_THAN_PRIOR)[:5].tolist()}); the "
            "posterior given the data never is, and given the release only rarely: the "
            f"release did not identify what inference={est.inference!r} needs. Use "
            f"{remedy}; inference_diagnostics_['sd_over_prior_sd'] holds the ratios.",
            IdentifiabilityWarning, stacklevel=4)


#: Below this expected batch per unit of noise, ``q N / (sigma C)``, the logistic
#: posterior was measured over-confident (3-10 Gaussian features at unit scale, K =
#: 60-100 fits per cell, results pages, "Small data for the budget: logistic
#: regression"): coefficient z-score sds up to 2.4-2.8 at 0.04-0.11 (300-500 rows,
#: epsilon 0.3), up to 1.2-1.9 at 0.20-0.27, 0.8-1.25 at 0.44 and above. The ratio
#: depends only on public settings: N, the noise multiplier and the clip norm. Below
#: it "auto"'s error model is "dense" (:func:`~._logistic_dense.auto_dense_model`).
SMALLEST_BATCH_OVER_NOISE = 0.3


def check_logistic_batch_noise(est, n_samples, sampling_rate, noise_multiplier, clip_norm):
    """Warn when a logistic fit has few rows per step against the DP noise.

    Only with the default clip norm: the ratio measures the signal of features of
    unit scale, which that clip norm assumes (with larger features and a clip norm
    chosen for them, the gradients grow with the clip norm).
    """
    ratio = sampling_rate * n_samples / (noise_multiplier * clip_norm)
    est.inference_diagnostics_["batch_over_noise"] = ratio
    if ratio < SMALLEST_BATCH_OVER_NOISE and est.clip_norm == "auto":
        warnings.warn(
            f"Few rows for this privacy budget: the expected batch (sampling_rate x "
            f"n_samples = {sampling_rate * n_samples:.0f} rows) is small against the DP "
            f"noise of a step (noise_multiplier x clip_norm = "
            f"{noise_multiplier * clip_norm:.0f}); their ratio {ratio:.2f} is below "
            f"{SMALLEST_BATCH_OVER_NOISE}. In simulations with such settings the "
            "posterior of the coefficients was over-confident (z-score sds 1.2-2.8, the "
            "worse the smaller the ratio): treat its intervals as too narrow. More rows "
            "or a larger epsilon raise the ratio; "
            "inference_diagnostics_['batch_over_noise'] holds it.",
            IdentifiabilityWarning, stacklevel=4)


#: Below this many relaxation times of the variational scales in the run
#: (:func:`scale_relaxations`) a full-rank fit warns, and ``variational_family="auto"``
#: fits the mean field instead. The scales start at 0.01 and climb to their optimum
#: about one unit of rho per two relaxation times (the entropy's push is ``kappa``
#: per step far below it); the full-rank posterior reads its curvature off the
#: window's averages of the scales, so a climb that reaches into the window makes it
#: too stiff. Measured (results pages, "Short runs and the variational scales";
#: coefficients from the prior, the defaults otherwise): with K = 32-40 fits per
#: cell, 90 % intervals of the full-rank fit covered 0.66-0.79 at 2-10 relaxations on
#: five designs (4 features on 1,000-20,000 rows, 6 at correlation 0.7, issue 14's
#: design), 0.86-0.88 at 12.6 and 0.84-0.91 at 20 (the defaults: T = 10,000 and
#: kappa = 0.1), the mean-field fit's 0.85-0.92 at 2-20; at K = 200 on 1,000 rows,
#: TARP 0.169 / 0.114 (authors' / prior references) at 10 relaxations against the
#: mean field's 0.019 / 0.041, and 0.053 / 0.044 against 0.038 / 0.067 at 16.
FULL_RANK_MIN_SCALE_RELAXATIONS = 16.0
#: Below this many a mean-field fit warns: at 0.45-0.9 relaxations (T = 5-20 steps)
#: its centre was off by 2-5 posterior sds or its intervals prior-wide; at 2 (T =
#: 10,000 with kappa = 0.01, or T = 100 with kappa = 0.1) it covered 0.92.
MIN_SCALE_RELAXATIONS = 1.5


def scale_relaxations(engine):
    """Relaxation times of the variational scales in a run with ``engine`` settings.

    Near its optimum a scale coordinate rho of the negative ELBO summed over a batch
    has curvature about ``2 kappa`` (``kappa (s^2 H - log s)`` in ``log s = rho``), and
    it steps by ``learning_rate * preconditioner``: ``2 kappa T lambda beta``. With the
    default preconditioning ``lambda beta = 1 / sqrt(T)`` (uncapped), so
    ``2 kappa sqrt(T)``: 20 at the defaults, whatever the data or the budget.
    """
    step = float(engine["learning_rate"]) * float(engine["preconditioner"])
    return 2.0 * float(engine["sampling_rate"]) * int(engine["n_steps"]) * step


def planned_scale_relaxations(sampling_rate, max_iter, learning_rate,
                              scale_preconditioning, capped_step=None):
    """:func:`scale_relaxations` from the estimator's parameters alone, before the run:
    with ``scale_preconditioning="auto"`` ``2 kappa T min(1 / sqrt(T), capped_step)``
    (``capped_step``: the scales' step ``lambda beta`` under the preconditioner's cap,
    :func:`capped_scale_step`; None leaves the cap out), ``2 kappa T lambda beta``
    when both are numbers, None otherwise (the learning rate depends on the noise
    multiplier)."""
    if scale_preconditioning == "auto":
        step = 1.0 / math.sqrt(int(max_iter))
        if capped_step is not None:
            step = min(step, capped_step)
        return 2.0 * float(sampling_rate) * int(max_iter) * step
    if learning_rate == "auto":
        return None
    return 2.0 * float(sampling_rate) * int(max_iter) * float(learning_rate) \
        * float(scale_preconditioning)


def capped_scale_step(model, noise_multiplier, max_iter, n_rows, learning_rate_scale):
    """The scales' step ``lambda beta`` of the default preconditioning, its cap included.

    The cap of :func:`~skdpvi.dpvi.schedule._default_preconditioning` (``beta <= C N /
    (5 sqrt(n_params))``) binds for few rows at small budgets; with the heuristic
    learning rate (``lambda`` proportional to ``1 / C``) the product does not depend on
    the clipping norm C, so it is known from public numbers before the private
    clipping norm is (computed here with C = 1).
    """
    lam = heuristic_learning_rate(noise_multiplier, 1.0, int(max_iter), 2 * model.n_params,
                                  learning_rate_scale)
    return lam * _default_preconditioning(lam, int(max_iter), model, 1.0, n_rows)


def check_scale_relaxations(est, engine, family):
    """Warn (ConvergenceWarning) when the run was too short for the variational scales
    to reach their optimum: fewer than :data:`FULL_RANK_MIN_SCALE_RELAXATIONS`
    relaxation times for a full-rank fit, :data:`MIN_SCALE_RELAXATIONS` for a
    mean-field one. Public settings only."""
    relaxations = scale_relaxations(engine)
    est.inference_diagnostics_["scale_relaxations"] = relaxations
    least = FULL_RANK_MIN_SCALE_RELAXATIONS if family == "full_rank" else MIN_SCALE_RELAXATIONS
    if relaxations < least:
        warnings.warn(
            f"The run is short for the variational scales: they relax about "
            f"{relaxations:.1f} times in max_iter={engine['n_steps']} steps at "
            f"sampling_rate={engine['sampling_rate']:g} (2 x sampling_rate x "
            f"sqrt(max_iter) with the default preconditioning), below the {least:g} the "
            f"{family.replace('_', '-')} posterior needs: its credible intervals were "
            + ("measured far too narrow there. " if family == "full_rank" else
               "measured off-centre or prior-wide there. ")
            + "Raise max_iter (or sampling_rate)"
            + (", or use variational_family='mean_field'" if family == "full_rank" else "")
            + "; inference_diagnostics_['scale_relaxations'] holds the count.",
            ConvergenceWarning, stacklevel=6)  # the user's fit


def check_logistic_fit(est, n_samples, engine, family="mean_field"):
    """The checks every logistic fit runs, whatever its variational family: the
    posterior's width against the prior (:func:`check_within_prior`), the batch
    against the noise (:func:`check_logistic_batch_noise`) and the run's length
    against the scales' relaxation (:func:`check_scale_relaxations`), for a fitted
    ``est``, its run's ``engine`` settings and its variational ``family``."""
    check_within_prior(est, est._theta_draws, est.prior_scale)
    check_logistic_batch_noise(est, n_samples, engine["sampling_rate"],
                               engine["noise_multiplier"], engine["clip_norm"])
    check_scale_relaxations(est, engine, family)
