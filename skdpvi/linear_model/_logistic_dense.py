"""The logistic estimator's dense error models: one curvature for errors and widths.

``error_model`` "dense" (the default with ``inference="exact"``), "dense_shrunk" and
"dense_matched" read one dense curvature off the released wander
(:func:`~skdpvi.noise_aware.linear_response_posterior`): the window's reading, the
wander shrunk towards the mean-field diagonal first, or the curvature matched to that
diagonal (:func:`~skdpvi.noise_aware.matched_curvature`). Post-processing only.
"""

import numpy as np

from ..noise_aware import (linear_response_posterior, logistic_wander_width, mean_field_curvature,
                           remove_wander_bias)
from ..posterior import NoiseAwarePosterior
from ._logistic_release_checks import (SMALLEST_BATCH_OVER_NOISE,
                                       wander_intercept_inflation)

#: The error models that read one dense curvature off the wander (linear response).
DENSE_MODELS = ("dense", "dense_shrunk", "dense_matched")
#: ``error_model="auto"`` (with ``inference="exact"``) takes "dense_matched" when the
#: recording window holds at least this many relaxation times of the median mean
#: coordinate: the matching reads the wander's covariance as stationary, which a
#: short window is not. Chosen by ablation (results pages, "The logistic default
#: chosen per fit"): with 3-5 relaxations (15 features at epsilon 0.3; 10 features,
#: 2,000 rows at 0.3) "dense_matched" gave 90 % intervals covering 78-87 %; UCI
#: Adult holds 0.8 / 2.2 / 6.8 at epsilon 0.1 / 0.3 / 1, where "dense" predicted
#: better at the two smaller budgets.
AUTO_MATCHED_RELAXATIONS = 5.0
#: ... and when the window's wander shows the features centred: the intercept's
#: variance inflation in the wander (:func:`~._logistic_release_checks.wander_intercept_inflation`)
#: in units of what sampling alone gives a centred design, ``(inflation - 1) r / (p - 1)``
#: with r the median relaxations and p the number of means, at most this. On centred
#: Gaussian designs (5-20 features, 2,000-10,000 rows, 200 fits each) the median
#: excess ``inflation - 1`` is about ``1.4 (p - 1) / r`` and its 90th percentile
#: about 2.5 times that, so 2.5 keeps about three quarters of the centred fits (it
#: keeps more on designs with many relaxations); features on [0, 1] read 5-30.
#: Chosen by ablation (results pages, "The logistic default chosen per fit"): 2.5 and
#: 3.5 score alike on centred designs, 2.5 better where one-hot columns are not
#: declared; the window curvature's own reading of the inflation (the explicit
#: "dense_matched" warning's) sent 30-80 % of the fits on centred designs to "dense".
AUTO_MATCHED_INFLATION = 2.5
#: What ``error_model="auto"`` takes where the window holds enough relaxations but
#: the wander does not show the features centred: "dense_shrunk", the window's
#: curvature read off the wander with its noise bulk shrunk (Ledoit-Wolf) towards the
#: mean-field diagonal: its eigenvalues spread less than the window curvature's,
#: which makes "dense" far too narrow jointly (90 % ellipsoids up by 0.03-0.14 on the
#: ablation's designs, TARP mostly within 0.005). Its own failure, exposing an inward
#: lag with its narrower intervals, needs a short window: below that many
#: relaxations "dense" stays (the shrunk curvature was worse there: 15 features at
#: epsilon 0.3, 10 features with 2,000 rows at 0.3, UCI Adult at epsilon 0.1), and
#: above it the lag still costs a little (15 features at 0.3: prior-reference TARP
#: 0.155 against 0.137). Chosen by ablation (results pages, "The fallback of the
#: per-fit choice").
AUTO_FALLBACK_MODEL = "dense_shrunk"
#: ... and "auto" matches only with a prior scale at most this: the prior is the
#: user's public statement of how large the coefficients are, and with large ones
#: (logits of several units) the trace still relaxes outward along the coefficient
#: vector in the window, which the release does not show, while the matched
#: curvature reads it as settled and is 2-3 times too narrow. Measured (results
#: page, "The fallback of the per-fit choice"): with prior scale 2-3 on five designs
#: (3-10 features, epsilon 0.3-1) the fallback's 90 % intervals covered 0.78-0.94
#: where the matched choice left 0.65-0.91; at prior scales 0.5 and 1 the per-fit
#: choice with matching beat "dense" on the designs measured (15 features at epsilon
#: 0.3 under prior references excepted).
AUTO_MATCHED_MAX_PRIOR_SCALE = 1.5
#: "dense_matched" shrinks the wander's noise bulk before the matching where the
#: window holds at least this many relaxation times of the median coordinate and at
#: most this many means per relaxation
#: (``linear_response_posterior(shrink_before_matching=...)``). Chosen by ablation
#: (results pages, "Designs not seen before, and where the joint gap sits", K = 200):
#: ten Gaussian features 0.049 / 0.051 -> 0.020 / 0.030, ten equicorrelated (rho 0.7)
#: 0.015 / 0.074 -> 0.021 / 0.062, 25 features 0.035 / 0.050 -> 0.031 / 0.035, and on
#: hold-out designs ten features with prior 0.5 0.053 / 0.075 -> 0.025 / 0.046; with
#: fewer relaxations (5 features on 1,000 rows, 6.5) or more means per relaxation
#: (20 features, 1.07) the shrinkage made the intervals too narrow.
MATCHED_BULK_SHRINKAGE = (10.0, 0.85)


