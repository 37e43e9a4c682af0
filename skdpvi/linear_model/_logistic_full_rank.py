"""The logistic estimator's full-rank variational family (``variational_family="full_rank"``).

A fit runs DP-SGD on ``q = N(m, L L^T)`` (:func:`~skdpvi.dpvi.run_dpvi_full_rank`)
with the mechanism the mean-field fit would run (the same accountant, noise
multiplier, private clipping norm, learning rate and burn-in), and reads the
posterior's curvature off the release's scale moments
(:func:`~skdpvi.noise_aware.full_rank_posterior`) instead of the wander's covariance.
The wander's outward (Jensen) bias is removed as ``wander_correction="probit"``
does for the mean-field fit, read through the full-rank curvature ("auto": with an
intercept). The mean-field options that remodel the wander's curvature
(``error_model``, ``decorrelation``) and the other backends do not apply. Runs one
fit at a time (no lockstep path): a simulation study fits each data set on its own.
Measured, not the default (results page, "A full-rank variational family"): joint
widths far better calibrated, TARP no better, too narrow on strongly correlated
features.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from ..dpvi.full_rank import run_dpvi_full_rank
from ..noise_aware.full_rank import full_rank_posterior
from ..posterior import NoiseAwarePosterior
from ._logistic_release_checks import check_logistic_fit

#: The values of ``variational_family``.
VARIATIONAL_FAMILIES = ("mean_field", "full_rank")


class _FullRankMixin:
    """``variational_family`` of :class:`DPBayesianLogisticRegression`."""

    @property
    def _full_rank(self):
        return self.variational_family == "full_rank"

    def _check_variational_family(self):
        """Raise for a bad ``variational_family`` or an option it does not support."""
        if self.variational_family not in VARIATIONAL_FAMILIES:
            raise ValueError(f"variational_family must be one of {VARIATIONAL_FAMILIES}, "
                             f"got variational_family={self.variational_family!r}.")
        if not self._full_rank:
            return
        unsupported = {"inference": (self.inference, "exact"),
                       "error_model": (self.error_model, "auto"),
                       "elbo_gradients": (self.elbo_gradients, "monte_carlo"),
                       "device": (self.device, "cpu")}
        for name, (value, supported) in unsupported.items():
            if value != supported:
                raise ValueError(f"variational_family='full_rank' needs {name}={supported!r}, "
                                 f"got {name}={value!r}.")
        if self.decorrelation is not None:
            raise ValueError("decorrelation rotates the mean-field fit; with "
                             "variational_family='full_rank' the fit reads the "
                             "correlations itself (decorrelation must be None).")

    def _fit_full_rank(self, X, y01):
        """``fit`` with ``variational_family="full_rank"`` on validated inputs."""
        seeds = self._fit_seeds()
        settings = self._engine_settings(X.shape[0], X.shape[1], X, seeds.engine)
        engine = settings.engine
        model = engine["model"]
        rows = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        if self.fit_intercept:
            rows = np.column_stack([rows, np.ones(rows.shape[0])])
        release = run_dpvi_full_rank(
            rows, y01, prior_scale=float(self.prior_scale),
            noise_multiplier=engine["noise_multiplier"], clip_norm=engine["clip_norm"],
            sampling_rate=engine["sampling_rate"], n_steps=engine["n_steps"],
            burn_in=engine["burn_in"], learning_rate=engine["learning_rate"],
            preconditioner=engine["preconditioner"], n_mc_samples=engine["n_mc_samples"],
            random_state=seeds.engine, verbose=self.verbose)
        directions = self._onehot_flat_directions()
        # "auto": the correction where an intercept measures it ("probit" checked it)
        correction = "probit" if self.wander_correction != "none" and self.fit_intercept \
            else "none"
        components, info = full_rank_posterior(
            release, prior_scale=float(self.prior_scale),
            n_components=int(self.n_posterior_samples),
            flat_directions=directions if len(directions) else None,
            wander_correction=correction == "probit", random_state=seeds.post)
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
        self._set_fit_attributes(release, settings, seeds, diagnostics)
        self._set_point_estimates(model)
        check_logistic_fit(self, X.shape[0], engine)

    def _fit_batch(self, datasets, random_states, verbose=0):
        if not self._full_rank:
            return super()._fit_batch(datasets, random_states, verbose)
        return [clone(self).set_params(random_state=int(s)).fit(X, y)
                for (X, y), s in zip(datasets, random_states)]

    def _batch_fit_supported(self):
        return not self._full_rank and super()._batch_fit_supported()
