"""Which posterior a logistic fit builds from its release: the error model of phi*.

:class:`_LogisticErrorModels` resolves ``error_model`` and ``wander_correction``
("auto": per fit, from the release, :func:`~._logistic_dense.auto_dense_model`) and
turns the backend's draws of phi* into the mixture posterior: one of the dense models
(:func:`~._logistic_dense.dense_posterior`), or the paper's diagonal model, its means
optionally coupled (:func:`~skdpvi.noise_aware.coupled_means`) and shifted by the
wander's Jensen bias (:func:`~skdpvi.noise_aware.remove_wander_bias`). Post-processing
only.
"""

import numpy as np

from ..noise_aware import (coupled_means, logistic_wander_width,
                           remove_wander_bias)
from ..posterior import NoiseAwarePosterior
from ._logistic_dense import DENSE_MODELS, auto_dense_model, dense_posterior

ERROR_MODELS = ("auto", "diagonal", "coupled", *DENSE_MODELS)
#: The backends whose draws of phi* an error model other than "diagonal" remodels.
GRADIENT_MODEL_BACKENDS = ("emcee", "exact", "laplace")
WANDER_CORRECTIONS = ("auto", "none", "probit")


class _LogisticErrorModels:
    """The error-model part of :class:`~skdpvi.DPBayesianLogisticRegression`
    (``inference``, ``error_model``, ``wander_correction``, ``onehot_blocks``,
    ``prior_scale``, ``fit_intercept``; sets ``error_model_``, ``wander_correction_``)."""

    def _check_error_model_params(self):
        """Raise for a bad ``error_model`` or ``wander_correction``, or one the
        backend or the intercept does not support."""
        if self.error_model not in ERROR_MODELS:
            raise ValueError(f"error_model must be one of {ERROR_MODELS}, got "
                             f"error_model={self.error_model!r}.")
        if (self.error_model not in ("auto", "diagonal")
                and self.inference not in GRADIENT_MODEL_BACKENDS):
            raise ValueError(
                f"error_model={self.error_model!r} needs inference 'emcee', 'exact' or "
                f"'laplace' (it remodels their draws of phi*), got inference={self.inference!r}.")
        if self.wander_correction not in WANDER_CORRECTIONS:
            raise ValueError(f"wander_correction must be one of {WANDER_CORRECTIONS}, got "
                             f"wander_correction={self.wander_correction!r}.")
        if self.wander_correction == "probit":
            if not self.fit_intercept:
                raise ValueError(
                    f"wander_correction={self.wander_correction!r} needs fit_intercept=True: "
                    "the intercept's curvature measures the wander's effect.")
            if self.inference not in GRADIENT_MODEL_BACKENDS:
                raise ValueError(
                    f"wander_correction={self.wander_correction!r} needs inference 'emcee', "
                    f"'exact' or 'laplace', got inference={self.inference!r}.")

    def _resolve_models(self, result, n_params, n_samples=None):
        """Set ``error_model_`` and ``wander_correction_`` for this release (of a fit on
        ``n_samples`` rows); return the diagnostics of "auto"'s choice (empty when
        nothing was chosen)."""
        self.error_model_, choice = self._resolve_error_model(result, n_params, n_samples)
        self.wander_correction_ = self._resolve_wander_correction()
        return choice

    def _phi_star_backend(self):
        # the dense model draws the means itself: the cheap backend only runs the
        # split-window check
        return "last_iterate" if self.error_model_ in DENSE_MODELS else self.inference

    def _flat_directions(self):
        """The directions ``onehot_blocks`` leave the likelihood flat in, or None."""
        flat = self._onehot_flat_directions()
        return flat if len(flat) else None

    def _resolve_error_model(self, result, n_params, n_samples=None):
        """The error model of this fit ("auto" resolved, None for the backends without
        one) and, for "auto" with "exact", the diagnostics of its choice (the ratio of
        batch to noise counts with the default clip norm, as its warning does)."""
        if self.inference not in GRADIENT_MODEL_BACKENDS:
            return None, {}
        if self.error_model != "auto":
            return self.error_model, {}
        if self.inference != "exact":
            return "diagonal", {}
        ratio = (None if n_samples is None or self.clip_norm != "auto" else
                 result.sampling_rate * n_samples / (result.noise_multiplier * result.clip_norm))
        return auto_dense_model(result, n_params, fit_intercept=self.fit_intercept,
                                flat_directions=self._flat_directions(),
                                prior_scale=float(self.prior_scale), batch_over_noise=ratio)

    def _resolve_wander_correction(self):
        """"auto": "probit" with "dense_matched" and an intercept, "none" otherwise."""
        if self.wander_correction != "auto":
            return self.wander_correction
        return ("probit" if self.error_model_ == "dense_matched" and self.fit_intercept
                else "none")

    def _posterior_from_draws(self, phi_star, result, model, seed):
        if self.inference == "last_iterate":
            return NoiseAwarePosterior(phi_star, model, self.inference), {}
        p = model.n_params
        if self.error_model_ in DENSE_MODELS:
            return dense_posterior(
                self.error_model_, result, model, n_components=len(phi_star),
                prior_scale=self.prior_scale,
                flat_directions=(self._flat_directions()
                                 if self.error_model_ == "dense_matched" else None),
                wander_correction=self.wander_correction_ == "probit", random_state=seed)
        extra = {}
        if self.wander_correction_ == "probit":
            width = logistic_wander_width(result.stats, n_means=p,
                                          sampling_rate=result.sampling_rate,
                                          prior_scale=self.prior_scale)
            extra["wander_width"] = width
        if self.error_model_ == "coupled":
            phi_star, _ = coupled_means(phi_star, result.stats, n_means=p,
                                        learning_rate=result.learning_rate,
                                        noise_std=result.noise_std, random_state=seed)
        if "wander_width" in extra:
            phi_star = phi_star.copy()
            phi_star[:, :p] = remove_wander_bias(
                phi_star[:, :p], width, prior_scale=self.prior_scale,
                variances=np.logaddexp(0.0, phi_star[:, p:]) ** 2)
        return NoiseAwarePosterior(phi_star, model, self.inference), extra
