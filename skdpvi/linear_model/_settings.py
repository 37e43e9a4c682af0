"""Part (a) of a fit: the validated parameters and what the DP-SGD engine needs.

:class:`_SettingsMixin` turns an estimator's parameters and the shape of the data
into a :class:`_FitSettings` (the accountant's noise multiplier for the budget, the
model, clipping norm, learning rate and preconditioner) before the DP-SGD run; the
rows enter only where the logistic estimator measures its clipping norm privately
(a noisy histogram of their norms, :mod:`skdpvi.dpvi.clip_bound`, accounted with
the run). It also gives the DP mechanisms a fit runs or would run (for privacy
accounting of model searches). :mod:`._base` composes it with the engine and the post-processing.
"""

import math
import time
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.utils import check_random_state

from ..accounting import DPSGDMechanism, noise_multiplier
from ..accounting.budget import _check_budget
from ..dpvi import heuristic_learning_rate
from ..dpvi.clip_bound import (bound_is_informative, histogram_noise_std, private_norm_bound,
                               row_norms_with_intercept)
from ..dpvi.schedule import _default_preconditioning
from ..noise_aware import INFERENCE_METHODS
from ..utils.validation import is_int, is_real
from ._reporting import _progress, _warn_if_delta_meaningless

#: The ``elbo_gradients`` of the estimators.
ELBO_GRADIENTS = ("monte_carlo", "closed_form")

#: The default post-processing of models with data statistics, and every method
#: ``inference=`` accepts.
STATISTICS = "statistics"
_INFERENCE = (STATISTICS,) + tuple(INFERENCE_METHODS)


@dataclass
class _FitSettings:
    """What part (a) of a fit fixes, before the DP-SGD run.

    ``engine`` holds the keyword arguments of :func:`skdpvi.dpvi.run_dpvi` and
    :func:`skdpvi.dpvi.run_dpvi_batched` (the model included; the data, the seeds and
    the verbosity not), passed verbatim to either; ``epsilon`` is the epsilon the
    accountant certifies for its noise multiplier.
    """

    engine: dict
    epsilon: float
    #: noise std of the private row-norm histogram that chose the clipping norm
    #: (:mod:`skdpvi.dpvi.clip_bound`); None if the clipping norm was fixed
    clip_histogram_noise: float = None


def histogram_mechanism(noise_std):
    """The row-norm histogram as the accountant sees it: one full-batch DP-SGD step
    of clip norm 1 (every row adds a one-hot vector of norm 1)."""
    return DPSGDMechanism(noise_multiplier=float(noise_std), sampling_rate=1.0, steps=1)


#: Mixed with a fit's engine seed into the seed of its private row-norm histogram.
_CLIP_STREAM = 0x636C6970

#: The seeds of one fit, drawn from ``random_state``: the DP-SGD run's, the
#: post-processing's and the posterior draws'.
_FitSeeds = namedtuple("_FitSeeds", ["engine", "post", "draw"])


