"""The default post-processing: the posterior of the data statistics behind the trace.

Every released gradient is, in expectation, ``kappa (J(phi_t) eta + r(phi_t))``
(:mod:`skdpvi.models.statistics`), with known Gaussian noise of standard deviation
``tau = sigma C / beta``. So the trace after burn-in is a linear-Gaussian regression
for eta, and:

1. **Likelihood.** The normal equations ``P = sum J^T W J``, ``h = sum J^T W y``
   (W = kappa^2 / tau^2) give eta's Gaussian likelihood. Nothing here assumes that
   phi_t has settled: the design is exact at every phi_t, so the constant-step wander
   of DP-SGD, which biases a model linear in phi by a second-order (Jensen) term,
   costs nothing.
2. **Shrinkage.** Statistics that a trace identifies poorly (the off-diagonal
   entries of X^T X) get a Gaussian prior ``N(0, (gamma * scale)^2)``; gamma is
   integrated over a grid with its exact marginal likelihood, so a design with no
   correlation shrinks them to zero and a correlated one keeps them. Groups of
   statistics (``DataStatistics.shrinkage_labels``: linear regression's intercept
   column sums) get a gamma each, the last at most the others'. Pooled statistics
   (``DataStatistics.pooled_statistics``: the features' diagonal of X^T X) get a
   Gaussian prior on their contrasts, its scale by marginal likelihood, and so do
   pooled correlations (``DataStatistics.pooled_correlations``: the features'
   off-diagonal of X^T X over its natural scale ``sqrt(M_jj M_kk)``). Public
   statistics (``DataStatistics.known_statistics``, e.g. the intercept's
   ``(X^T X)_pp = N``) are fixed at their values.
3. **Prior predictive.** Draws of eta from that Gaussian are reweighted by the
   model's prior predictive density of eta (``DataStatistics.log_prior``), which
   also rules out impossible statistics (a negative residual sum of squares, a
   count outside [0, N]), and resampled: where the DP noise is larger than what
   the prior allows (the noise variance at epsilon = 0.1), the prior takes over.
   Where those importance weights are degenerate, tempered sequential Monte Carlo
   from the same draws replaces them.
4. **Components.** The model's exact (conjugate) posterior given each draw of eta
   is one mixture component of the noise-aware posterior.

Clipping. Where the mechanism clips, the expected released gradient is the
model's minus what clipping removes, predicted from a per-example predictive
distribution at a first estimate of eta and linearised there
(:mod:`skdpvi.noise_aware.statistics_clipping`; for models with
``correct_clipping``, not linear regression by default); left out where it would move the
estimate by less than 0.05 sd, and refused where a second plug-in round moves the
estimate by more than half as much as the first (the first estimate is too far off
to linearise at).

The noise of each coordinate is the mechanism's, inflated where the released
gradients scatter more around a first fit (subsampling and Monte Carlo noise, which
matter at large epsilon). A check that uses only the released trace compares eta
estimated from the two halves of the recording window: if they disagree beyond their
uncertainty, the model does not describe the trace (clipping, a transient) and a
:class:`~sklearn.exceptions.ConvergenceWarning` says so.
"""

import warnings

import numpy as np

from ..dpvi.mechanism import group_clip_norms
from ..utils.blas import limit_blas_threads
from ..exceptions import IdentifiabilityWarning
from ..models.clipping_correction import clipping_correction
from .statistics_clipping import _ClippedStatistics
from .statistics_fit import StatisticsFit, _shrinkage_fit
from .statistics_sampling import NoValidDraws, _resample
from .statistics_window import settled_window, split_check, warn_about_window

__all__ = ["statistics_posterior", "StatisticsFit"]

#: Median relative posterior sd of the scale statistics above which the fit warns.
_IDENTIFICATION_LEVEL = 0.5