def window_relaxations(result, n_params):
    """How many relaxation times of each mean coordinate the recording window holds.

    ``n * lambda_j * K_jj``, with the window's n steps, the coordinate's step and its
    curvature from the mean-field scales (:func:`~skdpvi.noise_aware.mean_field_curvature`).

    Parameters
    ----------
    result : DPVIResult
    n_params : int
        Number of mean coordinates.

    Returns
    -------
    ndarray of shape (n_params,)
    """
    p = int(n_params)
    # read at the window's mean scales: the rule's thresholds were chosen on this
    # reading (undoing the scales' wander here moved fits between the models and
    # cost small-data cells; results pages, "The scales' wander")
    diagonal = mean_field_curvature(result.stats, p, result.sampling_rate, wander=False)
    return result.stats.count * np.asarray(result.learning_rate, float)[:p] * diagonal


def auto_dense_model(result, n_params, *, fit_intercept, flat_directions=None,
                     prior_scale=1.0, batch_over_noise=None):
    """The dense error model ``error_model="auto"`` takes for this release, and why.

    "dense" wherever the batch is small against the step's noise
    (``batch_over_noise``, the fit's ``sampling_rate * n_samples / (sigma C)``, below
    the 0.3 where the fit warns of few rows: the window's reads that the choice
    rests on are then noise; results pages, "Few rows at small budgets: the
    preconditioner's cap"). Else "dense_matched" where the recording window holds at least
    :data:`AUTO_MATCHED_RELAXATIONS` relaxations of the median coordinate and, with an
    intercept, the window's wander shows the features centred
    (:data:`AUTO_MATCHED_INFLATION`), and the prior scale is at most
    :data:`AUTO_MATCHED_MAX_PRIOR_SCALE`; :data:`AUTO_FALLBACK_MODEL`
    ("dense_shrunk") where the window holds that many relaxations but one of the
    other two fails; "dense" where it holds fewer. Post-processing only.

    Parameters
    ----------
    result : DPVIResult
    n_params : int
        Number of mean coordinates (the intercept last).
    fit_intercept : bool
    flat_directions : ndarray of shape (k, n_params), optional
        Directions declared one-hot blocks leave flat, left out of the inflation.
    prior_scale : float, default=1.0
        The model's prior standard deviation of the coefficients.
    batch_over_noise : float, optional
        The fit's ratio of expected batch to noise (None: not used).

    Returns
    -------
    error_model : {"dense", "dense_shrunk", "dense_matched"}
    diagnostics : dict
        ``window_relaxations`` (the median); ``batch_over_noise`` when the ratio
        decided; ``prior_scale`` when the prior bound
        sent the fit to the fallback; else with an intercept, when the window
        holds enough relaxations, ``intercept_inflation`` and
        ``inflation_over_sampling`` (the statistic compared with the threshold).
    """
    info = {"window_relaxations": float(np.median(window_relaxations(result, n_params)))}
    if batch_over_noise is not None and batch_over_noise < SMALLEST_BATCH_OVER_NOISE:
        info["batch_over_noise"] = float(batch_over_noise)  # why: few rows for the noise
        return "dense", info
    if info["window_relaxations"] < AUTO_MATCHED_RELAXATIONS:
        return "dense", info
    if prior_scale > AUTO_MATCHED_MAX_PRIOR_SCALE:
        info["prior_scale"] = float(prior_scale)  # why: the bound, not the wander
        return AUTO_FALLBACK_MODEL, info
    if fit_intercept and n_params > 1:
        inflation = wander_intercept_inflation(result, n_params, flat_directions)
        info["intercept_inflation"] = inflation
        if inflation is None:
            return AUTO_FALLBACK_MODEL, info
        info["inflation_over_sampling"] = ((inflation - 1.0) * info["window_relaxations"]
                                           / (n_params - 1))
        if info["inflation_over_sampling"] > AUTO_MATCHED_INFLATION:
            return AUTO_FALLBACK_MODEL, info
    return "dense_matched", info