class _SettingsMixin:
    """Validation of the parameters and part (a) of a fit (see :mod:`._base`)."""

    #: Whether ``clip_norm="auto"`` measures the rows' norms privately (a subclass's
    #: choice; else it is the fixed ``_default_clip_norm``).
    _private_clip_norm = False

    def _check_params(self, n_samples):
        for name in ("epsilon", "delta", "sampling_rate"):
            if getattr(self, name) is None:  # _check_budget reads None as "not given"
                raise ValueError(f"{name} must be a number, got {name}=None.")
        _check_budget(epsilon=self.epsilon, delta=self.delta, sampling_rate=self.sampling_rate)
        if not (isinstance(self.verbose, (bool, np.bool_))
                or (is_int(self.verbose) and self.verbose >= 0)):
            raise ValueError(f"verbose must be an integer >= 0, got verbose={self.verbose!r}.")
        _warn_if_delta_meaningless(self.delta, n_samples)
        if not is_int(self.max_iter) or self.max_iter < 1:
            raise ValueError(f"max_iter must be an integer >= 1, got max_iter={self.max_iter!r}.")
        if self.sampling_rate * n_samples < 1:
            raise ValueError(
                f"sampling_rate={self.sampling_rate!r} with {n_samples} samples gives an "
                f"expected batch of {self.sampling_rate * n_samples:.2g} < 1 example; "
                "increase sampling_rate or use more data."
            )
        burn_in = self._resolve_burn_in()
        if self.max_iter - burn_in < 2:
            raise ValueError(
                f"burn_in={self.burn_in!r} leaves {self.max_iter - burn_in} of "
                f"max_iter={self.max_iter} steps for post-processing; at least 2 are needed "
                "(burn_in must be smaller than max_iter)."
            )
        if not (self.clip_norm == "auto" or (is_real(self.clip_norm) and self.clip_norm > 0
                                             and math.isfinite(self.clip_norm))):
            raise ValueError(f"clip_norm must be 'auto' or a number > 0, got {self.clip_norm!r}.")
        for name in ("learning_rate", "learning_rate_scale", "scale_preconditioning"):
            value = getattr(self, name)
            if not (value == "auto" or (is_real(value) and value > 0 and math.isfinite(value))):
                raise ValueError(f"{name} must be 'auto' or a number > 0, got {value!r}.")
        if not is_int(self.n_mc_samples) or self.n_mc_samples < 1:
            raise ValueError(f"n_mc_samples must be an integer >= 1, got {self.n_mc_samples!r}.")
        if self.elbo_gradients not in ELBO_GRADIENTS:
            raise ValueError(f"elbo_gradients must be one of {ELBO_GRADIENTS}, got "
                             f"elbo_gradients={self.elbo_gradients!r}.")
        if self.inference not in _INFERENCE:
            raise ValueError(
                f"inference must be one of {_INFERENCE}, got inference={self.inference!r}."
            )
        if not is_int(self.n_posterior_samples) or self.n_posterior_samples < 1:
            raise ValueError(
                "n_posterior_samples must be an integer >= 1, got "
                f"{self.n_posterior_samples!r}."
            )
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValueError(f"fit_intercept must be a bool, got {self.fit_intercept!r}.")
        try:  # torch's own errors here are a RuntimeError or, without CUDA, an AssertionError
            torch.empty(0, device=self.device)
        except (RuntimeError, AssertionError, TypeError) as exc:
            raise ValueError(f"device must be a torch device available here, e.g. 'cpu'; "
                             f"got device={self.device!r} ({exc}).") from None
        return burn_in

    def _resolve_burn_in(self):
        b = self.burn_in
        if is_real(b) and not is_int(b) and 0 <= b < 1:
            return int(b * self.max_iter)
        if is_int(b) and 0 <= b:
            if b >= self.max_iter:
                raise ValueError(
                    f"burn_in={b} must be smaller than max_iter={self.max_iter}."
                )
            return int(b)
        raise ValueError(
            "burn_in must be a fraction in [0, 1) or a number of steps in [0, max_iter), "
            f"got burn_in={b!r}."
        )

    def _fit_seeds(self):
        """The seeds of a fit with this ``random_state`` (one draw of three numbers)."""
        rng = check_random_state(self.random_state)
        return _FitSeeds(*(int(s) for s in rng.randint(0, 2**31 - 1, size=3)))

    def _engine_settings(self, n_samples, n_features, X=None, seed=None):
        """(a) Everything the DP-SGD engine needs for data of this shape.

        Validates the parameters and computes the noise multiplier, the model, the
        clipping norm, the learning rate and the preconditioner. Only the shape of the
        data is used, except where :meth:`_clip_histogram_noise` plans a private
        clipping norm: then the rows ``X`` enter once, through the noisy histogram of
        their norms (:func:`~skdpvi.dpvi.clip_bound.private_norm_bound`, noise drawn
        from ``seed``), whose share of the budget the accountant composes with the
        DP-SGD run.

        Returns
        -------
        _FitSettings
            Its ``engine`` dict goes verbatim to :func:`~skdpvi.dpvi.run_dpvi` (one
            fit) or :func:`~skdpvi.dpvi.run_dpvi_batched` (:meth:`_fit_batch`).
        """
        burn_in = self._check_params(n_samples)
        model = self._make_model(n_features)
        self._onehot_blocks(n_features)  # validated before the budget is spent
        model.exact_expectations = self.elbo_gradients == "closed_form"
        if self.inference == STATISTICS and model.data_statistics(n_samples) is None:
            raise ValueError(
                f"inference='statistics' needs a model with data statistics; "
                f"{type(model).__name__} has none. Use inference='emcee'."
            )
        verbose = int(self.verbose)
        start = time.perf_counter()
        histogram_noise = self._clip_histogram_noise(n_samples)
        sigma, eps_achieved = self._run_noise_multiplier(n_samples)
        _progress(verbose, 1, f"accounting: noise multiplier sigma={sigma:.5g}, certified "
                              f"epsilon={eps_achieved:.5g} at delta={self.delta:g} "
                              f"({time.perf_counter() - start:.1f} s)")
        if self.clip_norm != "auto":
            clip = float(self.clip_norm)
        elif histogram_noise is None:
            clip = self._default_clip_norm(model)
        else:
            if X is None or seed is None:
                raise ValueError("a private clipping norm needs the rows X and a seed.")
            clip, _ = private_norm_bound(
                row_norms_with_intercept(X, self._rows_with_intercept),
                self._default_clip_norm(model), histogram_noise,
                np.random.default_rng([int(seed), _CLIP_STREAM]))
            _progress(verbose, 2, f"clipping norm {clip:.4g} from the rows' private norm "
                                  f"histogram (noise std {histogram_noise:.3g})")
        lam_c = self._learning_rate_scale(model)
        lam = (heuristic_learning_rate(sigma, clip, int(self.max_iter), 2 * model.n_params, lam_c)
               if self.learning_rate == "auto" else float(self.learning_rate))
        beta = (_default_preconditioning(lam, int(self.max_iter), model, clip, n_samples)
                if self.scale_preconditioning == "auto" else float(self.scale_preconditioning))
        _progress(verbose, 2, f"DP-SGD: {int(self.max_iter)} steps, sampling rate "
                              f"{self.sampling_rate:g} (expected batch "
                              f"{self.sampling_rate * n_samples:.1f} rows), clip norm {clip:.4g}, "
                              f"learning rate {lam:.4g}, scale preconditioning {beta:.4g}")
        engine = dict(
            model=model,
            noise_multiplier=sigma,
            clip_norm=clip,
            sampling_rate=self.sampling_rate,
            n_steps=int(self.max_iter),
            burn_in=burn_in,
            learning_rate=lam,
            n_mc_samples=int(self.n_mc_samples),
            preconditioner=beta,
            record_trace=self.inference == STATISTICS,
            device=self.device,
        )
        step_matrix = self._step_matrix(engine, n_samples)
        if step_matrix is not None:
            engine["step_matrix"] = step_matrix
        return _FitSettings(engine=engine, epsilon=eps_achieved,
                            clip_histogram_noise=histogram_noise)

    def _learning_rate_scale(self, model):
        """lambda_c of the heuristic learning rate for ``model`` (``learning_rate_scale``
        resolved)."""
        if self.learning_rate_scale == "auto":
            return self._default_learning_rate_scale(2 * model.n_params)
        return float(self.learning_rate_scale)

    def _run_noise_multiplier(self, n_samples):
        """(sigma, certified epsilon) of the DP-SGD run of a fit on ``n_samples`` rows,
        composed with the fit's other mechanisms (public numbers only; cached)."""
        histogram_noise = self._clip_histogram_noise(n_samples)
        composed = () if histogram_noise is None else (histogram_mechanism(histogram_noise),)
        return noise_multiplier(self.epsilon, self.delta, self.sampling_rate,
                                int(self.max_iter),
                                composed_with=composed + self._other_mechanisms())

    def _clip_histogram_noise(self, n_samples):
        """Noise std of the private row-norm histogram a fit on ``n_samples`` rows runs,
        or None if it runs none.

        It runs when ``clip_norm="auto"``, the estimator chooses its clipping norm from
        the data (``_private_clip_norm``) and the histogram can lower the bound at all
        for this budget and number of rows (a decision from public numbers only).
        """
        if self.clip_norm != "auto" or not self._private_clip_norm:
            return None
        noise = self._histogram_noise()
        return noise if bound_is_informative(n_samples, noise) else None

    def _histogram_noise(self):
        """Noise std of the row-norm histogram for this budget (if it runs)."""
        whole_budget_noise, _ = noise_multiplier(self.epsilon, self.delta, 1.0, 1)
        return histogram_noise_std(whole_budget_noise)

    @property
    def _rows_with_intercept(self):
        """Whether the rows' norms (the clipping histogram's) count the intercept's 1."""
        return self.fit_intercept

    def _other_mechanisms(self):
        """Mechanisms a fit runs besides the DP-SGD run and the clipping histogram (a
        subclass's; fitted: those that ran, unfitted: those a fit would run)."""
        return ()

    def _step_matrix(self, engine, n_samples):
        """A ``step_matrix`` for the engine (a subclass's; None: the plain step)."""
        return None

    def _dp_mechanism(self):
        """The mechanisms of this estimator's fit, and the delta of its budget.

        Fitted: the mechanisms that ran. Unfitted: those a fit with the current
        parameters would run, the noise multiplier from the accountant; the number of
        rows is not known then, and a private clipping norm's histogram is assumed to
        run wherever it can (it shares the budget, so the fit's epsilon is the same
        either way). Through this method :func:`skdpvi.accounting.total_privacy_spent`
        accounts every candidate of a model search without fitting it.

        Returns
        -------
        mechanisms : tuple of skdpvi.accounting.DPSGDMechanism
            The DP-SGD run first, then the row-norm histogram, if any, then the
            mechanisms of :meth:`_other_mechanisms` (the logistic estimator's Gram
            release).
        delta : float
        """
        if hasattr(self, "noise_multiplier_"):
            run = DPSGDMechanism(self.noise_multiplier_, self.sampling_rate, self.n_iter_)
            noise = getattr(self, "clip_histogram_noise_", None)
            extra = () if noise is None else (histogram_mechanism(noise),)
            return (run, *extra, *self._other_mechanisms()), self.delta_
        extra = ()
        if self.clip_norm == "auto" and self._private_clip_norm:
            extra = (histogram_mechanism(self._histogram_noise()),)
        extra = extra + self._other_mechanisms()
        sigma, _ = noise_multiplier(self.epsilon, self.delta, self.sampling_rate, self.max_iter,
                                    composed_with=extra)
        return (DPSGDMechanism(sigma, self.sampling_rate, self.max_iter), *extra), self.delta