def _trace_regression(result, data_statistics, start=None):
    """(phi, target, precision) of the recording window (from step ``start``, default
    the run's burn-in)."""
    if result.trace_phi is None or result.trace_grad is None:
        raise ValueError(
            "The statistics posterior needs the released trace: run the engine with "
            "record_trace=True."
        )
    burn = result.burn_in if start is None else int(start)
    phi = np.asarray(result.trace_phi[burn:-1], float)
    grad = np.asarray(result.trace_grad[burn:], float)
    kappa = result.sampling_rate
    precision = (kappa / np.asarray(result.noise_std, float)) ** 2
    precision = np.broadcast_to(precision, (phi.shape[1],)).copy()
    precision[data_statistics.unused_coordinates()] = 0.0
    return phi, grad / kappa, precision


def statistics_posterior(result, data_statistics, n_components=1000, random_state=None, *,
                         n_proposals=None, check=True, settle=True):
    """The noise-aware posterior of a DPVI run through the model's data statistics.

    Parameters
    ----------
    result : skdpvi.dpvi.DPVIResult
        A run with its trace recorded (``record_trace=True``).
    data_statistics : skdpvi.models.statistics.DataStatistics
        ``model.data_statistics(n_examples)``.
    n_components : int, default=1000
        Number of mixture components (draws of eta after resampling).
    random_state : int, numpy Generator or None
    n_proposals : int, optional
        Draws of eta before the prior-predictive reweighting; default
        ``10 * n_components`` (``2 *`` for a flat prior predictive). When it is
        left at None and the effective sample size of the weights is below
        ``n_components / 4``, tempered SMC on up to ``4 * n_components`` of the draws
        replaces the reweighting; when it is given, importance sampling is kept and
        a ``RuntimeWarning`` says the weights are degenerate.
    check : bool, default=True
        Run the split-window and residual checks and warn with a
        :class:`~sklearn.exceptions.ConvergenceWarning` when the model does not
        describe the trace.
    settle : bool, default=True
        Where the split-window check fails on the recorded window, refit on its
        later part (from a quarter, half, then three quarters of it on;
        :mod:`~skdpvi.noise_aware.statistics_window`)
        and keep the first window the check passes on, else the one it rejects
        least, and warn (:class:`~sklearn.exceptions.ConvergenceWarning`) naming
        the window used. Choosing the window from the release is post-processing:
        no privacy cost. ``diagnostics["window_start"]`` is the step the window
        used starts at. Needs ``check``.

    Returns
    -------
    components : object
        Mixture components (``n_components``, ``sample(index, rng)``).
    diagnostics : dict
        ``gamma_grid`` and ``gamma_weights`` (the shrinkage scales' grid, one column
        per group of :meth:`~skdpvi.models.statistics.DataStatistics.shrinkage_labels`
        when there are several, and its posterior), ``effective_sample_size``
        of the importance weights, ``noise_inflation`` (per coordinate: the
        released gradients' scatter around a first fit over the mechanism's noise
        variance, at least 1), ``variance_ratio`` (the overall scatter after that
        inflation), ``split_p_value``, ``eta_mean``, ``clipping_correction``
        ("off" for models that do not correct for clipping, "negligible",
        "applied", "unsettled": the plug-in did not settle and the
        clipping is left unmodelled, or "failed": the corrected fit left fewer than
        ``n_components / 10`` possible draws and the uncorrected one was used),
        ``window_start`` (the first step of the window used; ``result.burn_in``
        unless ``settle`` moved it), ``correlation_pooling`` ("on", "off" for
        statistics that pool no correlations, or "dropped": the pooled fit left no
        draw inside the model's support and the fit without it was used) and, where
        the window moved, ``recorded_window_p_value`` (the split check's p-value on
        the recorded window).
    """
    if not isinstance(n_components, (int, np.integer)) or n_components < 1:
        raise ValueError(f"n_components must be a positive integer, got {n_components!r}.")
    # small matrices: one BLAS thread; more only oversubscribe a busy machine (100x
    # slower measured for a 78 x 78 eigh with another job running)
    with limit_blas_threads(1):
        return _statistics_posterior(result, data_statistics, n_components, random_state,
                                     n_proposals, check, settle and check)


