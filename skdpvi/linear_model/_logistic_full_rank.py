"""The logistic estimator's full-rank variational family (``variational_family``).

A fit runs DP-SGD on ``q = N(m, L L^T)`` (:func:`~skdpvi.dpvi.run_dpvi_full_rank`)
with the mechanism the mean-field fit would run (the same accountant, noise
multiplier, private clipping norm, learning rate and burn-in), and reads the
posterior's curvature off the release's scale moments
(:func:`~skdpvi.noise_aware.full_rank_posterior`) instead of the wander's covariance,
its off-diagonal noise shrunk (``CURVATURE_SHRINKAGE``).
The wander's outward (Jensen) bias is removed as ``wander_correction="probit"``
does for the mean-field fit, read through the full-rank curvature ("auto": with an
intercept). The mean-field options that remodel the wander's curvature
(``error_model``, ``decorrelation``) and the other backends do not apply. A
simulation study's fits run in lockstep (:meth:`_FullRankMixin._fit_batch`,
:func:`~skdpvi.dpvi.run_dpvi_full_rank_batched`), each as its own fit would.
``variational_family="auto"`` (the default) fits it on small problems, with runs long
enough for its scales and priors no wider than 1 (:func:`_FullRankMixin._family_for`):
measured on nine designs (results pages,
"Clipping the full-rank blocks apart, and the full rank as the default"), its
joint ellipsoids cover 0.81-0.94 where the mean-field fit's cover 0.07-0.67, with
two failures that set the rule's bounds (too wide where most scale rows clip; the
centre correction over-corrects at 21 parameters).
"""

import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from ..dpvi.full_rank import run_dpvi_full_rank, run_dpvi_full_rank_batched
from ..noise_aware.full_rank import full_rank_posterior
from ..noise_aware.sampling import _check_settled
from ..posterior import NoiseAwarePosterior
from ..utils.validation import is_positive_real
from ._logistic_release_checks import (FULL_RANK_MIN_SCALE_RELAXATIONS, check_full_rank_scales,
                                       capped_scale_step, check_logistic_fit,
                                       planned_scale_relaxations)
from ._reporting import _describe_diagnostics, _progress

#: The values of ``variational_family``.
VARIATIONAL_FAMILIES = ("auto", "mean_field", "full_rank")
#: "auto" fits the full-rank family up to this many parameters (intercept included):
#: the largest of the measured designs where it was calibrated (12 features at rho
#: 0.3 on 3,000 rows; at 21 parameters its centre correction over-corrects, TARP with
#: prior references 0.208 against the mean-field fit's 0.039: results pages).
AUTO_MAX_PARAMS = 13
#: ... and up to this many (expected batch rows) x (parameters)^2 per step, the full-rank
#: step's cost: about the measured designs' range (issue 14's design, 11 parameters on
#: 10,000 rows: 1.2e5, about 4.6 s a fit), where the mean-field fit's joint widths fail
#: (its joint gap is the DP noise's, which shrinks relative to the data with N).
AUTO_MAX_STEP_COST = 5.0e5
#: ... and with a prior scale up to this: with coefficients drawn from a wider prior
#: (4 Gaussian features, 5,000 rows, epsilon 1) the full-rank fit was too narrow,
#: TARP 0.034 / 0.077 (authors' / prior references, K = 100) at prior scale 1.5 and
#: 0.107 / 0.168 at 2 (K = 200, coverage 0.73-0.80), where the mean-field fit got
#: 0.036 / 0.028 and 0.054 / 0.076 (coverage 0.89-0.91; results pages, "Short runs
#: and the variational scales"). Neither is calibrated at 2.
AUTO_MAX_PRIOR_SCALE = 1.0
#: The curvature's off-diagonal noise, measured by the halves of the window, shrunk
#: towards its diagonal plus its part along the means
#: (:func:`~skdpvi.noise_aware.full_rank.shrink_to_diagonal`): on six designs (K =
#: 200-300, the same releases) TARP as good or better on both reference schemes
#: (results pages, "The full-rank default on the public API's hold-outs, and in
#: lockstep"); towards the diagonal alone it lost the curvature along the
#: coefficients.
CURVATURE_SHRINKAGE = "radial"


def check_full_rank_prior(est):
    """Warn (ConvergenceWarning) when a full-rank fit has a prior wider than
    :data:`AUTO_MAX_PRIOR_SCALE`, where its intervals were measured too narrow and
    "auto" fits the mean field."""
    if float(est.prior_scale) > AUTO_MAX_PRIOR_SCALE:
        warnings.warn(
            f"variational_family='full_rank' with prior_scale={est.prior_scale:g}: with "
            f"coefficients drawn from priors wider than {AUTO_MAX_PRIOR_SCALE:g} its "
            "credible intervals were measured too narrow (90 % intervals covering "
            "0.47-0.80 on three designs at prior scale 2): the DP-SGD trace has not "
            "reached the optimum "
            "along the coefficients when the logits are large, however long the run. "
            "variational_family='auto' fits the mean field there; check the fit with "
            "skdpvi.metrics.run_tarp_study on simulated data like yours.",
            ConvergenceWarning, stacklevel=5)


