"""Shared machinery of the two estimators: DPVI, post-processing, fitted attributes.

:meth:`_BaseDPBayesianRegression._fit` composes the packages in the order of the
data flow, in three parts:

(a) :meth:`~skdpvi.linear_model._settings._SettingsMixin._engine_settings` (in
    :mod:`._settings`): the validated parameters,
    the accountant's noise multiplier for the budget (:mod:`skdpvi.accounting`), the
    subclass's model, the clipping norm (for logistic regression measured privately
    from the rows' norms, :mod:`skdpvi.dpvi.clip_bound`), learning rate and
    preconditioner -- all that the engine needs, as one object whose ``engine`` dict
    goes verbatim to either engine;
(b) the private DP-SGD run (:func:`skdpvi.dpvi.run_dpvi`);
(c) :meth:`~_BaseDPBayesianRegression._fit_from_result`: the noise-aware
    post-processing of what the run released (:mod:`skdpvi.noise_aware`: by default
    the posterior of the data statistics behind the trace,
    :func:`~skdpvi.noise_aware.statistics_posterior`; or the paper's draws of phi*),
    the mixture posterior (:class:`skdpvi.posterior.NoiseAwarePosterior`) and the
    fitted attributes.

A single fit is (a) + (b) + (c). :meth:`~_BaseDPBayesianRegression._fit_batch`, for
simulation studies, calls (a) per data set, runs (b) for all data sets in lockstep
(:func:`skdpvi.dpvi.run_dpvi_batched`) and (c) once per data set, which gives every
data set the fit it would get alone. A subclass supplies the model (``_make_model``),
its default clipping norm and learning-rate scale, the targets (``_fit_inputs``) and
the predictions.
"""

import numbers
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ..dpvi import run_dpvi, run_dpvi_batched
from ..noise_aware import (FlatPriorComponents, onehot_flat_directions, sample_phi_star,
                           statistics_posterior)
from ..noise_aware.flat_directions import check_onehot_rows, validate_onehot_blocks
from ..noise_aware.statistics_sampling import NoValidDraws
from ..posterior import NoiseAwarePosterior
from ._input_checks import check_input_design, check_input_magnitude
from ._reporting import _describe_diagnostics, _progress
from ._settings import STATISTICS, _SettingsMixin