def _window_fit(base, result, start):
    """The regression of eta on the window from step ``start``: a dict with the window's
    (phi, target, precision, halves), the statistics regressed on (clipping
    corrected or not), the correction's state and the regression."""
    phi, target, precision = _trace_regression(result, base, start)
    if len(phi) < 4:
        raise ValueError(
            f"The trace after burn-in has {len(phi)} pairs; at least 4 are needed. "
            "Increase max_iter or lower burn_in."
        )
    if not (np.all(np.isfinite(phi)) and np.all(np.isfinite(target))):
        raise ValueError(
            "The DP-SGD trace contains non-finite values; the optimisation diverged. "
            "Lower learning_rate (or learning_rate_scale) or check the data."
        )
    half = len(phi) // 2
    halves = (slice(0, half), slice(half, None))
    corrected = _undo_clipping(base, result, phi, target, precision, halves)
    correction = ("off" if not getattr(base, "correct_clipping", True)
                  else "unsettled" if corrected is None
                  else "applied" if corrected is not base else "negligible")
    statistics = base if corrected is None else corrected
    return dict(phi=phi, target=target, precision=precision, halves=halves, start=start,
                statistics=statistics, correction=correction,
                regression=_regression(statistics, phi, target, precision, halves))


def _statistics_posterior(result, data_statistics, n_components, random_state, n_proposals,
                          check, settle):
    rng = np.random.default_rng(random_state)
    base = data_statistics
    if settle:
        window, p_recorded = settled_window(lambda start: _window_fit(base, result, start),
                                            result.burn_in, result.n_steps)
    else:
        window, p_recorded = _window_fit(base, result, result.burn_in), None
    phi, target, precision, halves = (window[k] for k in ("phi", "target", "precision",
                                                          "halves"))
    data_statistics, correction = window["statistics"], window["correction"]
    regression = window["regression"]
    pooling = "on" if len(base.pooled_correlations()[0]) else "off"

    def without_pooling(error):
        """Refit without the correlations' pooling where it left no valid draw."""
        if pooling == "off" or not isinstance(error, NoValidDraws):
            error.window_start = int(window["start"])  # for a caller's fallback
            raise error
        unpooled = _regression(base, phi, target, precision, halves, pool_correlations=False)
        try:
            return (*_resample_or_explain(base, unpooled, n_components, rng, n_proposals),
                    unpooled)
        except NoValidDraws as again:
            again.window_start = int(window["start"])
            raise

    try:
        components, sampling = _resample_or_explain(data_statistics, regression, n_components,
                                                    rng, n_proposals,
                                                    strict=data_statistics is not base)
    except ValueError as error:
        if data_statistics is base:
            # pooled correlations whose X^T X leaves every draw outside the model's
            # support (a residual sum of squares below 0 where the signal dominates
            # y): the prior contradicts the release, drop it
            components, sampling, regression = without_pooling(error)
            pooling = "dropped"
        else:
            # the linearised correction put (nearly) every draw outside the model's
            # support (a first estimate too far from the truth to linearise at): without it
            data_statistics, correction = base, "failed"
            regression = _regression(base, phi, target, precision, halves)
            try:
                components, sampling = _resample_or_explain(base, regression, n_components,
                                                            rng, n_proposals)
            except NoValidDraws as again:
                components, sampling, regression = without_pooling(again)
                pooling = "dropped"
    fit = regression["fit"]
    diagnostics = {"gamma_grid": fit.gammas, "gamma_weights": fit.weights,
                   "eta_mean": fit.mean, "noise_inflation": regression["ratio"],
                   "clipping_correction": correction, "window_start": int(window["start"]),
                   "correlation_pooling": pooling}
    if p_recorded is not None:
        diagnostics["recorded_window_p_value"] = p_recorded
    if check:
        if regression is not window["regression"]:  # refitted without the correction
            window = {**window, "regression": regression, "check": None}
        diagnostics.update(split_check(window))
        warn_about_window(diagnostics["split_p_value"], window["start"], p_recorded)
        diagnostics.update(_identification_check(data_statistics,
                                                 regression["identification_fit"]))
    diagnostics.update(sampling)
    return components, diagnostics