class _FullRankMixin:
    """``variational_family`` of :class:`DPBayesianLogisticRegression`."""

    def _full_rank_unsupported(self):
        """The options set that the full-rank fit does not support: ``{name: (value,
        supported)}``."""
        options = {"inference": (self.inference, "exact"),
                   "error_model": (self.error_model, "auto"),
                   "device": (self.device, "cpu"),
                   "decorrelation": (self.decorrelation, None)}
        return {name: pair for name, pair in options.items() if pair[0] != pair[1]}

    def _check_variational_family(self):
        """Raise for a bad ``variational_family`` or an option "full_rank" does not support."""
        if self.variational_family not in VARIATIONAL_FAMILIES:
            raise ValueError(f"variational_family must be one of {VARIATIONAL_FAMILIES}, "
                             f"got variational_family={self.variational_family!r}.")
        if self.variational_family != "full_rank":
            return
        for name, (value, supported) in self._full_rank_unsupported().items():
            if name == "decorrelation":
                raise ValueError("decorrelation rotates the mean-field fit; with "
                                 "variational_family='full_rank' the fit reads the "
                                 "correlations itself (decorrelation must be None).")
            raise ValueError(f"variational_family='full_rank' needs {name}={supported!r}, "
                             f"got {name}={value!r}.")

    def _family_for(self, X):
        """The family a fit on ``X`` runs: ``variational_family``, or what "auto" makes of
        it from public facts (the shape and the options set; sparse input is densified
        by the full-rank fit, which "auto" allows only where that is small; a run too
        short for the scales to settle, :data:`FULL_RANK_MIN_SCALE_RELAXATIONS`, or a
        prior wider than :data:`AUTO_MAX_PRIOR_SCALE` gets the mean field)."""
        if self.variational_family != "auto":
            return self.variational_family
        n_rows, n_features = X.shape if sp.issparse(X) else np.shape(X)
        n_params = n_features + int(bool(self.fit_intercept))
        try:
            cost = float(self.sampling_rate) * n_rows * n_params**2
        except (TypeError, ValueError):  # the engine's settings raise, naming it
            return "mean_field"
        if self._full_rank_unsupported() or n_params > AUTO_MAX_PARAMS \
                or cost > AUTO_MAX_STEP_COST or not (
                    is_positive_real(self.prior_scale)
                    and self.prior_scale <= AUTO_MAX_PRIOR_SCALE):
            return "mean_field"
        try:
            relaxations = planned_scale_relaxations(self.sampling_rate, self.max_iter,
                                                    self.learning_rate,
                                                    self.scale_preconditioning,
                                                    self._capped_scale_step(n_rows, n_features))
        except (TypeError, ValueError):  # the engine's settings raise, naming it
            relaxations = None
        if relaxations is not None and relaxations < FULL_RANK_MIN_SCALE_RELAXATIONS:
            return "mean_field"
        return "full_rank"

    def _capped_scale_step(self, n_rows, n_features):
        """The scales' step under the default preconditioner's cap, for "auto"'s count
        of relaxations (None where the learning rate or the preconditioning is set);
        public numbers only: the shape, the budget's noise multiplier (the accountant's,
        cached for the fit that follows) and the parameters."""
        if self.learning_rate != "auto" or self.scale_preconditioning != "auto":
            return None
        model = self._make_model(n_features)
        sigma, _ = self._run_noise_multiplier(n_rows)
        return capped_scale_step(model, sigma, self.max_iter, n_rows,
                                 self._learning_rate_scale(model))

    def _fit_full_rank(self, X, y01):
        """``fit`` with ``variational_family="full_rank"`` on validated inputs."""
        seeds = self._fit_seeds()
        settings = self._engine_settings(X.shape[0], X.shape[1], X, seeds.engine)
        release = run_dpvi_full_rank(self._full_rank_rows(X), y01, random_state=seeds.engine,
                                     verbose=self.verbose, **self._full_rank_engine(settings))
        self._finish_full_rank(X, release, settings, seeds)

    def _full_rank_rows(self, X):
        """The full-rank engine's design: dense float64, the intercept's ones last."""
        rows = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        if self.fit_intercept:
            rows = np.column_stack([rows, np.ones(rows.shape[0])])
        return rows

    def _full_rank_engine(self, settings):
        """The keyword arguments of :func:`~skdpvi.dpvi.run_dpvi_full_rank` for a fit's
        engine settings (the mean-field fit's mechanism)."""
        engine = settings.engine
        return dict(prior_scale=float(self.prior_scale),
                    noise_multiplier=engine["noise_multiplier"], clip_norm=engine["clip_norm"],
                    sampling_rate=engine["sampling_rate"], n_steps=engine["n_steps"],
                    burn_in=engine["burn_in"], learning_rate=engine["learning_rate"],
                    preconditioner=engine["preconditioner"],
                    n_mc_samples=engine["n_mc_samples"], elbo_gradients=self.elbo_gradients)

    def _finish_full_rank(self, X, release, settings, seeds):
        """The posterior, the fitted attributes and the checks of a full-rank release."""
        model = settings.engine["model"]
        start = time.perf_counter()
        directions = self._onehot_flat_directions()
        # "auto": the correction where an intercept measures it ("probit" checked it)
        correction = "probit" if self.wander_correction != "none" and self.fit_intercept \
            else "none"
        components, info = full_rank_posterior(
            release, prior_scale=float(self.prior_scale),
            n_components=int(self.n_posterior_samples),
            flat_directions=directions if len(directions) else None,
            wander_correction=correction == "probit",
            curvature_shrinkage=CURVATURE_SHRINKAGE, random_state=seeds.post)
        posterior = NoiseAwarePosterior.from_components(components, model, "full_rank")
        self.posterior_ = self._finish_posterior(posterior, model)
        self.error_model_ = None
        self.wander_correction_ = correction
        H = info["curvature"]
        diagnostics = {"curvature_eigenvalues": np.linalg.eigvalsh(H),
                       "optimum_error_share": float(np.trace(info["covariance"])
                                                    / (np.trace(info["covariance"])
                                                       + np.trace(info["component_covariance"])))}
        if "wander_width" in info:
            diagnostics["wander_width"] = info["wander_width"]
        diagnostics.update(_check_settled(release.mean_stats))
        verbose = int(self.verbose)
        _progress(verbose, 1, f"post-processing: full rank, {int(self.n_posterior_samples)} "
                              f"mixture components ({time.perf_counter() - start:.1f} s)")
        for line in _describe_diagnostics(diagnostics) if verbose >= 2 else ():
            _progress(verbose, 2, line)
        self._set_fit_attributes(release, settings, seeds, diagnostics)
        self._set_point_estimates(model)
        check_logistic_fit(self, X.shape[0], settings.engine, family="full_rank")
        check_full_rank_scales(self, H, float(self.prior_scale))
        check_full_rank_prior(self)

    def _fit_batch(self, datasets, random_states, verbose=0):
        """:meth:`_BaseDPBayesianRegression._fit_batch` for both families: the data sets
        "auto" fits with the mean field go through the mean-field lockstep engine, the
        others through :func:`~skdpvi.dpvi.run_dpvi_full_rank_batched` (runs of the
        same shape in lockstep, each as its own fit would run)."""
        if len(datasets) != len(random_states):
            raise ValueError("datasets and random_states must have the same length.")
        families = [self._family_for(X) for X, _ in datasets]
        fitted = [None] * len(datasets)
        mean_field = [k for k, family in enumerate(families) if family == "mean_field"]
        if mean_field:
            done = super()._fit_batch([datasets[k] for k in mean_field],
                                      [random_states[k] for k in mean_field], verbose)
            for k, est in zip(mean_field, done):
                est.variational_family_ = "mean_field"
                fitted[k] = est
        full_rank = [k for k, family in enumerate(families) if family == "full_rank"]
        inputs = []
        for k in full_rank:
            est = fitted[k] = clone(self).set_params(random_state=int(random_states[k]))
            inputs.append(est._fit_inputs(*datasets[k]))
            est._forget_decorrelation()
            est.variational_family_ = "full_rank"
        _fit_full_rank_together([fitted[k] for k in full_rank], inputs, verbose)
        return fitted

    def _batch_fit_supported(self):
        cls = type(self)
        return super()._batch_fit_supported() and all(
            getattr(cls, name).__module__.startswith("skdpvi.linear_model")
            for name in ("_fit_batch", "_fit_full_rank", "_full_rank_rows",
                         "_full_rank_engine", "_finish_full_rank"))