def dense_posterior(error_model, result, model, *, n_components, prior_scale,
                    flat_directions=None, wander_correction=False, random_state=None):
    """The mixture posterior of one of :data:`DENSE_MODELS`, and its diagnostics.

    Parameters
    ----------
    error_model : {"dense", "dense_shrunk", "dense_matched"}
    result : DPVIResult
        The run (its statistics, steps, noise and sampling rate).
    model : LogisticRegressionModel
    n_components : int
        Mixture components (draws of the optimum of the means).
    prior_scale : float
    flat_directions : ndarray of shape (k, n_params), optional
        "dense_matched": directions one-hot blocks leave flat (prior curvature).
    wander_correction : bool, default=False
        Remove the wander's Jensen bias (``wander_correction="probit"``), with the
        width read through the posterior's own curvature
        (:func:`~skdpvi.noise_aware.logistic_wander_width` with ``curvature``).
    random_state : int, Generator or None

    Returns
    -------
    posterior : NoiseAwarePosterior
    diagnostics : dict
        ``relaxation_times``, ``wander_width`` (with ``wander_correction``),
        ``wander_shrinkage`` ("dense_shrunk", and "dense_matched" where its gates let
        the bulk be shrunk before the matching) and ``curvature_matching``
        ("dense_matched").
    """
    p = model.n_params
    options = {}
    if error_model == "dense_shrunk":
        # full intensity (the shrinkage weight saturates at 1 for <= 1 look per
        # relaxation time)
        options = dict(diagonal_curvature=mean_field_curvature(
            result.stats, p, result.sampling_rate), effective_relaxations=1.0)
    elif error_model == "dense_matched":
        options = dict(diagonal_curvature=mean_field_curvature(
            result.stats, p, result.sampling_rate), match_diagonal=True,
            flat_directions=flat_directions, shrink_before_matching=MATCHED_BULK_SHRINKAGE)
    components, info = linear_response_posterior(
        result.stats, n_means=p, learning_rate=result.learning_rate,
        noise_std=result.noise_std, sampling_rate=result.sampling_rate,
        prior_scale=prior_scale, n_components=n_components, random_state=random_state,
        **options)
    diagnostics = {"relaxation_times": info["relaxation_times"]}
    if wander_correction:
        wander_width = logistic_wander_width(result.stats, n_means=p,
                                             sampling_rate=result.sampling_rate,
                                             prior_scale=prior_scale,
                                             curvature=info["curvature"])
        components.mean = remove_wander_bias(components.mean, wander_width,
                                             prior_scale=prior_scale,
                                             covariance=info["component_covariance"])
        diagnostics["wander_width"] = wander_width
    if "intensity" in info:  # how much of the wander was shrunk (shrunk, or before matching)
        diagnostics["wander_shrinkage"] = {"intensity": info["intensity"],
                                           "n_kept": info["n_kept"]}
    if "converged" in info:  # dense_matched: the diagonal's multipliers
        diagnostics["curvature_matching"] = {
            k: info[k] for k in ("converged", "iterations", "constraint_error")}
    return NoiseAwarePosterior.from_components(components, model, error_model), diagnostics