def _resample_or_explain(data_statistics, regression, n_components, rng, n_proposals,
                         strict=False):
    """:func:`_resample`; a :class:`NoValidDraws` it raises carries the regression's
    mean of eta (``eta_mean``), so that a caller falling back to another backend can
    still check the design on it (a target or features far off the priors' scale is
    the usual cause)."""
    try:
        return _resample(data_statistics, regression["fit"], n_components, rng, n_proposals,
                         strict=strict)
    except NoValidDraws as error:
        error.eta_mean = regression["fit"].mean
        raise


def _regression(data_statistics, phi, target, precision, halves, pool_correlations=True):
    """eta's Gaussian posterior from the trace (the normal equations, the shrinkage)."""
    precision, ratio = _noise_precision(data_statistics, phi, target, precision, halves)
    parts = [data_statistics.normal_equations(phi[s], target[s], precision) for s in halves]
    P = parts[0][0] + parts[1][0]
    h = parts[0][1] + parts[1][1]
    yy = parts[0][2] + parts[1][2]
    fit, prior, index, scale = _shrinkage_fit(data_statistics, P, h, pool_correlations)
    if prior is not None:
        P, h = P + prior[0], h + prior[1]
        parts = [(P_k + 0.5 * prior[0], h_k + 0.5 * prior[1], yy_k) for P_k, h_k, yy_k in parts]
    identification_fit = fit
    if fit.pooling is not None:
        # what the trace itself identifies, without the pooling prior's help, at the
        # most probable shrinkage: the identification check's threshold was measured so
        best = fit.index_gammas[np.argmax(fit.weights)]
        gamma = float(best.max(initial=1.0))
        identification_fit = StatisticsFit(P - fit.pooling, h, index, scale, gammas=(gamma,),
                                           known=data_statistics.known_statistics())
    return dict(fit=fit, parts=parts, P=P, h=h, yy=yy, index=index, scale=scale, ratio=ratio,
                identification_fit=identification_fit)


def _first_fit(data_statistics, phi, target, precision, halves, full=False):
    """eta under a nearly flat prior (no shrinkage of a coupling the trace shows)."""
    P = h = 0.0
    for s in halves:
        P_k, h_k, _ = data_statistics.normal_equations(phi[s], target[s], precision)
        P, h = P + P_k, h + h_k
    index, _ = data_statistics.shrinkage_groups()
    fit = StatisticsFit(P, h, index, np.full(len(index), 1e6), gammas=(1.0,),
                        known=data_statistics.known_statistics())
    return fit if full else fit.means[0]


#: Below this shift of the first fit (in its posterior sds) the clipping correction
#: is left out: what the model predicts is clipped does not move the fit.
_NEGLIGIBLE_CLIPPING = 0.05