class _BaseDPBayesianRegression(_SettingsMixin, BaseEstimator):
    """Base class; subclasses define the model, the targets and the predictions."""

    #: Whether ``fit`` warns about nearly collinear features (:mod:`._input_checks`).
    _checks_collinearity = False

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        max_iter=10_000,
        sampling_rate=0.1,
        clip_norm="auto",
        learning_rate="auto",
        learning_rate_scale="auto",
        scale_preconditioning="auto",
        n_mc_samples=10,
        elbo_gradients="monte_carlo",
        burn_in=0.2,
        inference="statistics",
        n_posterior_samples=1000,
        fit_intercept=True,
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.max_iter = max_iter
        self.sampling_rate = sampling_rate
        self.clip_norm = clip_norm
        self.learning_rate = learning_rate
        self.learning_rate_scale = learning_rate_scale
        self.scale_preconditioning = scale_preconditioning
        self.n_mc_samples = n_mc_samples
        self.elbo_gradients = elbo_gradients
        self.burn_in = burn_in
        self.inference = inference
        self.n_posterior_samples = n_posterior_samples
        self.fit_intercept = fit_intercept
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _default_learning_rate_scale(self, dim):
        """lambda_c when ``learning_rate_scale="auto"``; ``dim`` = 2 * n_params."""
        raise NotImplementedError

    # ------------------------------------------------------------------ validation

    def _validate_fit_data(self, X, y):
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32], y_numeric=self._y_numeric,
                             accept_sparse="csr")
        if X.shape[0] < 2:
            raise ValueError(
                f"Found n_samples={X.shape[0]}: one sample cannot be fitted; "
                "at least 2 are needed."
            )
        check_input_magnitude("X", X)
        if self._y_numeric:
            check_input_magnitude("y", y)
        declared = self._onehot_blocks(X.shape[1])
        check_onehot_rows(X, declared)
        check_input_design(X, declared, self.fit_intercept,
                           collinearity=self._checks_collinearity)
        return X, y

    def _onehot_blocks(self, n_features):
        """``onehot_blocks`` as a list of int arrays, validated against n_features."""
        return validate_onehot_blocks(self.onehot_blocks, n_features)

    # --------------------------------------------------------------------- fitting

    def _fit(self, X, y_model):
        """Run the private mechanism and the noise-aware post-processing: (a), (b), (c)."""
        seeds = self._fit_seeds()
        settings = self._engine_settings(X.shape[0], X.shape[1], X, seeds.engine)
        result = run_dpvi(data=(X, y_model), random_state=seeds.engine, verbose=self.verbose,
                          **settings.engine)
        return self._fit_from_result(result, settings, X.shape[0], seeds)

    def _fit_from_result(self, result, settings, n_samples, seeds):
        """(c) Post-process a run's release and set the fitted attributes.

        Parameters
        ----------
        result : DPVIResult
            The release of the run with ``settings``.
        settings : _FitSettings
            What :meth:`_engine_settings` returned.
        n_samples : int
            Rows of the data.
        seeds : _FitSeeds

        Returns
        -------
        theta_mean : ndarray of shape (n_params,)
            The mean of the posterior draws.
        """
        model = settings.engine["model"]
        verbose = int(self.verbose)
        start = time.perf_counter()
        if self.inference == STATISTICS:
            try:
                components, diagnostics = statistics_posterior(
                    result, model.data_statistics(n_samples), int(self.n_posterior_samples),
                    random_state=seeds.post)
                # the window the posterior settled on, for every later check too
                result = result.with_window(diagnostics["window_start"])
                self.posterior_ = NoiseAwarePosterior.from_components(components, model,
                                                                      self.inference)
                what = "mixture components"
            except NoValidDraws as error:
                result = result.with_window(getattr(error, "window_start", result.burn_in))
                # one unusual data set must not end a study of hundreds of fits: the
                # paper's gradient model needs no draw inside the model's support
                warnings.warn(
                    f"{error} The fit falls back to the paper's gradient model "
                    "(inference='exact'), whose intervals are less reliable; "
                    "inference_diagnostics_['fallback'] says so. The usual cause is a "
                    "target or features far from the scale the priors assume: scale "
                    "them with public values (user guide, 'Scaling the target and "
                    "choosing the priors').",
                    ConvergenceWarning, stacklevel=2)
                phi_star, diagnostics = sample_phi_star(
                    result, "exact", int(self.n_posterior_samples), random_state=seeds.post)
                self.posterior_ = NoiseAwarePosterior(phi_star, model, "exact")
                # the statistics' estimate, for the design checks that say why
                diagnostics = {**diagnostics, "fallback": "exact",
                               "eta_mean": getattr(error, "eta_mean", None),
                               "window_start": result.burn_in}
                what = "draws of phi* (fallback)"
        else:
            phi_star, diagnostics = sample_phi_star(
                result, self._phi_star_backend(), int(self.n_posterior_samples),
                random_state=seeds.post)
            self.posterior_, extra = self._posterior_from_draws(phi_star, result, model,
                                                                seeds.post)
            diagnostics = {**diagnostics, **extra}
            what = ("draws of phi*" if self.posterior_.method == self.inference
                    else f"{self.posterior_.method} mixture components")
        self.posterior_ = self._finish_posterior(self.posterior_, model)
        _progress(verbose, 1, f"post-processing: inference={self.inference!r}, "
                              f"{int(self.n_posterior_samples)} {what} "
                              f"({time.perf_counter() - start:.1f} s)")
        for line in _describe_diagnostics(diagnostics) if verbose >= 2 else ():
            _progress(verbose, 2, line)
        self._set_fit_attributes(result, settings, seeds, diagnostics)
        return self._set_point_estimates(model)

    def _set_fit_attributes(self, result, settings, seeds, diagnostics):
        """The fitted attributes of the release and its mechanism (not the posterior's)."""
        self.dpvi_result_ = result
        self.inference_diagnostics_ = diagnostics
        self.noise_multiplier_ = settings.engine["noise_multiplier"]
        self.epsilon_ = settings.epsilon
        self.delta_ = float(self.delta)
        self.clip_norm_ = settings.engine["clip_norm"]
        self.clip_histogram_noise_ = settings.clip_histogram_noise
        self.n_iter_ = int(self.max_iter)
        self.burn_in_ = settings.engine["burn_in"]
        self._draw_seed = seeds.draw

    def _set_point_estimates(self, model):
        """Name ``posterior_``'s parameters, draw the predictions' ``_theta_draws``
        (seed ``_draw_seed``) and set ``coef_`` and ``intercept_``; returns the draws'
        mean."""
        # predictions follow the fitted parameters, not a later set_params(fit_intercept=...)
        self._fitted_intercept = bool(self.fit_intercept)
        self.param_names_ = np.array(self._named_params(model.param_names), dtype=object)
        self.posterior_.param_names = self.param_names_
        self._theta_draws = self.posterior_.sample(
            int(self.n_posterior_samples), random_state=int(self._draw_seed)
        )
        theta_mean = self._theta_draws.mean(0)
        n_features = self.n_features_in_
        self.coef_ = theta_mean[:n_features]
        self.intercept_ = float(theta_mean[n_features]) if self._fitted_intercept else 0.0
        return theta_mean

    def _fit_batch(self, datasets, random_states, verbose=0):
        """Fit one clone of this estimator per data set, their DP-SGD runs in lockstep.

        Clone k is ``clone(self).set_params(random_state=random_states[k])`` fitted on
        ``datasets[k]``, with the same seeds, settings and post-processing as its own
        ``fit``: only its DP-SGD run goes through
        :func:`~skdpvi.dpvi.run_dpvi_batched`, whose release equals
        :func:`~skdpvi.dpvi.run_dpvi`'s up to float rounding. Parts (a) and (c) run
        once per data set ((a) is cheap: the accountant's search is cached, and a
        private clipping norm's histogram takes milliseconds). Data sets of different
        shapes run in separate lockstep groups, and so do data sets whose private
        clipping norms differ. For
        simulation studies (:func:`skdpvi.metrics.run_tarp_study`).

        Parameters
        ----------
        datasets : sequence of (X, y)
        random_states : sequence of int
        verbose : int, default=0
            Progress bar of the lockstep runs.

        Returns
        -------
        list of fitted estimators
            In the order of ``datasets``.
        """
        if len(datasets) != len(random_states):
            raise ValueError("datasets and random_states must have the same length.")
        fitted = [clone(self).set_params(random_state=int(s)) for s in random_states]
        inputs = [est._fit_inputs(X, y) for est, (X, y) in zip(fitted, datasets)]
        return self._fit_prepared_batch(fitted, inputs, verbose)

    @staticmethod
    def _fit_prepared_batch(fitted, inputs, verbose=0):
        """:meth:`_fit_batch` from estimators whose inputs are validated already:
        ``inputs[k]`` is ``fitted[k]``'s ``(X, y_model)``; returns ``fitted``.

        The runs of a group (same shape and clipping norm) share its first member's
        engine settings, the model included: a model must not carry anything of one
        data set (the decorrelated fits rotate their rows before they get here)."""
        seeds = [est._fit_seeds() for est in fitted]
        settings = [est._engine_settings(X.shape[0], X.shape[1], X, s.engine)
                    for est, (X, _), s in zip(fitted, inputs, seeds)]
        groups = {}
        for k, (X, y) in enumerate(inputs):
            groups.setdefault((X.shape, settings[k].engine["clip_norm"]), []).append(k)
        for ((n_samples, _), _), members in groups.items():
            results = run_dpvi_batched(datasets=[inputs[k] for k in members],
                                       random_states=[seeds[k].engine for k in members],
                                       verbose=verbose, **settings[members[0]].engine)
            for k, result in zip(members, results):
                fitted[k]._fit_from_result(result, settings[k], n_samples, seeds[k])
        return fitted

    def _fit_inputs(self, X, y):
        """Validated ``(X, y_model)`` for the engine; sets ``n_features_in_`` & co."""
        raise NotImplementedError

    def _phi_star_backend(self):
        """The backend whose draws of phi* :meth:`_posterior_from_draws` receives."""
        return self.inference

    def _posterior_from_draws(self, phi_star, result, model, seed):
        """The mixture posterior from the backend's draws of phi* (a subclass may
        remodel them), and diagnostics to add to the backend's."""
        return NoiseAwarePosterior(phi_star, model, self.inference), {}

    def _finish_posterior(self, posterior, model):
        """The posterior with the prior along the directions ``onehot_blocks`` leave
        the likelihood flat in (:mod:`skdpvi.noise_aware.flat_directions`), or the
        posterior itself without blocks."""
        directions = self._onehot_flat_directions()
        if not len(directions):
            return posterior
        # the coefficients and the intercept come first; other parameters are untouched
        directions = np.pad(directions, ((0, 0), (0, model.n_params - directions.shape[1])))
        components = FlatPriorComponents(posterior.components, directions,
                                         model.weight_prior_sd)
        return NoiseAwarePosterior.from_components(components, model, posterior.method)

    def _onehot_flat_directions(self):
        """The directions ``onehot_blocks`` leave the likelihood flat in: orthonormal
        rows over the coefficients and the intercept (none: shape (0, p)).

        A decorrelated logistic fit's inner estimator has them given, rotated
        (``_given_flat_directions``), since its coordinates are not the features'.
        """
        given = getattr(self, "_given_flat_directions", None)
        if given is not None:
            return given
        return onehot_flat_directions(self._onehot_blocks(self.n_features_in_),
                                      self.n_features_in_, self.fit_intercept)

    def _batch_fit_supported(self):
        """Whether :meth:`_fit_batch` gives the fits of ``fit``: not if a subclass
        outside skdpvi overrides the fitting."""
        cls = type(self)
        return all(getattr(cls, name).__module__.startswith("skdpvi.linear_model")
                   for name in ("fit", "_fit", "_fit_inputs", "_fit_from_result",
                                "_engine_settings", "_step_matrix", "_phi_star_backend",
                                "_posterior_from_draws", "_finish_posterior"))

    def _named_params(self, model_names):
        """The model's parameter names, ``coef[j]`` renamed ``coef[<feature j>]``.

        Only when ``fit`` saw column names (``feature_names_in_``); otherwise the
        model's names are kept.
        """
        names = list(model_names)
        for j, feature in enumerate(getattr(self, "feature_names_in_", ())):
            if f"coef[{j}]" in names:
                names[names.index(f"coef[{j}]")] = f"coef[{feature}]"
        return names

    # ------------------------------------------------------------------- posterior

    def sample_posterior(self, n_samples=1000, *, random_state=None, unconstrained=False):
        """Draw model parameters from the noise-aware posterior.

        Parameters
        ----------
        n_samples : int, default=1000
        random_state : int, RandomState, Generator or None, default=None
            Source of the draws. None draws fresh ones on every call, whatever the
            estimator's own ``random_state`` (which fixes the fit: the release and
            the posterior); pass an int for the same draws every time.
        unconstrained : bool, default=False
            Return draws in the unconstrained space of the variational
            approximation (e.g. softplus-inverse of the noise variance).

        Returns
        -------
        ndarray of shape (n_samples, n_params)
            Columns follow ``param_names_``: coefficients, then the intercept
            (if fitted), then (linear model) the noise variance.

        Examples
        --------
        >>> from sklearn.datasets import make_classification
        >>> from skdpvi import DPBayesianLogisticRegression
        >>> X, y = make_classification(n_samples=500, n_features=3, n_informative=2,
        ...                            n_redundant=0, random_state=0)
        >>> clf = DPBayesianLogisticRegression(epsilon=3.0, max_iter=500,
        ...                                    inference="exact", random_state=0).fit(X, y)
        >>> clf.sample_posterior(100, random_state=0).shape
        (100, 4)
        """
        check_is_fitted(self)
        seed = _to_seed(random_state)
        return self.posterior_.sample(n_samples, random_state=seed, unconstrained=unconstrained)

    def _check_X(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=[np.float64, np.float32],
                             accept_sparse="csr")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = True
        tags.non_deterministic = False
        return tags


def _to_seed(random_state):
    if random_state is None or isinstance(random_state, (numbers.Integral, np.integer)):
        return random_state
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**31 - 1))
    return check_random_state(random_state).randint(0, 2**31 - 1)