def _fit_full_rank_together(fitted, inputs, verbose=0):
    """Full-rank fits of validated inputs (``inputs[k]`` is ``fitted[k]``'s ``(X,
    y01)``), their DP-SGD runs in lockstep where the shape and the shared mechanism
    agree (each run keeps its own clipping norm, step and preconditioner)."""
    seeds = [est._fit_seeds() for est in fitted]
    settings = [est._engine_settings(X.shape[0], X.shape[1], X, s.engine)
                for est, (X, _), s in zip(fitted, inputs, seeds)]
    groups = {}
    for k, (X, _) in enumerate(inputs):
        engine = settings[k].engine
        key = (X.shape, engine["noise_multiplier"], engine["n_steps"], engine["burn_in"])
        groups.setdefault(key, []).append(k)
    for members in groups.values():
        engines = [fitted[k]._full_rank_engine(settings[k]) for k in members]
        shared = {**engines[0], **{name: [e[name] for e in engines]
                                   for name in ("clip_norm", "learning_rate", "preconditioner")}}
        releases = run_dpvi_full_rank_batched(
            [(fitted[k]._full_rank_rows(inputs[k][0]), inputs[k][1]) for k in members],
            random_states=[seeds[k].engine for k in members], verbose=verbose, **shared)
        for k, release in zip(members, releases):
            fitted[k]._finish_full_rank(inputs[k][0], release, settings[k], seeds[k])