def _undo_clipping(data_statistics, result, phi, target, precision, halves):
    """The model's statistics as the clipped mechanism sees them.

    For models with a per-example predictive
    (:func:`skdpvi.models.clipping_correction.clipping_correction`), clipping removes
    ``lost(eta)`` from the expected gradient. Linearised at a first estimate, the
    expected gradient becomes ``(J - L) eta + r - lost(eta_hat) + L eta_hat`` with
    ``L = d lost / d eta``: the correction moves the fit, and its slope makes the
    gradients less sensitive to eta (a clipped example contributes C, whatever its
    statistic), which widens eta's posterior as it should.

    Returns the statistics to regress on: ``data_statistics`` itself when what the
    model predicts is clipped moves the first fit by less than 0.05 posterior sd, and
    None when the plug-in does not settle (a second round moves the estimate by more
    than half as much as the first).
    """
    if not getattr(data_statistics, "correct_clipping", True) or (
            data_statistics.per_example_predictive(
                np.zeros(data_statistics.n_statistics)) is None):
        return data_statistics
    preconditioner = np.asarray(result.preconditioner, float)
    first = _first_fit(data_statistics, phi, target, precision, halves, full=True)
    sd = np.sqrt(np.maximum(np.diag(first.covs[0]), 0.0))
    free = sd > 0
    if not free.any():
        return data_statistics

    def shift(a, b):
        return float(np.max(np.abs(a - b)[free] / sd[free]))

    clip_norms = _clip_norms(data_statistics.model, result.clip_norm)
    lost = clipping_correction(data_statistics, phi, first.means[0], preconditioner,
                               clip_norms)
    eta = _first_fit(data_statistics, phi, target + lost, precision, halves)
    moved = shift(eta, first.means[0])
    if moved < _NEGLIGIBLE_CLIPPING:
        return data_statistics
    # a second plug-in round must move the estimate by less than half the first: a
    # correction that does not settle is extrapolated from a first estimate too far
    # from the truth (or from a predictive of x that does not fit the data)
    lost = clipping_correction(data_statistics, phi, eta, preconditioner, clip_norms)
    again = _first_fit(data_statistics, phi, target + lost, precision, halves)
    if shift(again, eta) > 0.5 * moved:
        return None
    return _ClippedStatistics(data_statistics, eta, preconditioner, clip_norms,
                              trace_phi=phi, lost=lost)


def _clip_norms(model, clip_norm):
    """C, or the mechanism's group clip norms for a model with ``clip_shares``."""
    shares = getattr(model, "clip_shares", None)
    return clip_norm if shares is None else group_clip_norms(clip_norm, shares)


def _noise_precision(data_statistics, phi, target, precision, halves):
    """The mechanism's noise precision, lowered where the trace scatters more.

    Besides the DP noise, a released gradient carries the subsampling and Monte
    Carlo noise of its batch, negligible at small epsilon but not at large: the
    residual scatter of each coordinate around a first fit (at least 1) divides its
    precision.
    """
    eta = _first_fit(data_statistics, phi, target, precision, halves)
    residual = target - data_statistics.expected_gradient(phi, eta)
    ratio = np.maximum((residual**2).mean(0) * precision, 1.0)
    return precision / ratio, ratio


def _identification_check(data_statistics, fit):
    """Warn when the trace leaves the posterior's scale statistics to their prior.

    Measured on linear regression (benchmarks, results pages): where the median
    relative sd of the diagonal of X^T X was 0.05-0.34 the intervals were calibrated
    or conservative; at 0.54-0.88 (300 rows, epsilon 0.3) the estimates were off by
    their own size and the intervals 2-3 times too narrow.
    """
    index = data_statistics.scale_statistics()
    if not len(index):
        return {}
    best = int(np.argmax(fit.weights))
    mean, sd = fit.means[best][index], np.sqrt(np.maximum(np.diag(fit.covs[best])[index], 0))
    relative = float(np.median(sd / np.maximum(np.abs(mean), 1e-300)))
    if relative > _IDENTIFICATION_LEVEL:
        warnings.warn(
            f"The released DP-SGD gradients identify the data's scale statistics only to "
            f"+-{relative:.0%} (median relative sd): the noise-aware posterior rests on "
            "their prior, and its credible intervals may be miscalibrated. More rows, a "
            "larger epsilon or a larger max_iter make the trace informative.",
            IdentifiabilityWarning, stacklevel=4)
    return {"scale_relative_sd": relative}
